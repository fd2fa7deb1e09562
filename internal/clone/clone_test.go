package clone

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestInto: a clone holds the source's bytes; where the file system
// makes none, the file is left empty. Finish cuts the clone while the
// source is unchanged, and refuses once it was written, a byte in place
// as well as at its end. Set HPNCP_CLONE_DIR to a directory on XFS or
// Btrfs to require the clone.
func TestInto(t *testing.T) {
	dir := os.Getenv("HPNCP_CLONE_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	data := bytes.Repeat([]byte("a block, and a tail that is not one "), 200_000)
	srcName := filepath.Join(dir, "src")
	if err := os.WriteFile(srcName, data, 0o644); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(srcName)
	src, err := os.OpenFile(srcName, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dstName := filepath.Join(dir, "dst")
	dst, err := os.OpenFile(dstName, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(dstName)
	c := Of(dst, src)
	cloned := c != nil
	got, _ := os.ReadFile(dstName)
	switch {
	case cloned && !bytes.Equal(got, data):
		t.Errorf("cloned: %d bytes, not the source's %d", len(got), len(data))
	case !cloned && len(got) != 0:
		t.Errorf("not cloned, yet the file holds %d bytes", len(got))
	case !cloned && os.Getenv("HPNCP_CLONE_DIR") != "":
		t.Errorf("no clone in %s", dir)
	}
	if fi, _ := os.Stat(dstName); fi.Mode().Perm() != 0o600 {
		t.Errorf("the clone's mode is %v, not its own", fi.Mode())
	}
	t.Logf("cloned: %v", cloned)
	if !cloned {
		dst.Close()
		return
	}
	if err := c.Finish(100); err != nil {
		t.Errorf("the source, not written, changed since the clone: %v", err)
	}
	if fi, _ := dst.Stat(); fi.Size() != 100 {
		t.Errorf("finished at 100 bytes, the clone holds %d", fi.Size())
	}
	// A byte rewritten in place, the size the same, straight after.
	if _, err := src.WriteAt([]byte("A"), 1000); err != nil {
		t.Fatal(err)
	}
	if err := c.Finish(50); !errors.Is(err, ErrChanged) {
		t.Errorf("a byte of the source was rewritten, and Finish says %v", err)
	}
	if fi, _ := dst.Stat(); fi.Size() != 100 {
		t.Errorf("a refused Finish cut the clone to %d bytes", fi.Size())
	}
	dst.Close()
}
