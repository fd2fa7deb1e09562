package mirror

import (
	"os"
	"path/filepath"
	"testing"
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
