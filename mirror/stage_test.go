package mirror

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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
