package helper

import (
	"bytes"
	"crypto/sha256"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestMachine(t *testing.T) {
	for _, c := range []struct{ uname, goos, goarch string }{
		{"Linux x86_64", "linux", "amd64"},
		{"Linux aarch64", "linux", "arm64"},
		{"Darwin arm64", "darwin", "arm64"},
		{"FreeBSD amd64", "freebsd", "amd64"},
		{"Linux i686", "linux", "386"},
		{"Linux armv7l", "", ""}, // GOARM unknown: no guess
		{"Linux mips", "", ""},
		{"SunOS i86pc", "", ""},
		{"Linux", "", ""},
		{"Linux x86_64 extra", "", ""},
	} {
		goos, goarch, ok := Machine(c.uname)
		if goos != c.goos || goarch != c.goarch || ok != (c.goos != "") {
			t.Errorf("Machine(%q) = %s/%s %v, want %s/%s", c.uname, goos, goarch, ok, c.goos, c.goarch)
		}
	}
}

func TestCheckDir(t *testing.T) {
	for _, d := range []string{"~/.cache/hpncp/helper", "/scratch/me/h", "~/x y/it's"} {
		if err := CheckDir(d); err != nil {
			t.Errorf("CheckDir(%q): %v", d, err)
		}
	}
	for _, d := range []string{"", "rel/dir", "~", "~/", "/", "~/a/../b", "/a//b", "/a/b/", "~/./a", "/a\nb", "~user/x"} {
		if err := CheckDir(d); err == nil {
			t.Errorf("CheckDir(%q) accepted it", d)
		}
	}
}

func TestNames(t *testing.T) {
	sum := sha256.Sum256([]byte("x"))
	v := VersionDir(sum)
	if !IsVersionDir(v) || IsVersionDir(v+"0") || IsVersionDir("1-../../etc") {
		t.Errorf("IsVersionDir does not take VersionDir's %q alone", v)
	}
	if !IsTempName("hpncp.tmp-0123456789abcdef") || IsTempName("hpncp.tmp-../x") || IsTempName("hpncp") {
		t.Errorf("IsTempName")
	}
}

// TestLaunchChecksTheHash runs Launch's line with sh, as a server's
// login would: the installed helper runs only while its hash is the one
// named; a changed one never runs, and the line says so on stderr; with
// none installed, hpncp on PATH runs.
func TestLaunchChecksTheHash(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	home := t.TempDir()
	bin := t.TempDir() // PATH: an "hpncp" that says it is the PATH's
	os.WriteFile(filepath.Join(bin, "hpncp"), []byte("#!/bin/sh\necho path \"$@\"\n"), 0o755)
	helper := []byte("#!/bin/sh\necho installed \"$@\"\n")
	sum := sha256.Sum256(helper)
	dir := filepath.Join(home, ".cache", "hpncp", "helper", VersionDir(sum))
	runtime := t.TempDir()
	run := func(d string, join bool) (string, string) {
		t.Helper()
		line := Launch(d, sum, "j", "--protocol 1 --job j", join)
		// The login's shell runs the line as sshd gives it.
		cmd := exec.Command(sh, "-c", line)
		cmd.Env = []string{"HOME=" + home, "PATH=" + bin + ":" + os.Getenv("PATH"), "XDG_RUNTIME_DIR=" + runtime}
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		cmd.Run()
		return out.String(), errb.String()
	}
	if out, _ := run("~/.cache/hpncp/helper", false); out != "path serve --protocol 1 --job j\n" {
		t.Errorf("none installed: %q, want the PATH's hpncp", out)
	}
	os.MkdirAll(dir, 0o700)
	os.WriteFile(filepath.Join(dir, BinaryName), helper, 0o700)
	if out, _ := run("~/.cache/hpncp/helper", false); out != "installed serve --protocol 1 --job j\n" {
		t.Errorf("installed: %q, want the installed helper", out)
	}
	abs := filepath.Join(home, ".cache", "hpncp", "helper")
	if out, _ := run(abs, false); out != "installed serve --protocol 1 --job j\n" {
		t.Errorf("installed, absolute directory: %q", out)
	}
	// A joining channel runs it once the first channel's helper has
	// made the job's socket.
	os.MkdirAll(filepath.Join(runtime, "hpncp", "run"), 0o700)
	ln, err := net.Listen("unix", filepath.Join(runtime, "hpncp", "run", "j.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if out, _ := run("~/.cache/hpncp/helper", true); out != "installed serve --protocol 1 --job j\n" {
		t.Errorf("join: %q, want the installed helper", out)
	}
	changed := append([]byte{}, helper...)
	changed[len(changed)-2] = 'X'
	os.WriteFile(filepath.Join(dir, BinaryName), changed, 0o700)
	out, stderr := run("~/.cache/hpncp/helper", false)
	if out != "" {
		t.Errorf("a changed helper ran: %q", out)
	}
	if msg, ok := CheckFailed(stderr); !ok || !strings.Contains(msg, "sha256 differs") {
		t.Errorf("a changed helper: stderr %q does not say why it was not run", stderr)
	}
}
