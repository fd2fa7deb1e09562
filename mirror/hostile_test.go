package mirror

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hpncp/hpncp/protocol"
	"github.com/hpncp/hpncp/transfer"
)

// The link pair: with s/up -> .. in the tree, s/esc ->
// up/../outside reads as staying inside by its text but leaves it, and
// rsync 3.4 refuses it; --safe-links leaves it out and keeps s/up.
func TestSafeLinksDotDotAfterName(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	write(t, src, map[string]string{"s/up": "->..", "s/esc": "->up/../outside", "s/f": "f"})
	o := archive()
	o.SafeLinks = true
	_, res := syncLocal(t, src, dst, o)
	if len(res.Errors) > 0 {
		t.Fatalf("errors: %v", res.Errors)
	}
	if _, err := os.Lstat(filepath.Join(dst, "s", "esc")); !os.IsNotExist(err) {
		t.Errorf("s/esc was made (%v); --safe-links must leave it out", err)
	}
	if target, err := os.Readlink(filepath.Join(dst, "s", "up")); err != nil || target != ".." {
		t.Errorf("s/up is %q, %v; want the safe link kept", target, err)
	}
}

// lyingFS is the local file system as a hostile server would serve it:
// extra lists, per directory, entries to add to its listing (a name
// listed twice among them); links gives the targets it tells for paths;
// ids, when not nil, is what its find says of hard links (-H). The
// entries it lists carry no inode, as a remote end's do not.
type lyingFS struct {
	transfer.Local
	extra map[string][]fs.FileInfo
	links map[string]string
	ids   map[string]protocol.FileID
}

func (l lyingFS) ReadDir(name string) ([]fs.FileInfo, error) {
	list, err := l.Local.ReadDir(name)
	if err != nil {
		return nil, err
	}
	var out []fs.FileInfo
	for _, fi := range list {
		out = append(out, bareInfo{fi})
	}
	// After the true entries: a lister that believes the later of two
	// entries of one name then has the lie.
	return append(out, l.extra[name]...), nil
}

func (l lyingFS) ReadLink(name string) (string, error) {
	if target, ok := l.links[name]; ok {
		return target, nil
	}
	return l.Local.ReadLink(name)
}

func (l lyingFS) HardLinked(context.Context, string) (map[string]protocol.FileID, error) {
	if l.ids == nil {
		return nil, errors.New("no find here")
	}
	return maps.Clone(l.ids), nil
}

// bareInfo is a listed entry without the inode a local one carries.
type bareInfo struct{ fs.FileInfo }

func (bareInfo) Sys() any { return nil }

// fakeInfo is a listed entry that exists only in the listing.
type fakeInfo struct {
	name string
	mode fs.FileMode
}

func (f fakeInfo) Name() string       { return f.name }
func (f fakeInfo) Size() int64        { return 0 }
func (f fakeInfo) Mode() fs.FileMode  { return f.mode }
func (f fakeInfo) ModTime() time.Time { return time.Unix(1e9, 0) }
func (f fakeInfo) IsDir() bool        { return f.mode.IsDir() }
func (f fakeInfo) Sys() any           { return nil }

// outsideTree makes a directory beside the target with a file, and
// returns it with a check that it is unchanged.
func outsideTree(t *testing.T, dir string) (string, func()) {
	t.Helper()
	outside := filepath.Join(dir, "outside")
	write(t, outside, map[string]string{"x": "precious"})
	if err := os.Chmod(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	return outside, func() {
		t.Helper()
		if got := names(t, outside); !slices.Equal(got, []string{"x"}) {
			t.Errorf("outside the target: %q, want only x", got)
		}
		if b, err := os.ReadFile(filepath.Join(outside, "x")); err != nil || string(b) != "precious" {
			t.Errorf("outside/x is %q, %v", b, err)
		}
		if fi, err := os.Stat(outside); err != nil || fi.Mode().Perm() != 0o755 {
			t.Errorf("outside's mode: %v, %v", fi, err)
		}
	}
}

func errorsNaming(errs []error, target error, name string) int {
	n := 0
	for _, err := range errs {
		if errors.Is(err, target) && strings.Contains(err.Error(), strconv.Quote(name)) {
			n++
		}
	}
	return n
}

// The first attack: the server lists d twice, a directory and a
// link to a directory outside the target, and its find says d/x and y
// are one file. Neither d is believed: the error names d, nothing
// outside changes, y and the rest arrive, and nothing is deleted.
func TestDuplicateNameRefused(t *testing.T) {
	for _, hard := range []bool{false, true} {
		t.Run(fmt.Sprintf("H=%v", hard), func(t *testing.T) {
			dir := t.TempDir()
			src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
			outside, unchanged := outsideTree(t, dir)
			write(t, src, map[string]string{"d/x": "inside", "y": "inside", "z": "z"})
			write(t, dst, map[string]string{"old": "o"})
			lie := lyingFS{
				extra: map[string][]fs.FileInfo{src: {fakeInfo{"d", fs.ModeSymlink | 0o777}}},
				links: map[string]string{filepath.Join(src, "d"): outside},
			}
			o := archive()
			o.Delete = true
			o.Perms = true
			if hard {
				o.HardLinks = true
				lie.ids = map[string]protocol.FileID{"d/x": {Dev: 1, Ino: 2}, "y": {Dev: 1, Ino: 2}}
			}
			ctx := context.Background()
			p, err := Sync(ctx, transfer.Endpoint{FS: lie, Path: src}, transfer.Endpoint{FS: transfer.Local{}, Path: dst}, ".", true, false, o)
			if err != nil {
				t.Fatal(err)
			}
			if n := errorsNaming(p.Errors, transfer.ErrDuplicateName, "d"); n != 1 {
				t.Errorf("%d errors name d as listed twice, want 1: %v", n, p.Errors)
			}
			// Twice, as an attack needs a link made by a first run.
			for range 2 {
				if _, err := p.Run(ctx, o, RunOptions{}); err != nil {
					t.Fatal(err)
				}
				unchanged()
				if got := names(t, dst); !slices.Equal(got, []string{"old", "y", "z"}) {
					t.Errorf("target: %q, want old kept, y and z copied, no d", got)
				}
				if p, err = Sync(ctx, transfer.Endpoint{FS: lie, Path: src}, transfer.Endpoint{FS: transfer.Local{}, Path: dst}, ".", true, false, o); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// A target that lists a name twice has it refused too, and named.
func TestDuplicateInTarget(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	write(t, src, map[string]string{"d/x": "x"})
	write(t, dst, map[string]string{"d/": ""})
	lie := lyingFS{extra: map[string][]fs.FileInfo{dst: {fakeInfo{"d", 0o644}}}}
	o := archive()
	o.Delete = true
	p, err := Sync(context.Background(), transfer.Endpoint{FS: transfer.Local{}, Path: src}, transfer.Endpoint{FS: lie, Path: dst}, ".", true, false, o)
	if err != nil {
		t.Fatal(err)
	}
	if n := errorsNaming(p.Errors, transfer.ErrDuplicateName, "d"); n != 1 {
		t.Errorf("%d errors name d as listed twice, want 1: %v", n, p.Errors)
	}
}

// A link whose target holds a NUL or is longer than PATH_MAX is refused
// and named; the rest arrives.
func TestLinkTargetChecked(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	write(t, src, map[string]string{"nul": "->a", "long": "->b", "fine": "->c", "f": "f"})
	lie := lyingFS{links: map[string]string{
		filepath.Join(src, "nul"):  "a\x00/etc/passwd",
		filepath.Join(src, "long"): strings.Repeat("a/", 2048),
	}}
	ctx := context.Background()
	p, err := Sync(ctx, transfer.Endpoint{FS: lie, Path: src}, transfer.Endpoint{FS: transfer.Local{}, Path: dst}, ".", true, false, archive())
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Errors) != 2 || !strings.Contains(p.Errors[0].Error()+p.Errors[1].Error(), "NUL") ||
		!strings.Contains(p.Errors[0].Error()+p.Errors[1].Error(), "4096 bytes long") {
		t.Errorf("errors %v, want the NUL and the long target named", p.Errors)
	}
	if _, err := p.Run(ctx, archive(), RunOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := names(t, dst); !slices.Equal(got, []string{"f", "fine"}) {
		t.Errorf("target: %q, want f and fine", got)
	}
}

// An entry whose parent the tree has as a link or a file is left out,
// with what is below it; -H's records keep only listed regular files.
func TestParentMustBeListedDirectory(t *testing.T) {
	dir := fakeInfo{"d", fs.ModeDir | 0o755}
	file := fakeInfo{"f", 0o644}
	link := fakeInfo{"l", fs.ModeSymlink | 0o777}
	tr := &Tree{Root: transfer.Endpoint{FS: transfer.Local{}, Path: "/src"}, Entries: map[string]*Entry{}}
	for n, fi := range map[string]fs.FileInfo{".": dir, "d": dir, "d/f": file, "f": file, "f/x": file,
		"l": link, "l/y": dir, "l/y/z": file, "gone/f": file} {
		tr.Entries[n] = &Entry{Name: n, Info: fi}
	}
	tr.ids = map[string]protocol.FileID{"d/f": {Ino: 1}, "f": {Ino: 1}, "d": {Ino: 1}, "l": {Ino: 1}, "f/x": {Ino: 1}, "nothing": {Ino: 1}}
	tr.dropOrphans(".")
	tr.keepFileIDs()
	got := slices.Sorted(maps.Keys(tr.Entries))
	if want := []string{".", "d", "d/f", "f", "l"}; !slices.Equal(got, want) {
		t.Errorf("entries %q, want %q", got, want)
	}
	if len(tr.Errors) != 4 {
		t.Errorf("%d errors, want one for each of f/x, l/y, l/y/z and gone/f: %v", len(tr.Errors), tr.Errors)
	}
	if got := slices.Sorted(maps.Keys(tr.ids)); !slices.Equal(got, []string{"d/f", "f"}) {
		t.Errorf("hard-link records kept for %q, want only the files d/f and f", got)
	}
}

// endlessFS lists, in every directory, width directories and one file,
// whatever is asked, and counts its listings.
type endlessFS struct {
	transfer.Local
	width    int
	listings *atomic.Int64
}

func (e endlessFS) ReadDir(string) ([]fs.FileInfo, error) {
	e.listings.Add(1)
	out := []fs.FileInfo{fakeInfo{"f", 0o644}}
	for i := range e.width {
		out = append(out, fakeInfo{"a" + strconv.Itoa(i), fs.ModeDir | 0o755})
	}
	return out, nil
}

// An endless deep tree (a/a/a/...) stops at transfer.MaxDepth levels
// with an error saying so; deletes are off.
func TestEndlessDeepTree(t *testing.T) {
	var n atomic.Int64
	src, dst := t.TempDir(), t.TempDir()
	o := archive()
	o.Delete = true
	o.DryRun = true
	p, err := Sync(context.Background(), transfer.Endpoint{FS: endlessFS{width: 1, listings: &n}, Path: src},
		transfer.Endpoint{FS: transfer.Local{}, Path: dst}, ".", true, false, o)
	if err != nil {
		t.Fatal(err)
	}
	if n.Load() != transfer.MaxDepth {
		t.Errorf("%d listings, want %d", n.Load(), transfer.MaxDepth)
	}
	if len(p.Errors) != 1 || !strings.Contains(p.Errors[0].Error(), "more than 255 levels of directories") {
		t.Errorf("errors %v, want one saying the tree is too deep", p.Errors)
	}
	if !slices.ContainsFunc(p.Changes, func(c *Change) bool { return c.Line() == "IO error encountered -- skipping file deletion" }) {
		t.Error("deletions were not turned off")
	}
}

// An endless wide tree, each directory naming new ones, ends the listing
// once the tree holds maxEntries names, or maxNameBytes of them, with
// ErrTreeTooLarge.
func TestEndlessWideTree(t *testing.T) {
	for _, l := range []lister{{maxEntries: 10000}, {maxNameBytes: 1 << 20}} {
		t.Run(fmt.Sprintf("%d names, %d bytes", l.maxEntries, l.maxNameBytes), func(t *testing.T) {
			var n atomic.Int64
			tr, err := l.listTree(context.Background(), transfer.Endpoint{FS: endlessFS{width: 8, listings: &n}, Path: t.TempDir()}, ".")
			if !errors.Is(err, ErrTreeTooLarge) {
				t.Fatalf("error %v, want ErrTreeTooLarge", err)
			}
			if len(tr.Entries) != 0 {
				t.Errorf("the tree holds %d names after the failure, want none", len(tr.Entries))
			}
			// Each listing brings 9 names, of at most 2*256*3 bytes (a
			// name and a path, 255 levels of 3 bytes): only the
			// listings in flight once a bound is passed may follow.
			if got := n.Load(); got > 10000/9+listers+1 {
				t.Errorf("%d listings: the lister went on after the bound", got)
			}
		})
	}
}

// manyFS lists one directory of more names than protocol.MaxDirEntries.
type manyFS struct{ transfer.Local }

func (manyFS) ReadDir(string) ([]fs.FileInfo, error) {
	out := make([]fs.FileInfo, protocol.MaxDirEntries+1)
	for i := range out {
		out[i] = fakeInfo{"f", 0o644}
	}
	return out, nil
}

// A listing longer than protocol.MaxDirEntries fails as SFTP's does,
// whatever the end.
func TestListingTooLong(t *testing.T) {
	tr, err := lister{}.listTree(context.Background(), transfer.Endpoint{FS: manyFS{}, Path: t.TempDir()}, ".")
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Errors) != 1 || !errors.Is(tr.Errors[0], protocol.ErrTooManyEntries) || len(tr.Entries) != 1 {
		t.Errorf("errors %v and %d names, want ErrTooManyEntries and the root alone", tr.Errors, len(tr.Entries))
	}
}
