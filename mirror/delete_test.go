package mirror

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hpncp/hpncp/transfer"
)

// write makes the files of tree (name -> content; a name ending in "/"
// is a directory, "->" in the content a link) below root.
func write(t *testing.T, root string, tree map[string]string) {
	t.Helper()
	for name, content := range tree {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		switch {
		case strings.HasSuffix(name, "/"):
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
		case strings.HasPrefix(content, "->"):
			if err := os.Symlink(strings.TrimPrefix(content, "->"), p); err != nil {
				t.Fatal(err)
			}
		default:
			if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// names lists what is below root, links not followed.
func names(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel != "." {
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

func syncLocal(t *testing.T, src, dst string, o Options) (*Plan, *Result) {
	t.Helper()
	ctx := context.Background()
	p, err := Sync(ctx, transfer.Endpoint{FS: transfer.Local{}, Path: src}, transfer.Endpoint{FS: transfer.Local{}, Path: dst}, ".", true, false, o)
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.Run(ctx, o, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p, res
}

func archive() Options {
	return Options{Recursive: true, Links: true, Perms: true, Times: true, MaxDelete: -1}
}

// --delete removes links as links: what a link in the destination points
// at, outside the tree, is never touched, whether the link is extraneous
// or stands where the source has a directory.
func TestDeleteStaysInsideTheTree(t *testing.T) {
	dir := t.TempDir()
	src, dst, outside := filepath.Join(dir, "src"), filepath.Join(dir, "dst"), filepath.Join(dir, "outside")
	write(t, src, map[string]string{"keep": "k", "sub/f": "f"})
	write(t, outside, map[string]string{"precious": "p", "deep/also": "a"})
	write(t, dst, map[string]string{"extra-link": "->" + outside, "sub": "->" + outside, "extra/x": "x"})
	o := archive()
	o.Delete = true
	p, res := syncLocal(t, src, dst, o)
	if len(res.Errors) > 0 {
		t.Fatalf("errors: %v", res.Errors)
	}
	if got, want := names(t, outside), []string{"deep", "deep/also", "precious"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("outside the tree: %v, want %v", got, want)
	}
	if got, want := names(t, dst), []string{"keep", "sub", "sub/f"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("destination: %v, want %v", got, want)
	}
	if fi, err := os.Lstat(filepath.Join(dst, "sub")); err != nil || !fi.IsDir() {
		t.Fatalf("sub should be a directory now: %v %v", fi, err)
	}
	var lines []string
	for _, c := range p.Changes {
		if c.Item != "" {
			lines = append(lines, c.Line())
		}
	}
	for _, want := range []string{"*deleting   extra-link", "*deleting   extra/x", "*deleting   extra/"} {
		if !contains(lines, want) {
			t.Errorf("plan lacks %q: %q", want, lines)
		}
	}
}

func contains(list []string, s string) bool {
	for _, l := range list {
		if l == s {
			return true
		}
	}
	return false
}

// failingDir is the local end whose listing of one directory fails.
type failingDir struct {
	transfer.Local
	dir string
}

func (f failingDir) ReadDir(name string) ([]fs.FileInfo, error) {
	if name == f.dir {
		return nil, errors.New("injected listing failure")
	}
	return f.Local.ReadDir(name)
}

// A source listing that failed deletes nothing: the names it lacks may
// exist. The rest of the run still happens, and the failure is reported.
func TestNoDeleteAfterFailedListing(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	write(t, src, map[string]string{"a": "a", "broken/inside": "i"})
	write(t, dst, map[string]string{"broken/inside": "i", "broken/old": "o", "extra": "e"})
	o := archive()
	o.Delete = true
	ctx := context.Background()
	p, err := Sync(ctx, transfer.Endpoint{FS: failingDir{dir: filepath.Join(src, "broken")}, Path: src},
		transfer.Endpoint{FS: transfer.Local{}, Path: dst}, ".", true, false, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Errors) == 0 {
		t.Fatal("the failed listing is not among the plan's errors")
	}
	if _, err := p.Run(ctx, o, RunOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, want := names(t, dst), []string{"a", "broken", "broken/inside", "broken/old", "extra"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("destination: %v, want %v (nothing deleted, a copied)", got, want)
	}
	found := false
	for _, c := range p.Changes {
		found = found || c.Line() == "IO error encountered -- skipping file deletion"
	}
	if !found {
		t.Error("the plan does not say deletions were skipped")
	}
}

// --max-delete N deletes N entries and no more, and says how many it
// held back.
func TestMaxDelete(t *testing.T) {
	for _, max := range []int{0, 2, 5, 9} {
		dir := t.TempDir()
		src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
		write(t, src, map[string]string{"a": "a"})
		write(t, dst, map[string]string{"a": "a", "x1": "", "x2": "", "x3": "", "x4": "", "x5": ""})
		o := archive()
		o.Delete, o.MaxDelete = true, max
		p, res := syncLocal(t, src, dst, o)
		want := min(max, 5)
		if res.Deleted != want || p.DeleteSkipped != 5-want {
			t.Errorf("--max-delete=%d: deleted %d, held back %d; want %d and %d", max, res.Deleted, p.DeleteSkipped, want, 5-want)
		}
		if got := len(names(t, dst)); got != 6-want {
			t.Errorf("--max-delete=%d: %d entries left, want %d", max, got, 6-want)
		}
	}
}

// Excluded names of the destination are kept by --delete and deleted by
// --delete-excluded, as rsync's.
func TestDeleteExcluded(t *testing.T) {
	for _, excluded := range []bool{false, true} {
		dir := t.TempDir()
		src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
		write(t, src, map[string]string{"a": "a", "b.log": "l"})
		write(t, dst, map[string]string{"old.log": "o", "cache/x.log": "c"})
		o := archive()
		o.Delete, o.DeleteExcluded = true, excluded
		o.Filter = excludeLogs{}
		_, res := syncLocal(t, src, dst, o)
		if len(res.Errors) > 0 {
			t.Errorf("--delete-excluded=%v: %v", excluded, res.Errors)
		}
		got := strings.Join(names(t, dst), " ")
		want := "a cache cache/x.log old.log"
		if excluded {
			// cache is not in the source: it goes, with what it held.
			want = "a"
		}
		if got != want {
			t.Errorf("--delete-excluded=%v: %q, want %q", excluded, got, want)
		}
	}
}

type excludeLogs struct{}

func (excludeLogs) Excluded(n string, dir bool) bool { return !dir && strings.HasSuffix(n, ".log") }

// A directory whose times were right is left alone, unless an entry is
// made or removed in it: then its times are set again, as rsync's -t
// leaves them. (An unchanged tree's sync set every directory's times,
// a request each.)
func TestDirectoryTimesOnlyWhereTouched(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	stamp := time.Date(2020, 5, 6, 7, 8, 9, 0, time.UTC)
	for _, root := range []string{src, dst} {
		for _, d := range []string{"same", "changed", "gains"} {
			os.MkdirAll(filepath.Join(root, d), 0o755)
			os.WriteFile(filepath.Join(root, d, "f"), []byte("one"), 0o644)
			os.Chtimes(filepath.Join(root, d, "f"), stamp, stamp)
		}
	}
	os.WriteFile(filepath.Join(src, "changed", "f"), []byte("two"), 0o644) // same size, newer: sent
	os.WriteFile(filepath.Join(src, "gains", "new"), []byte("new"), 0o644)
	for _, root := range []string{src, dst} {
		for _, d := range []string{"same", "changed", "gains"} {
			os.Chtimes(filepath.Join(root, d), stamp, stamp)
		}
	}
	_, res := syncLocal(t, src+"/", dst, Options{Recursive: true, Times: true, Perms: true})
	if len(res.Errors) > 0 {
		t.Fatal(res.Errors)
	}
	for _, d := range []string{"same", "changed", "gains"} {
		fi, err := os.Stat(filepath.Join(dst, d))
		if err != nil || !fi.ModTime().Equal(stamp) {
			t.Errorf("%s: time %v (%v), want the source's %v", d, fi.ModTime(), err, stamp)
		}
	}
}
