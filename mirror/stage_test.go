package mirror

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/hpncp/hpncp/internal/sshtest"
	"github.com/hpncp/hpncp/transfer"
)

// stagedTree is a source tree "tree" of small files in two directories,
// a file too large for one batch, and a link.
func stagedTree(t *testing.T, src string) {
	t.Helper()
	tree := map[string]string{"tree/l": "->a/f0", "tree/empty/": ""}
	for i := range 40 {
		tree[fmt.Sprintf("tree/a/f%d", i)] = strings.Repeat(fmt.Sprint(i), 100+i)
		tree[fmt.Sprintf("tree/b/c/g%d", i)] = strings.Repeat("g", i)
	}
	tree["tree/big"] = strings.Repeat("0123456789", 60000)
	write(t, src, tree)
}

// sameFiles fails unless every regular file below dst/tree holds what
// the one of the same name below src/tree holds.
func sameFiles(t *testing.T, src, dst string) int {
	t.Helper()
	n := 0
	err := filepath.Walk(filepath.Join(dst, "tree"), func(p string, fi os.FileInfo, err error) error {
		if err != nil || !fi.Mode().IsRegular() {
			return err
		}
		rel, _ := filepath.Rel(dst, p)
		want, err := os.ReadFile(filepath.Join(src, rel))
		if err != nil {
			return err
		}
		got, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s holds %d bytes that differ from the source's %d", rel, len(got), len(want))
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestNewTreeStagedUntilWhole: a new directory of a remote target is
// built under a temporary name, so that nothing below its final name is
// seen before its contents are in place, and renamed into place at the
// end; the report names the final places, and nothing temporary is left.
func TestNewTreeStagedUntilWhole(t *testing.T) {
	end := openSFTP(t, sshtest.Options{})
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	stagedTree(t, src)
	if err := os.Mkdir(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	p, err := Sync(ctx, transfer.Endpoint{FS: transfer.Local{}, Path: filepath.Join(src, "tree")},
		transfer.Endpoint{FS: end, Path: filepath.Join(dst, "tree")}, "tree", false, false, archive())
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen, targets []string
	ro := RunOptions{Engine: transfer.Options{Report: func(f transfer.FileReport) {
		mu.Lock()
		defer mu.Unlock()
		targets = append(targets, f.Target)
		if _, err := os.Lstat(filepath.Join(dst, "tree")); !errors.Is(err, os.ErrNotExist) {
			seen = append(seen, f.Target)
		}
	}}}
	res, err := p.Run(ctx, archive(), ro)
	if err != nil || len(res.Errors) > 0 {
		t.Fatalf("run: %v %v", err, res.Errors)
	}
	if len(seen) > 0 {
		t.Errorf("dst/tree existed while %d files were being copied (first %s): want it made under a temporary name", len(seen), seen[0])
	}
	if n := sameFiles(t, src, dst); n != 81 {
		t.Errorf("%d files arrived, want 81", n)
	}
	if got, err := os.Readlink(filepath.Join(dst, "tree", "l")); err != nil || got != "a/f0" {
		t.Errorf("link: %q, %v", got, err)
	}
	if fi, err := os.Stat(filepath.Join(dst, "tree", "empty")); err != nil || !fi.IsDir() {
		t.Errorf("empty directory: %v", err)
	}
	for _, n := range names(t, dst) {
		if strings.Contains(n, ".hpncp.") {
			t.Errorf("left behind: %s", n)
		}
	}
	for _, tg := range targets {
		if strings.Contains(tg, ".hpncp.") || !strings.Contains(tg, "/dst/tree/") {
			t.Errorf("report target %q: want the final place", tg)
		}
	}
	if len(targets) != 81 {
		t.Errorf("%d files reported, want 81", len(targets))
	}
}

// TestStagedTreeCancelled: a run cancelled while files are in flight
// still renames the new tree into place, and every file in it is whole:
// a file cut off was removed, not left under its name.
func TestStagedTreeCancelled(t *testing.T) {
	end := openSFTP(t, sshtest.Options{})
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	stagedTree(t, src)
	if err := os.Mkdir(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, err := Sync(ctx, transfer.Endpoint{FS: transfer.Local{}, Path: filepath.Join(src, "tree")},
		transfer.Endpoint{FS: end, Path: filepath.Join(dst, "tree")}, "tree", false, false, archive())
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	reported := 0
	ro := RunOptions{Engine: transfer.Options{Report: func(f transfer.FileReport) {
		mu.Lock()
		defer mu.Unlock()
		if reported++; reported == 10 {
			cancel()
		}
	}}}
	if _, err := p.Run(ctx, archive(), ro); !errors.Is(err, context.Canceled) {
		t.Fatalf("run: %v, want it cancelled", err)
	}
	n := sameFiles(t, src, dst)
	if n < 10 || n == 81 {
		t.Errorf("%d whole files in place after a cancel at the 10th: want at least those 10 and not all", n)
	}
	for _, n := range names(t, dst) {
		if strings.Contains(n, ".hpncp.") {
			t.Errorf("left behind: %s", n)
		}
	}
}

// TestStagedIntoExistingTarget: the new subdirectories of a remote
// target that exists are staged and renamed into place whatever form the
// user gave its path: absolute or relative to the remote home, with a
// trailing slash or dots, or the home itself. A stale entry goes
// (--delete), names with spaces, non-ASCII and a leading dash arrive in
// the new directories, and nothing temporary is left. The tree then
// comes back down, by the same path, into a stale local directory named
// with a trailing slash.
func TestStagedIntoExistingTarget(t *testing.T) {
	tree := map[string]string{
		"top":                           "top",
		"new dir/name with spaces":      "spaces",
		"new dir/ünïcödé/-leading-dash": "dash",
		"new dir/ünïcödé/link":          "->../name with spaces",
		"-dash dir/f":                   "f",
		"d/e/f":                         "deep",
		"empty/":                        "",
	}
	stale := map[string]string{"gone": "x", "d/e/f": "stale", "old dir/x": "x"}
	for _, c := range []struct {
		name string
		dir  string                   // the target below the server's root
		path func(root string) string // how the user names it
	}{
		{"absolute with slash", "dst", func(root string) string { return root + "/dst/" }},
		{"absolute", "dst", func(root string) string { return root + "/dst" }},
		{"absolute with dots", "dst", func(root string) string { return root + "//./dst/./" }},
		{"relative with slash", "dst", func(string) string { return "dst/" }},
		{"relative", "dst", func(string) string { return "dst" }},
		{"relative with dots", "dst", func(string) string { return "./dst/." }},
		{"home", ".", func(string) string { return "" }},
		{"home as dot", ".", func(string) string { return "." }},
	} {
		t.Run(c.name, func(t *testing.T) {
			end, srv := serveSFTP(t, sshtest.Options{})
			src := filepath.Join(t.TempDir(), "src")
			write(t, src, tree)
			dst := filepath.Join(srv.Root, c.dir)
			write(t, dst, stale)
			o := archive()
			o.Delete = true
			remote := transfer.Endpoint{FS: end, Path: c.path(srv.Root)}
			syncOver(t, transfer.Endpoint{FS: transfer.Local{}, Path: src + "/"}, remote, o)
			sameTree(t, src, dst)

			back := filepath.Join(t.TempDir(), "back")
			write(t, back, stale)
			syncOver(t, remote, transfer.Endpoint{FS: transfer.Local{}, Path: back + "/"}, o)
			sameTree(t, src, back)
		})
	}
}

// syncOver syncs the contents of src into the directory dst, which
// exists, and fails on any error.
func syncOver(t *testing.T, src, dst transfer.Endpoint, o Options) {
	t.Helper()
	ctx := context.Background()
	p, err := Sync(ctx, src, dst, ".", true, false, o)
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.Run(ctx, o, RunOptions{})
	if err != nil || len(res.Errors) > 0 {
		t.Fatalf("sync %s to %s: %v %v", src, dst, err, res.Errors)
	}
}

// sameTree fails unless the trees want and got hold the same names,
// files of the same content and links of the same targets.
func sameTree(t *testing.T, want, got string) {
	t.Helper()
	wn, gn := names(t, want), names(t, got)
	if strings.Join(wn, "\n") != strings.Join(gn, "\n") {
		t.Fatalf("%s holds\n\t%s\nwant\n\t%s", got, strings.Join(gn, "\n\t"), strings.Join(wn, "\n\t"))
	}
	for _, n := range wn {
		w, g := filepath.Join(want, n), filepath.Join(got, n)
		fi, err := os.Lstat(w)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			wl, _ := os.Readlink(w)
			if gl, err := os.Readlink(g); err != nil || gl != wl {
				t.Errorf("%s: link to %q, %v; want %q", g, gl, err, wl)
			}
		case fi.Mode().IsRegular():
			wb, _ := os.ReadFile(w)
			if gb, err := os.ReadFile(g); err != nil || !bytes.Equal(gb, wb) {
				t.Errorf("%s holds %q, %v; want %q", g, gb, err, wb)
			}
		}
	}
}

// TestSentFileNamedByItsSourcePath: each file the engine reports copied
// is itemized and, with --remove-source-files, its source removed,
// whatever form the source's path has: the engine's report names the
// file by a path joined and clean, the user's root may be "src/",
// "src/." or "dir/./f".
func TestSentFileNamedByItsSourcePath(t *testing.T) {
	for _, c := range []struct {
		name     string
		src      func(dir string) string
		rootName string
		contents bool
		want     []string
	}{
		{"directory with slash", func(dir string) string { return dir + "/src/" }, ".", true, []string{"f", "sub/g"}},
		{"directory with dot", func(dir string) string { return dir + "/src/." }, ".", true, []string{"f", "sub/g"}},
		{"file with dot", func(dir string) string { return dir + "/src/./f" }, "f", false, []string{"f"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			write(t, filepath.Join(dir, "src"), map[string]string{"f": "f", "sub/g": "g"})
			dst := filepath.Join(dir, "dst")
			if c.contents {
				dst += "/"
				write(t, dst, map[string]string{})
			}
			ctx := context.Background()
			o := archive()
			p, err := Sync(ctx, transfer.Endpoint{FS: transfer.Local{}, Path: c.src(dir)}, transfer.Endpoint{FS: transfer.Local{}, Path: dst}, c.rootName, c.contents, false, o)
			if err != nil {
				t.Fatal(err)
			}
			var printed []string
			res, err := p.Run(ctx, o, RunOptions{RemoveSource: true, Print: func(l string) { printed = append(printed, l) }})
			if err != nil || len(res.Errors) > 0 {
				t.Fatalf("run: %v %v", err, res.Errors)
			}
			for _, n := range c.want {
				if !slices.Contains(printed, ">f+++++++++ "+n) {
					t.Errorf("no itemized line for %s in %q", n, printed)
				}
				if _, err := os.Lstat(filepath.Join(dir, "src", n)); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("source %s not removed (%v)", n, err)
				}
			}
			if res.Removed != len(c.want) {
				t.Errorf("%d sources removed, want %d", res.Removed, len(c.want))
			}
		})
	}
}
