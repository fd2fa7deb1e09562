package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hpncp/hpncp/internal/hostile"
)

// The hostile-server tests (issue 33): each attack a compromised server
// can try on a receiving hpncp, against internal/hostile, on every front
// end it applies to. Each test keeps a sentinel directory beside the
// target (files, a directory, a symbolic link and a hard-linked file),
// and checks after every run that the sentinel and everything else
// outside the target is as it was, that a run the server lied to fails,
// and that the entry it lied about is named, escaped, in stderr.

// lieName is the name of an entry a server lies about: its escape must
// never reach stderr raw.
const lieName = "lied\x1b[7mdir"

// confinement is a work directory holding the target (target, which the
// user named) and the sentinel (outside), and what everything outside
// the target was before the runs.
type confinement struct {
	work, target, outside string
	before                map[string]string
}

// newConfinement makes the work directory, an empty target directory and
// the sentinel, and records them.
func newConfinement(t testing.TB) *confinement {
	t.Helper()
	work := t.TempDir()
	c := &confinement{work: work, target: filepath.Join(work, "target"), outside: filepath.Join(work, "outside")}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Mkdir(c.target, 0o755))
	must(os.Mkdir(c.outside, 0o755))
	must(os.WriteFile(filepath.Join(c.outside, "x"), []byte("sentinel x\n"), 0o600))
	must(os.WriteFile(filepath.Join(c.outside, "f"), []byte("sentinel f\n"), 0o644))
	must(os.Mkdir(filepath.Join(c.outside, "sub"), 0o700))
	must(os.WriteFile(filepath.Join(c.outside, "sub", "x"), []byte("sentinel sub/x\n"), 0o640))
	must(os.Symlink("x", filepath.Join(c.outside, "ln")))
	must(os.WriteFile(filepath.Join(c.outside, "hard"), []byte("sentinel hard\n"), 0o644))
	must(os.Link(filepath.Join(c.outside, "hard"), filepath.Join(c.outside, "hard2")))
	c.before = c.snapshot(t)
	return c
}

// snapshot describes every name below the work directory but those in
// the target: type, mode, link count, a symlink's target, a file's hash.
func (c *confinement) snapshot(t testing.TB) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(c.work, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == c.target {
			return filepath.SkipDir
		}
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil {
			return err
		}
		desc := fmt.Sprintf("mode %o nlink %d", st.Mode, st.Nlink)
		switch st.Mode & syscall.S_IFMT {
		case syscall.S_IFLNK:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			desc += " -> " + target
		case syscall.S_IFREG:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			desc += fmt.Sprintf(" sha256 %x", sha256.Sum256(b))
		}
		m[p] = desc
		return nil
	})
	if err != nil {
		t.Fatalf("snapshot %s: %v", c.work, err)
	}
	return m
}

// escapes returns how what is outside the target differs from before,
// one line a difference, or nothing.
func (c *confinement) escapes(t testing.TB) []string {
	t.Helper()
	now := c.snapshot(t)
	var out []string
	for p, was := range c.before {
		switch is, ok := now[p]; {
		case !ok:
			out = append(out, fmt.Sprintf("%s is gone (was %s)", p, was))
		case is != was:
			out = append(out, fmt.Sprintf("%s changed: was %s, is %s", p, was, is))
		}
	}
	for p, is := range now {
		if _, ok := c.before[p]; !ok {
			out = append(out, fmt.Sprintf("%s is new: %s", p, is))
		}
	}
	sort.Strings(out)
	return out
}

// check fails t if anything outside the target changed.
func (c *confinement) check(t testing.TB, after string) {
	t.Helper()
	if e := c.escapes(t); len(e) > 0 {
		t.Errorf("after %s, outside the target:\n\t%s", after, strings.Join(e, "\n\t"))
	}
}

// runHostile runs hpncp with args against srv (host "testhost") and
// returns its exit code and stderr; it fails t if the run outlives a
// minute.
func runHostile(t testing.TB, srv *hostile.Server, args ...string) (int, string) {
	t.Helper()
	code, stderr, timedOut := runHostileFor(t, srv, time.Minute, args...)
	if timedOut {
		t.Errorf("hpncp %q ran for more than a minute", args)
	}
	return code, stderr
}

// runHostileFor is runHostile with a limit of its own, which it reports
// whether the run reached.
func runHostileFor(t testing.TB, srv *hostile.Server, limit time.Duration, args ...string) (code int, stderr string, timedOut bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	var full []string
	if len(args) > 0 && args[0] == "sync" {
		full = append([]string{"hpncp", "sync", "-e", "ssh -F " + srv.ConfigFile}, args[1:]...)
	} else {
		full = append([]string{"hpncp", "-F", srv.ConfigFile}, args...)
	}
	var out lockedBuffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, full, strings.NewReader(""), io.Discard, &out) }()
	select {
	case err := <-done:
		code = reportError(&out, err)
	case <-time.After(limit + 30*time.Second):
		t.Fatalf("hpncp %q did not return after its context ended", full[1:])
	}
	return code, out.String(), ctx.Err() == context.DeadlineExceeded
}

// checkNamed fails t unless stderr names the entry the server lied about,
// with its escape escaped.
func checkNamed(t testing.TB, stderr, name string) {
	t.Helper()
	plain := name
	if i := strings.IndexByte(name, 0x1b); i >= 0 {
		plain = name[:i]
	}
	if !strings.Contains(stderr, plain) {
		t.Errorf("stderr does not name %q:\n%s", name, stderr)
	}
	checkNoRawControls(t, "stderr", stderr)
}

// checkNoRawControls fails t if s holds a terminal control a server could
// have put there: ESC, BEL, CR, or a C1 control (raw or UTF-8 encoded).
func checkNoRawControls(t testing.TB, what, s string) {
	t.Helper()
	for i := 0; i < len(s); {
		r, w := utf8.DecodeRuneInString(s[i:])
		bad := r == 0x1b || r == 0x07 || r == '\r' || r >= 0x80 && r <= 0x9f ||
			r == utf8.RuneError && w == 1 && s[i] >= 0x80 && s[i] <= 0x9f
		if bad {
			t.Errorf("%s holds a raw control 0x%02x at byte %d: %q", what, s[i], i, s)
			return
		}
		i += w
	}
}

// frontEnd is one way of receiving a remote tree into c.target: args
// before the source and target.
type frontEnd struct {
	name string
	args []string
	sync bool // hpncp sync: the source is src/ and the target target/
	// file, with sync, is one file's sync instead: src/file to
	// target/file (a pull of one file asks for its delta ahead).
	file string
	// filesFrom, if set, is written to a file passed to --files-from.
	filesFrom string
	// plainNames: the front end refuses any name with a control
	// character before it looks further (the scp protocol's parser), so
	// its attacks use lieName without one to reach what they test.
	plainNames bool
}

// lie returns the name the server lies about for f.
func (f frontEnd) lie() string {
	if f.plainNames {
		return "lied-dir"
	}
	return lieName
}

var copyFrontEnds = []frontEnd{
	{name: "r", args: []string{"-r"}},
	{name: "r-links", args: []string{"-r", "--links"}},
	{name: "tar", args: []string{"-r", "--tar"}},
	{name: "legacy", args: []string{"-r", "-O"}, plainNames: true},
	{name: "resume", args: []string{"-r", "--resume"}},
	{name: "files-from", args: []string{"-r"}, filesFrom: "src\n"},
}

var syncFrontEnds = []frontEnd{
	{name: "sync-a", args: []string{"-a"}, sync: true},
	{name: "sync-aH-delete", args: []string{"-aH", "--delete"}, sync: true},
	{name: "sync-a-safe-links", args: []string{"-a", "--safe-links"}, sync: true},
}

// args returns the command line that receives the server's src into
// c.target with f.
func (f frontEnd) argv(t testing.TB, c *confinement) []string {
	t.Helper()
	if f.sync {
		return append(append([]string{"sync"}, f.args...), "testhost:src/"+f.file, c.target+"/"+f.file)
	}
	args := append([]string(nil), f.args...)
	if f.filesFrom != "" {
		list := filepath.Join(t.TempDir(), "list")
		if err := os.WriteFile(list, []byte(f.filesFrom), 0o644); err != nil {
			t.Fatal(err)
		}
		return append(args, "--files-from", list, "testhost:", c.target)
	}
	return append(args, "testhost:src", c.target)
}

// hostileEnv isolates hpncp's state (the resume journal, caches) in t's
// own directories.
func hostileEnv(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
}

// duplicateTree lists lieName in src twice: first as a directory holding
// x, sub/ (mode 0777) and f, then as a symbolic link to outside.
func duplicateTree(outside, lie string) *hostile.Tree {
	tr := hostile.NewTree()
	tr.File("src/a", "a\n")
	tr.Add("src", hostile.Entry{Name: lie, Kind: hostile.Dir})
	tr.File("src/"+lie+"/x", "evil x\n")
	tr.Add("src/"+lie, hostile.Entry{Name: "sub", Kind: hostile.Dir, Mode: 0o777})
	tr.File("src/"+lie+"/sub/x", "evil sub/x\n")
	tr.Add("src", hostile.Entry{Name: lie, Kind: hostile.Symlink, Target: outside})
	return tr
}

// TestHostileDuplicateNames is attack 1: a listing names one entry twice,
// first as a directory, then as a symbolic link out of the target. Every
// front end runs twice (the first run may make the link, the second
// writes through it); every run must fail and name the entry.
func TestHostileDuplicateNames(t *testing.T) {
	for _, f := range append(append([]frontEnd(nil), copyFrontEnds...), syncFrontEnds...) {
		t.Run(f.name, func(t *testing.T) {
			hostileEnv(t)
			c := newConfinement(t)
			srv := hostile.Start(t, hostile.Options{Tree: duplicateTree(c.outside, f.lie())})
			for i := 1; i <= 2; i++ {
				code, stderr := runHostile(t, srv, f.argv(t, c)...)
				t.Logf("run %d: exit %d, stderr:\n%s", i, code, stderr)
				c.check(t, fmt.Sprintf("run %d", i))
				if code == 0 {
					t.Errorf("run %d: exit 0 from a listing that names %q twice; stderr:\n%s", i, f.lie(), stderr)
				}
				checkNamed(t, stderr, f.lie())
			}
		})
	}
}

// TestHostileDuplicateHardLinks is attack 1 with -H: one run, the
// server's find putting a file reached through the duplicate's link in a
// hard-link group.
func TestHostileDuplicateHardLinks(t *testing.T) {
	hostileEnv(t)
	c := newConfinement(t)
	tr := hostile.NewTree()
	tr.Add("src", hostile.Entry{Name: "f", Kind: hostile.File, Data: []byte("evil\n"), Dev: 1, Ino: 7})
	tr.Add("src", hostile.Entry{Name: lieName, Kind: hostile.Dir})
	tr.Add("src/"+lieName, hostile.Entry{Name: "x", Kind: hostile.File, Data: []byte("evil\n"), Dev: 1, Ino: 7})
	tr.Add("src", hostile.Entry{Name: lieName, Kind: hostile.Symlink, Target: c.outside})
	srv := hostile.Start(t, hostile.Options{Tree: tr})
	code, stderr := runHostile(t, srv, "sync", "-aH", "testhost:src/", c.target+"/")
	t.Logf("exit %d, stderr:\n%s", code, stderr)
	c.check(t, "sync -aH")
	if code == 0 {
		t.Errorf("exit 0 from a listing that names %q twice; stderr:\n%s", lieName, stderr)
	}
	checkNamed(t, stderr, lieName)
}

// TestHostileSafeLinks is attack 2: with s/up -> .., s/esc ->
// up/../outside leaves the tree and --safe-links must leave it out, as
// rsync 3.4 does; a second run, where esc is a directory, must not write
// through anything the first made.
func TestHostileSafeLinks(t *testing.T) {
	hostileEnv(t)
	c := newConfinement(t)
	tr := hostile.NewTree()
	tr.File("src/a", "a\n")
	tr.Link("src/s/up", "..")
	tr.Link("src/s/esc", "up/../outside")
	srv := hostile.Start(t, hostile.Options{Tree: tr})
	args := []string{"sync", "-a", "--safe-links", "testhost:src/", c.target + "/"}
	code, stderr := runHostile(t, srv, args...)
	c.check(t, "run 1")
	if code != 0 {
		t.Errorf("run 1: exit %d; stderr:\n%s", code, stderr)
	}
	if target, err := os.Readlink(filepath.Join(c.target, "s", "up")); err != nil || target != ".." {
		t.Errorf("s/up, a safe link, is %q (%v), want a link to ..", target, err)
	}
	if _, err := os.Lstat(filepath.Join(c.target, "s", "esc")); !os.IsNotExist(err) {
		t.Errorf("s/esc -> up/../outside was made (%v); --safe-links must leave it out", err)
	}

	tr2 := hostile.NewTree()
	tr2.File("src/a", "a\n")
	tr2.Link("src/s/up", "..")
	tr2.File("src/s/esc/x", "evil x\n")
	srv.SetTree(tr2)
	code, stderr = runHostile(t, srv, args...)
	c.check(t, "run 2")
	if code != 0 {
		t.Errorf("run 2: exit %d; stderr:\n%s", code, stderr)
	}
}

// TestHostileReceivedDirLink is attack 3: a first run with --links
// receives lieName as a link out of the target; in the second the
// server lists it as a directory. No front end may write through the
// link: it is replaced, as rsync replaces it, or the run fails.
func TestHostileReceivedDirLink(t *testing.T) {
	for _, f := range append(append([]frontEnd(nil), copyFrontEnds...), syncFrontEnds...) {
		t.Run(f.name, func(t *testing.T) {
			lie := f.lie()
			hostileEnv(t)
			c := newConfinement(t)
			tr := hostile.NewTree()
			tr.File("src/a", "a\n")
			tr.Link("src/"+lie, c.outside)
			srv := hostile.Start(t, hostile.Options{Tree: tr})
			first := frontEnd{args: []string{"-r", "--links"}}
			if f.sync {
				first = frontEnd{args: []string{"-a"}, sync: true}
			}
			code, stderr := runHostile(t, srv, first.argv(t, c)...)
			c.check(t, "run 1 (--links)")
			if code != 0 {
				t.Fatalf("run 1 (--links): exit %d; stderr:\n%s", code, stderr)
			}

			tr2 := hostile.NewTree()
			tr2.File("src/a", "a\n")
			tr2.File("src/"+lie+"/x", "evil x\n")
			tr2.Add("src/"+lie, hostile.Entry{Name: "sub", Kind: hostile.Dir, Mode: 0o777})
			tr2.File("src/"+lie+"/sub/x", "evil sub/x\n")
			srv.SetTree(tr2)
			code, stderr = runHostile(t, srv, f.argv(t, c)...)
			c.check(t, "run 2")
			checkNoRawControls(t, "stderr", stderr)
			// The server told no lie in run 2, its tree changed: the
			// link is replaced by the directory, as rsync replaces it.
			if code != 0 {
				t.Errorf("run 2: exit %d; stderr:\n%s", code, stderr)
			}
			dir := filepath.Join(c.target, "src", lie)
			if f.sync {
				dir = filepath.Join(c.target, lie)
			}
			if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() {
				t.Errorf("run 2: %s is not a directory (%v)", dir, err)
			}
		})
	}
}

// TestHostileDashPath is attack 4: a remote path that begins with a dash
// must reach every remote command as a path, never as an option: find
// -delete would delete the login directory.
func TestHostileDashPath(t *testing.T) {
	hostileEnv(t)
	c := newConfinement(t)
	tr := hostile.NewTree()
	tr.Add("-delete", hostile.Entry{Name: "f", Kind: hostile.File, Data: []byte("f\n"), Dev: 1, Ino: 9})
	tr.Add("-delete", hostile.Entry{Name: "g", Kind: hostile.File, Data: []byte("f\n"), Dev: 1, Ino: 9})
	srv := hostile.Start(t, hostile.Options{Tree: tr})
	code, stderr := runHostile(t, srv, "sync", "-aH", "testhost:-delete", c.target+"/")
	c.check(t, "sync -aH testhost:-delete")
	if code != 0 {
		t.Errorf("exit %d; stderr:\n%s", code, stderr)
	}
	cmds := srv.Commands()
	found := false
	for _, cmd := range cmds {
		if p, ok := findPathArg(cmd); ok {
			found = true
			if strings.HasPrefix(p, "-") {
				t.Errorf("the server's find got %q as its path: %s", p, cmd)
			}
		}
		checkDashArgs(t, cmd)
	}
	if !found {
		t.Errorf("sync -aH ran no find on the server; commands: %q", cmds)
	}
}

// findPathArg returns the starting point of a find command line.
func findPathArg(cmd string) (string, bool) {
	w := hostile.Words(cmd)
	if len(w) < 2 || w[0] != "find" {
		return "", false
	}
	for _, a := range w[1:] {
		switch a {
		case "-H", "-L", "-P", "--":
			continue
		}
		return a, true
	}
	return "", false
}

// checkDashArgs fails t if a sha256sum, scp or tar command line has a
// word starting with a dash that is not one of the options hpncp writes
// before a "--".
func checkDashArgs(t testing.TB, cmd string) {
	t.Helper()
	w := hostile.Words(cmd)
	if len(w) == 0 || w[0] != "sha256sum" && w[0] != "scp" {
		return
	}
	for _, a := range w[1:] {
		if a == "--" {
			return
		}
		if strings.HasPrefix(a, "-") && strings.Contains(a, "delete") {
			t.Errorf("%s got %q as an option: %s", w[0], a, cmd)
		}
	}
}

// TestHostileEndlessTree is attack 5: a tree a/a/a/… that never ends.
// sync must stop on its own, within a minute, having asked for a bounded
// number of entries, and fail.
func TestHostileEndlessTree(t *testing.T) {
	hostileEnv(t)
	c := newConfinement(t)
	// The copy walk stops at depth 255; a sync still listing past
	// maxDepth has no bound: the server then fails its listings so that
	// the test ends.
	const maxDepth = 400
	var deepest atomic.Int64
	tr := hostile.NewTree()
	tr.DirAt("src")
	delete(tr.Dirs, "src")
	tr.Gen = func(dir string) ([]hostile.Entry, bool) {
		if dir != "src" && !strings.HasPrefix(dir, "src/") {
			return nil, false
		}
		depth := int64(strings.Count(dir, "/"))
		for {
			d := deepest.Load()
			if depth <= d || deepest.CompareAndSwap(d, depth) {
				break
			}
		}
		if depth > maxDepth {
			return nil, false
		}
		return []hostile.Entry{{Name: "a", Kind: hostile.Dir}, {Name: "f", Kind: hostile.File, Data: []byte("f\n")}}, true
	}
	srv := hostile.Start(t, hostile.Options{Tree: tr})
	for _, f := range syncFrontEnds[:1] {
		start := time.Now()
		code, stderr := runHostile(t, srv, f.argv(t, c)...)
		c.check(t, f.name)
		if code == 0 {
			t.Errorf("%s: exit 0 from an endless tree", f.name)
		}
		if el := time.Since(start); el > time.Minute {
			t.Errorf("%s: ran %v", f.name, el)
		}
		checkNoRawControls(t, "stderr", stderr)
	}
	if served, deepest := srv.Served(), deepest.Load(); deepest > maxDepth || served > 4*maxDepth {
		t.Errorf("sync listed %d entries, down to depth %d: no bound", served, deepest)
	}
}

// TestHostileKeyboardInteractive is attack 6: the name, instruction and
// prompt of a keyboard-interactive question carry terminal escapes (a
// window title, a screen clear, a CSI in C1 form and a carriage return
// to overwrite the line); what reaches the terminal must hold none raw.
// hpncp runs in a terminal of its own (script(1)), where it asks.
func TestHostileKeyboardInteractive(t *testing.T) {
	hostileEnv(t)
	scriptTool, err := exec.LookPath("script")
	if err != nil {
		t.Fatalf("script(1) is needed to give hpncp a terminal: %v", err)
	}
	hpncp, err := exec.LookPath("hpncp") // this test binary, as TestMain put it on $PATH
	if err != nil {
		t.Fatal(err)
	}
	c := newConfinement(t)
	tr := hostile.NewTree()
	tr.File("f", "f\n")
	srv := hostile.Start(t, hostile.Options{Tree: tr, KeyboardInteractive: &hostile.KeyboardInteractive{
		Name:        "\x1b]0;pwned title\x07Login",
		Instruction: "\x1b[2J\x1b[H\x9b31mroot@localhost's local password:",
		Prompts:     []string{"\rPassword\u009b1m: "},
	}})
	cfgText, err := os.ReadFile(srv.ConfigFile)
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "ssh_config")
	if err := os.WriteFile(cfg, bytes.Replace(cfgText, []byte("BatchMode yes"), []byte("BatchMode no"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	line := fmt.Sprintf("%s -F %s -q testhost:f %s", shellQuote(hpncp), shellQuote(cfg), shellQuote(filepath.Join(c.target, "f")))
	cmd := exec.CommandContext(ctx, scriptTool, "-qfec", line, "/dev/null")
	cmd.Stdin = strings.NewReader("answer\n")
	out, err := cmd.CombinedOutput()
	c.check(t, "the copy")
	term := strings.ReplaceAll(string(out), "\r\n", "\n")
	t.Logf("the terminal got %q (%v)", term, err)
	if !strings.Contains(term, "Password") || !strings.Contains(term, "local password") {
		t.Errorf("the question was not shown: %q", term)
	}
	checkNoRawControls(t, "the terminal", term)
}

// TestHostileZstdWindow is attack 7: in tar mode with -C the server's
// zstd frame claims a 512 MiB window, which must be refused rather than
// allocated.
func TestHostileZstdWindow(t *testing.T) {
	hostileEnv(t)
	c := newConfinement(t)
	tr := hostile.NewTree()
	for i := range 8 {
		tr.File(fmt.Sprintf("src/f%d", i), strings.Repeat("z", 1000+i))
	}
	tr.TarCreate = func(w hostile.WriterTo, dir string, names []string, compress string) {
		var files []hostile.TarFile
		for _, n := range names {
			var i int
			fmt.Sscanf(filepath.Base(n), "f%d", &i)
			files = append(files, hostile.TarFile{Name: n, Entry: hostile.Entry{Kind: hostile.File, Data: []byte(strings.Repeat("z", 1000+i))}})
		}
		_ = hostile.WriteTar(w, files, "zstd", 512<<20)
	}
	srv := hostile.Start(t, hostile.Options{Tree: tr})
	code, stderr := runHostile(t, srv, "-r", "-C", "--tar", "testhost:src", c.target)
	c.check(t, "the copy")
	if code == 0 {
		t.Errorf("exit 0 from a zstd stream claiming a 512 MiB window; stderr:\n%s", stderr)
	}
	usedTar := false
	for _, cmd := range srv.Commands() {
		usedTar = usedTar || strings.HasPrefix(cmd, "tar -c") && strings.Contains(cmd, "--zstd")
	}
	if !usedTar {
		t.Errorf("the copy ran no tar -c --zstd: %q", srv.Commands())
	}
	if !strings.Contains(strings.ToLower(stderr), "window") {
		t.Errorf("stderr does not say the window was refused:\n%s", stderr)
	}
}
