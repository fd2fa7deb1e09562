package hostconfig

import (
	"os"
	"path/filepath"
	"testing"
)

func TestGet(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", dir)
	if v, err := Get("h", "Helper"); v != "" || err != nil {
		t.Fatalf("no file: %q, %v", v, err)
	}
	os.MkdirAll(filepath.Join(dir, "hpncp"), 0o700)
	os.WriteFile(filepath.Join(dir, "hpncp", "config"), []byte("Host build-*\n  Helper install\n  HelperDir /scratch/h\nHost *\n  Helper never\n"), 0o600)
	for _, c := range []struct{ host, key, want string }{
		{"build-1", "Helper", "install"},
		{"build-1", "helperdir", "/scratch/h"},
		{"other", "Helper", "never"},
		{"other", "HelperDir", ""},
	} {
		if v, err := Get(c.host, c.key); v != c.want || err != nil {
			t.Errorf("Get(%q, %q) = %q, %v; want %q", c.host, c.key, v, err, c.want)
		}
	}
	// A file that cannot be read is an error naming it, not a default.
	os.Remove(filepath.Join(dir, "hpncp", "config"))
	os.Mkdir(filepath.Join(dir, "hpncp", "config"), 0o700)
	if _, err := Get("h", "Helper"); err == nil {
		t.Errorf("a configuration that cannot be read: no error")
	}
}
