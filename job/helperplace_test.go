package job

import (
	"os"
	"path/filepath"
	"testing"
)

// TestHelperSettings: the flag wins over hpncp's configuration file,
// which wins over the defaults; a value the file cannot mean is an
// error naming it, never a guess.
func TestHelperSettings(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", dir)
	os.MkdirAll(filepath.Join(dir, "hpncp"), 0o700)
	os.WriteFile(filepath.Join(dir, "hpncp", "config"),
		[]byte("Host far\n  Helper install\n  HelperDir /scratch/h\nHost odd\n  Helper sometimes\nHost rel\n  HelperDir rel/dir\n"), 0o600)
	for _, c := range []struct{ host, mode, dir, wantMode, wantDir string }{
		{"near", "", "", HelperAuto, DefaultHelperDir},
		{"far", "", "", HelperInstall, "/scratch/h"},
		{"far", HelperNever, "~/h", HelperNever, "~/h"},
	} {
		mode, d, err := HelperSettings(c.host, c.mode, c.dir)
		if err != nil || mode != c.wantMode || d != c.wantDir {
			t.Errorf("HelperSettings(%q, %q, %q) = %q, %q, %v; want %q, %q", c.host, c.mode, c.dir, mode, d, err, c.wantMode, c.wantDir)
		}
	}
	for _, host := range []string{"odd", "rel"} {
		if _, _, err := HelperSettings(host, "", ""); err == nil {
			t.Errorf("HelperSettings(%q): no error for the file's value", host)
		}
	}
}

// TestReadBinaryRefusesOtherPrograms: only a binary built from hpncp's
// main package is ever uploaded as a helper; the test binary is not one.
func TestReadBinaryRefusesOtherPrograms(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Skip(err)
	}
	if _, err := readBinary(exe); err == nil {
		t.Errorf("readBinary(%s, the test binary) accepted it", exe)
	}
	notGo := filepath.Join(t.TempDir(), "script")
	os.WriteFile(notGo, []byte("#!/bin/sh\n"), 0o755)
	if _, err := readBinary(notGo); err == nil {
		t.Errorf("readBinary(a script) accepted it")
	}
}
