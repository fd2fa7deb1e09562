//go:build linux

package transfer_test

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hpncp/hpncp/transfer"
)

// The conformance suite: one table of cases, each run on every end (local,
// SFTP, legacy SCP and tar, against the in-process server and a real sshd,
// both ways). A case asserts what a user would check after the copy; an
// end that fails a case today says so in its differs, with the reason.

// tempPrefix starts the names of files being written (transfer's
// tempPrefix): none may be left behind.
const tempPrefix = ".hpncp."

// problems collects what a case found wrong, so that the runner can tell
// a failure from a documented difference.
type problems []string

func (p *problems) add(format string, args ...any) { *p = append(*p, fmt.Sprintf(format, args...)) }

func (p problems) contain(s string) bool {
	return slices.ContainsFunc(p, func(q string) bool { return strings.Contains(q, s) })
}

// confCase is one row of the table.
type confCase struct {
	name string
	// skip, when not nil, says why the case cannot run on e ("" when it can).
	skip func(e end) string
	run  func(t *testing.T, e end, cp copyFunc, p *problems)
}

// The suite's tests run in parallel with each other and nothing else:
// their ends wait mostly for processes the servers start.

func TestConformanceLocal(t *testing.T) {
	t.Parallel()
	runConformance(t, markDifferences([]end{localEnd()}))
}

func TestConformanceInProcess(t *testing.T) {
	t.Parallel()
	s := inProcess(t)
	var ends []end
	ends = append(ends, sftpEnds(s, withParallel, "sftp")...)
	ends = append(ends, scpEnds(s)...)
	ends = append(ends, countedTarEnds()...)
	for i := range ends {
		if !ends[i].up {
			switch {
			case strings.HasPrefix(ends[i].name, "sftp"):
				ends[i].hostile = hostileSFTP(withParallel)
			case strings.HasPrefix(ends[i].name, "tar"):
				ends[i].hostile = hostileSFTP(withTar)
			case strings.HasPrefix(ends[i].name, "scp"):
				ends[i].hostile = hostileSCP
			}
		}
	}
	runConformance(t, markDifferences(ends))
}

func TestConformanceSSHD(t *testing.T) {
	t.Parallel()
	s, sshd := realSSHD(t)
	var ends []end
	ends = append(ends, sftpEnds(s, withParallel, "sftp")...)
	ends = append(ends, scpEnds(s)...)
	ends = append(ends, sftpEnds(s, withTar, "tar")...)
	runConformance(t, markDifferences(ends))
	t.Run("oracle", func(t *testing.T) {
		t.Parallel()
		layoutOracle(t, sshd)
	})
}

// knownDifferences are the cases some ends fail today: ends is a
// path.Match pattern on end names. Each is either a property of the end
// or a finding, as why says.
var knownDifferences = []struct {
	ends, name string
	difference
}{
	// The remote scp -t writes each file in place under its final name:
	// the protocol has no way to ask for a temporary one.
	{"scp-*-up", "cancel mid-file", difference{expect: "after the cancel the target holds",
		why: "scp upload writes in place: a cancelled file has replaced the previous one"}},
	{"scp-*-up", "disk full", difference{expect: "d/huge:",
		why: "scp upload writes in place: the part of a file that fitted stays under its final name"}},
	{"scp-*-up", "control characters in names", difference{expect: "which the scp protocol cannot send",
		why: "a name with a newline cannot be sent over scp; it is refused, the others go"}},
	{"scp-*-down", "control characters in names", difference{expect: "contains a control character",
		why: "a name with a control character from an scp source is refused as hostile, and the refusal ends that source's session: its later entries are not copied (one error names the source)"}},
	{"scp-inproc-down", "hostile names", difference{expect: "no error names the hostile entry",
		why: "a hostile name from an scp source is a protocol error that ends the session: the first is refused and named, the later ones are never read"}},
	{"scp-inproc-down", "duplicate names", difference{expect: "want one naming",
		why: "an scp source's stream is not a listing: a name sent again comes after its first entry was written (below the target); the second is refused and named, and this test's scp source, which sends the refused file's bytes all the same, ends the session with a protocol error"}},
	// Tar carries no access times, and tar -x on the server sets none.
	{"tar-*-up", "preserve", difference{expect: "atime",
		why: "--tar -p uploads carry no access times (README says so); scp -p and SFTP -p do"}},
	// A tar stream fails as a whole.
	{"tar-*", "disk full", difference{expect: "full target",
		why: "a tar stream fails as a whole: the small file beside the large one in the same stream is not copied (the error says so)"}},
	// pkg/sftp's server, under internal/sshtest, sends a file's mtime as
	// its atime; OpenSSH's sends both.
	{"sftp-inproc-down", "preserve", difference{expect: "atime",
		why: "the in-process server reports every access time as the modification time"}},
	{"tar-inproc-down", "preserve", difference{expect: "atime",
		why: "the in-process server reports every access time as the modification time"}},
}

// markDifferences records on each end the cases it fails today.
func markDifferences(ends []end) []end {
	for _, k := range knownDifferences {
		if !slices.ContainsFunc(confCases(), func(c confCase) bool { return c.name == k.name }) {
			panic("knownDifferences names no case " + k.name)
		}
	}
	for i, e := range ends {
		ends[i].differs = map[string]difference{}
		for _, k := range knownDifferences {
			if ok, _ := path.Match(k.ends, e.name); ok {
				if _, dup := ends[i].differs[k.name]; dup {
					panic("two differences for " + e.name + " " + k.name)
				}
				ends[i].differs[k.name] = k.difference
			}
		}
	}
	return ends
}

func runConformance(t *testing.T, ends []end) {
	for _, e := range ends {
		t.Run(e.name, func(t *testing.T) {
			// The ends spend most of their time waiting for processes
			// the server starts; they share nothing but the server.
			t.Parallel()
			// One connection for all the cases of an end: a real sshd
			// takes a good part of a second for each on a loaded machine.
			cp := e.open(t)
			for _, c := range confCases() {
				// A case this end cannot take part in (a far side that
				// cannot be made to send hostile names) is no subtest:
				// a skipped test against sshd would read as an end-to-end
				// test left out.
				if c.skip != nil {
					if why := c.skip(e); why != "" {
						t.Logf("%s: not for this end: %s", c.name, why)
						continue
					}
				}
				t.Run(c.name, func(t *testing.T) {
					var p problems
					c.run(t, e, cp, &p)
					d, marked := e.differs[c.name]
					switch {
					case !marked:
						for _, q := range p {
							t.Error(q)
						}
					case len(p) == 0:
						t.Errorf("marked as a difference (%s) but passes: remove the mark", d.why)
					case !p.contain(d.expect):
						t.Errorf("marked as a difference (%s, showing %q) but fails otherwise:\n%s", d.why, d.expect, strings.Join(p, "\n"))
					default:
						t.Logf("documented difference: %s:\n%s", d.why, strings.Join(p, "\n"))
					}
				})
			}
		})
	}
}

// layoutCase copies below a source root holding layoutSource into a
// target root holding target, and compares the target root with want.
type layoutCase struct {
	name      string
	recursive bool
	target    []string // entries at the target root beforehand (mkTree)
	srcs      []string // below the source root; a trailing / is kept
	to        string   // below the target root
	want      []string // the target root afterwards (listTree); nil when the copy must fail
}

var layoutSource = []string{"a.txt=A", "b.txt=B", "dir/b=B", "dir/sub/c=C", "dir/empty/"}

// layoutCases hold scp's rules; layoutOracle checks them against
// OpenSSH's scp, in both of its protocols, both ways.
var layoutCases = []layoutCase{
	{name: "file to missing name", srcs: []string{"a.txt"}, to: "new.txt", want: []string{"new.txt:A"}},
	{name: "file into dir", target: []string{"in/"}, srcs: []string{"a.txt"}, to: "in",
		want: []string{"in/", "in/a.txt:A"}},
	{name: "file over file", target: []string{"old=old content"}, srcs: []string{"a.txt"}, to: "old",
		want: []string{"old:A"}},
	{name: "dir to missing dir", recursive: true, srcs: []string{"dir"}, to: "x",
		want: []string{"x/", "x/b:B", "x/empty/", "x/sub/", "x/sub/c:C"}},
	{name: "dir into existing dir", recursive: true, target: []string{"x/"}, srcs: []string{"dir"}, to: "x",
		want: []string{"x/", "x/dir/", "x/dir/b:B", "x/dir/empty/", "x/dir/sub/", "x/dir/sub/c:C"}},
	{name: "dir with trailing slash into existing dir", recursive: true, target: []string{"x/"}, srcs: []string{"dir/"}, to: "x",
		want: []string{"x/", "x/dir/", "x/dir/b:B", "x/dir/empty/", "x/dir/sub/", "x/dir/sub/c:C"}},
	{name: "dir merged into existing copy", recursive: true, target: []string{"x/dir/sub/c=old", "x/dir/keep=K"}, srcs: []string{"dir"}, to: "x",
		want: []string{"x/", "x/dir/", "x/dir/b:B", "x/dir/empty/", "x/dir/keep:K", "x/dir/sub/", "x/dir/sub/c:C"}},
	{name: "several sources into dir", recursive: true, target: []string{"in/"}, srcs: []string{"a.txt", "b.txt", "dir"}, to: "in",
		want: []string{"in/", "in/a.txt:A", "in/b.txt:B", "in/dir/", "in/dir/b:B", "in/dir/empty/", "in/dir/sub/", "in/dir/sub/c:C"}},
	{name: "several sources to missing name", srcs: []string{"a.txt", "b.txt"}, to: "nope"},
	{name: "several sources to a file", target: []string{"f=keep"}, srcs: []string{"a.txt", "b.txt"}, to: "f"},
}

func confCases() []confCase {
	var cs []confCase
	for _, lc := range layoutCases {
		cs = append(cs, confCase{name: "layout/" + lc.name, run: func(t *testing.T, _ end, cp copyFunc, p *problems) { runLayout(t, cp, lc, p) }})
	}
	return append(cs,
		confCase{name: "names", run: caseNames},
		confCase{name: "control characters in names", run: caseControlNames},
		confCase{name: "hostile names", skip: func(e end) string {
			if e.hostile == nil {
				return "its far side cannot be made to send hostile names"
			}
			return ""
		}, run: caseHostile},
		confCase{name: "duplicate names", skip: func(e end) string {
			if e.hostile == nil {
				return "its far side cannot be made to send hostile names"
			}
			return ""
		}, run: caseDuplicates},
		confCase{name: "preserve", run: casePreserve},
		confCase{name: "modes without -p", run: caseModes},
		confCase{name: "empty files and dirs", run: caseEmpty},
		confCase{name: "failing source among good", run: caseFailingSource},
		confCase{name: "cancel mid-file", run: caseCancel},
		confCase{name: "disk full", skip: func(end) string {
			if os.Geteuid() != 0 {
				return "needs root to mount a small tmpfs"
			}
			return ""
		}, run: caseDiskFull},
	)
}

func runLayout(t *testing.T, cp copyFunc, lc layoutCase, p *problems) {
	src, dst := t.TempDir(), t.TempDir()
	mkTree(t, src, layoutSource...)
	mkTree(t, dst, lc.target...)
	before := listTree(t, dst)
	res, err := cp(context.Background(), under(src, lc.srcs...), filepath.Join(dst, lc.to),
		transfer.Options{Recursive: lc.recursive})
	if lc.want == nil {
		if err == nil && len(res.Errors) == 0 {
			p.add("copy succeeded, want it refused")
		}
		if got := listTree(t, dst); !slices.Equal(got, before) {
			p.add("a refused copy changed the target root:\n got %q\nwant %q", got, before)
		}
		return
	}
	noFailure(p, res, err)
	if got := listTree(t, dst); !slices.Equal(got, lc.want) {
		p.add("target root\n got %q\nwant %q", got, lc.want)
	}
	noTemps(t, p, dst)
}

// confNames are names that trip quoting and parsing: spaces, quotes,
// shell characters, a leading dash, non-ASCII.
var confNames = []string{
	"name with spaces", " leading space", "trailing space ", "it's", `double"quote`, "$HOME", "a;b&c|d",
	"*star?", "back\\slash", "-leading-dash", "--", "ünïcödé-名前.txt", "dir with space/-x y",
}

// controlNames hold control characters, which a terminal would act on.
var controlNames = []string{"tab\there", "new\nline", "esc\x1b[31mred"}

func caseNames(t *testing.T, e end, cp copyFunc, p *problems) {
	src, dst := t.TempDir(), t.TempDir()
	var entries []string
	for i, n := range confNames {
		entries = append(entries, "n/"+n+"="+strings.Repeat(string(rune('a'+i)), i+1))
	}
	mkTree(t, src, entries...)
	mkTree(t, dst, "single/")
	res, err := cp(context.Background(), under(src, "n"), filepath.Join(dst, "out"), transfer.Options{Recursive: true})
	noFailure(p, res, err)
	if got, want := listTree(t, filepath.Join(dst, "out")), listTree(t, filepath.Join(src, "n")); !slices.Equal(got, want) {
		p.add("tree of names\n got %q\nwant %q", got, want)
	}
	// Files named as operands, each on its own.
	res, err = cp(context.Background(), under(src, "n/-leading-dash", "n/it's", "n/ünïcödé-名前.txt", "n/--"),
		filepath.Join(dst, "single"), transfer.Options{})
	noFailure(p, res, err)
	want := []string{"--:" + content(t, src, "n/--"), "-leading-dash:" + content(t, src, "n/-leading-dash"),
		"it's:" + content(t, src, "n/it's"), "ünïcödé-名前.txt:" + content(t, src, "n/ünïcödé-名前.txt")}
	if got := listTree(t, filepath.Join(dst, "single")); !slices.Equal(got, want) {
		p.add("operands with odd names\n got %q\nwant %q", got, want)
	}
	noTemps(t, p, dst)
}

// caseControlNames copies a tree whose names hold control characters
// beside plain ones.
func caseControlNames(t *testing.T, e end, cp copyFunc, p *problems) {
	src, dst := t.TempDir(), t.TempDir()
	entries := []string{"c/plain=plain"}
	for _, n := range controlNames {
		entries = append(entries, "c/"+n+"="+n)
	}
	mkTree(t, src, entries...)
	res, err := cp(context.Background(), under(src, "c"), filepath.Join(dst, "out"), transfer.Options{Recursive: true})
	noFailure(p, res, err)
	if got, want := listTree(t, filepath.Join(dst, "out")), listTree(t, filepath.Join(src, "c")); !slices.Equal(got, want) {
		p.add("tree of names\n got %q\nwant %q", got, want)
	}
	noTemps(t, p, dst)
}

// hostileNames are what a broken or malicious server might list: each
// would put a file outside the target directory.
var hostileNames = []string{"..", "../escape", "a/../../escape2", "/tmp/abs-escape"}

func caseHostile(t *testing.T, e end, cp copyFunc, p *problems) {
	src := t.TempDir()
	// The files an escaping name would reach on the server.
	mkTree(t, src, "d/good=hello", "escape=SECRET", "escape2=SECRET")
	outer := t.TempDir()
	dst := filepath.Join(outer, "target")
	mkTree(t, outer, "target/")
	res, err := e.hostile(t, filepath.Join(src, "d"), append([]string{"good"}, hostileNames...))(
		context.Background(), under(src, "d"), filepath.Join(dst, "out"), transfer.Options{Recursive: true})
	if err != nil {
		p.add("copy gave up: %v; want the hostile names refused one by one", err)
	}
	if res == nil || len(res.Errors) == 0 {
		p.add("no error reported for the hostile names")
	} else {
		msgs := joinErrors(res.Errors)
		if len(res.Errors) != len(hostileNames) {
			p.add("%d errors, want one for each of the %d hostile names:\n%s", len(res.Errors), len(hostileNames), msgs)
		}
		for _, n := range hostileNames {
			if !strings.Contains(msgs, n) {
				p.add("no error names the hostile entry %q; errors:\n%s", n, msgs)
			}
		}
	}
	got := listTree(t, outer)
	for _, line := range got {
		if line != "target/" && line != "target/out/" && line != "target/out/good:hello" {
			p.add("after the hostile listing %q exists (the tree is %q)", line, got)
		}
	}
	if _, err := os.Lstat("/tmp/abs-escape"); err == nil {
		p.add("/tmp/abs-escape was written")
	}
}

// caseDuplicates: a listing that names an entry twice is refused for
// that name, which is named in the error, and the rest is copied.
func caseDuplicates(t *testing.T, e end, cp copyFunc, p *problems) {
	src := t.TempDir()
	// Of the size the hostile listing gives: five bytes on the local
	// end, none (no size at all) on the servers'.
	content := ""
	if e.name == "local" {
		content = "hello"
	}
	mkTree(t, src, "d/good="+content, "d/dup="+content)
	outer := t.TempDir()
	dst := filepath.Join(outer, "target")
	mkTree(t, outer, "target/")
	res, err := e.hostile(t, filepath.Join(src, "d"), []string{"dup", "good", "dup"})(
		context.Background(), under(src, "d"), filepath.Join(dst, "out"), transfer.Options{Recursive: true})
	switch {
	case err != nil:
		p.add("copy gave up: %v; want the duplicate refused alone", err)
	case len(res.Errors) != 1 || !errors.Is(res.Errors[0], transfer.ErrDuplicateName) || !strings.Contains(res.Errors[0].Error(), `"dup"`):
		p.add("errors %q, want one naming \"dup\" as listed twice", joinErrors(res.Errors))
	}
	if got := listTree(t, outer); !slices.Equal(got, []string{"target/", "target/out/", "target/out/good:" + content}) {
		p.add("after the listing with a duplicate the tree is %q, want only good copied", got)
	}
}

var (
	oldMtime = time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	oldAtime = time.Date(2002, 3, 4, 5, 6, 7, 0, time.UTC)
)

func casePreserve(t *testing.T, e end, cp copyFunc, p *problems) {
	src, dst := t.TempDir(), t.TempDir()
	mkTree(t, src, "p/f=ffff", "p/g=gg", "p/zero=", "p/it's=quote", "p/sub/h=h", "p/sub/empty/",
		"p/-dash name=d", "p/ünïcödé=u")
	// Sizes either side of scp's and SFTP's 32 KiB buffers.
	writeBig(t, filepath.Join(src, "p/k32-1"), 32<<10-1)
	writeBig(t, filepath.Join(src, "p/sub/k32+1"), 32<<10+1)
	modes := map[string]fs.FileMode{"p": 0o750, "p/f": 0o751, "p/g": 0o600, "p/zero": 0o640, "p/it's": 0o604,
		"p/sub": 0o705, "p/sub/h": 0o644, "p/sub/empty": 0o711, "p/-dash name": 0o755, "p/ünïcödé": 0o664,
		"p/k32-1": 0o644, "p/sub/k32+1": 0o700}
	// A second mtime, so that a run giving every entry the same one fails.
	mtimes := map[string]time.Time{"p/g": oldMtime.Add(time.Hour), "p/sub/empty": oldMtime.Add(2 * time.Hour)}
	// Deepest first, so that setting a directory's times is not undone.
	for _, rel := range []string{"p/sub/empty", "p/sub/h", "p/sub/k32+1", "p/sub", "p/f", "p/g", "p/zero", "p/it's",
		"p/-dash name", "p/ünïcödé", "p/k32-1", "p"} {
		chmod(t, filepath.Join(src, rel), modes[rel])
		mt, ok := mtimes[rel]
		if !ok {
			mt, mtimes[rel] = oldMtime, oldMtime
		}
		if err := os.Chtimes(filepath.Join(src, rel), oldAtime, mt); err != nil {
			t.Fatal(err)
		}
	}
	res, err := cp(context.Background(), under(src, "p"), filepath.Join(dst, "p"),
		transfer.Options{Recursive: true, Preserve: true})
	noFailure(p, res, err)
	for rel, mode := range modes {
		fi, err := os.Stat(filepath.Join(dst, rel))
		if err != nil {
			p.add("%s: %v", rel, err)
			continue
		}
		if fi.Mode().Perm() != mode {
			p.add("%s: mode %v, want %v", rel, fi.Mode().Perm(), mode)
		}
		if !fi.ModTime().Equal(mtimes[rel]) {
			p.add("%s: mtime %v, want %v", rel, fi.ModTime().UTC(), mtimes[rel])
		}
		if at := atime(fi); !at.Equal(oldAtime) {
			p.add("%s: atime %v, want %v", rel, at.UTC(), oldAtime)
		}
	}
	if got, want := listTree(t, filepath.Join(dst, "p")), listTree(t, filepath.Join(src, "p")); !slices.Equal(got, want) {
		p.add("tree\n got %q\nwant %q", got, want)
	}
	noTemps(t, p, dst)
}

// caseModes copies without -p: a new file gets the source's mode less
// the umask, a replaced file keeps its own, as with scp.
func caseModes(t *testing.T, e end, cp copyFunc, p *problems) {
	umask := currentUmask(t)
	src, dst := t.TempDir(), t.TempDir()
	mkTree(t, src, "m/x=x", "m/y=y", "m/z=z", "one=one")
	mkTree(t, dst, "out/m/z=old", "kept=old")
	chmod(t, filepath.Join(src, "m/x"), 0o777)
	chmod(t, filepath.Join(src, "m/y"), 0o640)
	chmod(t, filepath.Join(src, "m/z"), 0o755)
	chmod(t, filepath.Join(src, "one"), 0o644)
	chmod(t, filepath.Join(dst, "out/m/z"), 0o604)
	chmod(t, filepath.Join(dst, "kept"), 0o600)
	res, err := cp(context.Background(), under(src, "m"), filepath.Join(dst, "out"), transfer.Options{Recursive: true})
	noFailure(p, res, err)
	// A file operand onto an existing file, outside any tree.
	res, err = cp(context.Background(), under(src, "one"), filepath.Join(dst, "kept"), transfer.Options{})
	noFailure(p, res, err)
	for rel, want := range map[string]fs.FileMode{"out/m/x": 0o777 &^ umask, "out/m/y": 0o640 &^ umask, "out/m/z": 0o604, "kept": 0o600} {
		fi, err := os.Stat(filepath.Join(dst, rel))
		switch {
		case err != nil:
			p.add("%s: %v", rel, err)
		case fi.Mode().Perm() != want:
			p.add("%s: mode %v, want %v (umask %03o)", rel, fi.Mode().Perm(), want, umask)
		}
	}
	for rel, want := range map[string]string{"out/m/z": "z", "kept": "one"} {
		if got := content(t, dst, rel); got != want {
			p.add("%s holds %q, want the source's %q", rel, got, want)
		}
	}
	noTemps(t, p, dst)
}

func caseEmpty(t *testing.T, e end, cp copyFunc, p *problems) {
	src, dst := t.TempDir(), t.TempDir()
	mkTree(t, src, "e/zero=", "e/empty/", "e/nested/deeper/", "e/only/zero=", "lone=")
	mkTree(t, dst, "in/")
	res, err := cp(context.Background(), under(src, "e"), filepath.Join(dst, "out"), transfer.Options{Recursive: true})
	noFailure(p, res, err)
	want := []string{"empty/", "nested/", "nested/deeper/", "only/", "only/zero:", "zero:"}
	if got := listTree(t, filepath.Join(dst, "out")); !slices.Equal(got, want) {
		p.add("tree\n got %q\nwant %q", got, want)
	}
	res, err = cp(context.Background(), under(src, "lone"), filepath.Join(dst, "in"), transfer.Options{})
	noFailure(p, res, err)
	if got := listTree(t, filepath.Join(dst, "in")); !slices.Equal(got, []string{"lone:"}) {
		p.add("an empty file as the operand: %q, want [lone:]", got)
	}
	noTemps(t, p, dst)
}

// caseFailingSource copies good sources around a missing one and a tree
// with an entry that cannot be read: the others arrive, every failure is
// in the result (the CLI's exit status 3), and the run is not given up.
func caseFailingSource(t *testing.T, e end, cp copyFunc, p *problems) {
	src, dst := t.TempDir(), t.TempDir()
	mkTree(t, src, "good1=1", "good2=2", "d/ok1=ok1", "d/ok2=ok2", "out/")
	// A link to nothing: no reader can open it, root included.
	if err := os.Symlink("nowhere", filepath.Join(src, "d/dangling")); err != nil {
		t.Fatal(err)
	}
	bad := []string{"missing", "dangling"}
	if os.Geteuid() != 0 {
		mkTree(t, src, "d/secret=s")
		chmod(t, filepath.Join(src, "d/secret"), 0)
		t.Cleanup(func() { os.Chmod(filepath.Join(src, "d/secret"), 0o644) })
		bad = append(bad, "secret")
	}
	mkTree(t, dst, "out/")
	res, err := cp(context.Background(), under(src, "good1", "missing", "d", "good2"), filepath.Join(dst, "out"),
		transfer.Options{Recursive: true})
	if err != nil {
		p.add("copy gave up: %v", err)
	}
	if want := []string{"d/", "d/ok1:ok1", "d/ok2:ok2", "good1:1", "good2:2"}; !slices.Equal(listTree(t, filepath.Join(dst, "out")), want) {
		p.add("target\n got %q\nwant %q", listTree(t, filepath.Join(dst, "out")), want)
	}
	if res == nil {
		return
	}
	msgs := joinErrors(res.Errors)
	for _, b := range bad {
		if !strings.Contains(msgs, b) {
			p.add("no error names %s; errors:\n%s", b, msgs)
		}
	}
	noTemps(t, p, dst)
}

// cancelAfter cancels the copy once n bytes have gone.
type cancelAfter struct {
	n      int
	cancel func()
}

func (c *cancelAfter) StartFile(string, int64) {}
func (c *cancelAfter) EndFile()                {}
func (c *cancelAfter) Add(n int) {
	if c.n -= n; c.n <= 0 {
		c.cancel()
	}
}

// caseCancel cancels a copy once a quarter of a file has gone: over an
// older version of the file, as an operand and inside a tree, and to a
// new name. The older version stays as it was, and nothing of the new
// one is left under any name.
func caseCancel(t *testing.T, e end, cp copyFunc, p *problems) {
	const size = 8 << 20
	for _, v := range []struct {
		name     string
		tree     bool
		previous bool
	}{{"operand over a file", false, true}, {"tree over a file", true, true}, {"new file", false, false}} {
		src, dst := t.TempDir(), t.TempDir()
		writeBig(t, filepath.Join(src, "d/big"), size)
		mkTree(t, dst, "out/d/")
		if v.previous {
			mkTree(t, dst, "out/d/big=previous")
		}
		from, o := filepath.Join(src, "d/big"), transfer.Options{}
		to := filepath.Join(dst, "out/d")
		if v.tree {
			from, o.Recursive, to = filepath.Join(src, "d"), true, filepath.Join(dst, "out")
		}
		ctx, cancel := context.WithCancel(context.Background())
		o.Progress = &cancelAfter{n: size / 4, cancel: cancel}
		_, err := cp(ctx, []string{from}, to, o)
		cancel()
		if !errors.Is(err, context.Canceled) {
			p.add("%s: copy returned %v, want context.Canceled", v.name, err)
		}
		want := []string{"d/"}
		if v.previous {
			want = append(want, "d/big:previous")
		}
		if got := listTree(t, filepath.Join(dst, "out")); !slices.Equal(got, want) {
			p.add("%s: after the cancel the target holds %q, want %q", v.name, got, want)
		}
	}
}

// caseDiskFull copies a file too large for the target's file system
// beside a small one: the small one arrives, the error says why, and no
// part of the large one is left under any name.
func caseDiskFull(t *testing.T, e end, cp copyFunc, p *problems) {
	src, dst := t.TempDir(), t.TempDir()
	writeBig(t, filepath.Join(src, "d/huge"), 3<<20)
	mkTree(t, src, "d/small="+strings.Repeat("s", 1000))
	full := filepath.Join(dst, "full")
	if err := os.Mkdir(full, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", full, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatalf("mount a tmpfs on %s: %v", full, err)
	}
	t.Cleanup(func() { syscall.Unmount(full, syscall.MNT_DETACH) })
	mkTree(t, full, "d/")
	res, err := cp(context.Background(), under(src, "d"), full, transfer.Options{Recursive: true})
	if err != nil {
		p.add("copy gave up: %v", err)
	}
	if res == nil || !saysFull(res.Errors) {
		p.add("neither the errors nor their hints say the disk is full: %s", withHints(res.Errors))
	}
	if res != nil {
		t.Logf("result: %d files, %d bytes, errors:\n%s", res.Files, res.Bytes, withHints(res.Errors))
	}
	if got, want := listTree(t, full), []string{"d/", "d/small:" + describe(strings.Repeat("s", 1000))}; !slices.Equal(got, want) {
		p.add("full target\n got %q\nwant %q", got, want)
	}
	noTemps(t, p, full)
}

// saysFull reports whether an error, or its hint, tells the user that
// the disk is full.
func saysFull(errs []error) bool {
	msg := strings.ToLower(withHints(errs))
	return strings.Contains(msg, "no space left") || strings.Contains(msg, "full disk")
}

// withHints joins errors with the hints the CLI would print below them.
func withHints(errs []error) string {
	var s []string
	for _, err := range errs {
		s = append(s, err.Error())
		var te *transfer.Error
		if errors.As(err, &te) && te.Hint != "" {
			s = append(s, "hint: "+te.Hint)
		}
	}
	return strings.Join(s, "\n")
}

func noFailure(p *problems, res *transfer.Result, err error) {
	if err != nil {
		p.add("copy failed: %v", err)
	}
	if res != nil && len(res.Errors) > 0 {
		p.add("copy reported errors:\n%s", joinErrors(res.Errors))
	}
}

func joinErrors(errs []error) string {
	var s []string
	for _, e := range errs {
		s = append(s, e.Error())
	}
	return strings.Join(s, "\n")
}

// under joins each rel to root, keeping a trailing slash.
func under(root string, rels ...string) []string {
	var out []string
	for _, r := range rels {
		p := filepath.Join(root, r)
		if strings.HasSuffix(r, "/") {
			p += "/"
		}
		out = append(out, p)
	}
	return out
}

// mkTree makes entries below root: "path/" a directory, "path=content"
// a file, with the directories above each.
func mkTree(t *testing.T, root string, entries ...string) {
	t.Helper()
	for _, e := range entries {
		name, body, isFile := strings.Cut(e, "=")
		p := filepath.Join(root, name)
		if !isFile {
			p = filepath.Join(root, strings.TrimSuffix(name, "/"))
		}
		dir := p
		if isFile {
			dir = filepath.Dir(p)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if isFile {
			if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// writeBig writes size bytes to p: blocks of a fixed pattern, each
// starting with its number, so that no two blocks are alike.
func writeBig(t *testing.T, p string, size int) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	block := bigBlock()
	for n := 0; n < size; n += len(block) {
		b := slices.Clone(block[:min(len(block), size-n)])
		binary.BigEndian.PutUint64(b, uint64(n))
		if _, err := f.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// bigBlock is writeBig's pattern, made once: under -race a loop over
// every byte of every large file costs seconds.
var bigBlock = sync.OnceValue(func() []byte {
	b := make([]byte, 1<<20)
	for i := range b {
		b[i] = byte(i*7 + i>>12)
	}
	return b
})

func chmod(t *testing.T, p string, mode fs.FileMode) {
	t.Helper()
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

// content reads root/rel; "" with the error when it cannot.
func content(t *testing.T, root, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		return fmt.Sprintf("<%v>", err)
	}
	return string(b)
}

// describe shows short contents as they are and long ones by size and
// digest.
func describe(s string) string {
	if len(s) <= 64 {
		return s
	}
	return fmt.Sprintf("<%d bytes %x>", len(s), sha256.Sum256([]byte(s)))
}

// listTree lists everything below root, sorted: "rel/" for a directory,
// "rel:content" for a file (long contents described), "rel@target" for
// a link.
func listTree(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		switch {
		case rel == ".":
		case d.IsDir():
			out = append(out, filepath.ToSlash(rel)+"/")
		case d.Type()&fs.ModeSymlink != 0:
			to, _ := os.Readlink(p)
			out = append(out, filepath.ToSlash(rel)+"@"+to)
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out = append(out, filepath.ToSlash(rel)+":"+describe(string(b)))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// noTemps notes every temporary file left below root.
func noTemps(t *testing.T, p *problems, root string) {
	t.Helper()
	filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), tempPrefix) {
			p.add("temporary file left behind: %s", path)
		}
		return nil
	})
}

// currentUmask reads the process's umask without setting it, as other
// ends create files at the same time.
func currentUmask(t *testing.T) fs.FileMode {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "Umask:"); ok {
			var m uint32
			if _, err := fmt.Sscanf(strings.TrimSpace(v), "%o", &m); err != nil {
				t.Fatalf("umask in /proc/self/status: %q: %v", line, err)
			}
			return fs.FileMode(m)
		}
	}
	t.Fatal("no Umask line in /proc/self/status")
	return 0
}

// atime is a file's access time.
func atime(fi fs.FileInfo) time.Time {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return time.Unix(st.Atim.Sec, st.Atim.Nsec)
	}
	return fi.ModTime()
}
