package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hpncp/hpncp/internal/sshdtest"
	"github.com/hpncp/hpncp/internal/testenv"
)

// installWorld is a real sshd, an hpncp binary run as a user runs it (so
// that the running hpncp is the one uploaded), an empty directory that
// stands for the server's home, where hpncp's configuration puts the
// helpers (HelperDir), and the socket directory the helper is sent
// (XDG_RUNTIME_DIR).
type installWorld struct {
	bin     string
	conn    []string // hpncp ssh's connection flags
	home    string   // the helpers' home on the server
	dir     string   // HelperDir
	runtime string
	env     []string
}

func newInstallWorld(t *testing.T, sshdConfig ...string) *installWorld {
	t.Helper()
	srv := sshdtest.Start(t, sshdtest.Options{ExtraConfig: append([]string{"AcceptEnv XDG_RUNTIME_DIR"}, sshdConfig...)})
	top, err := os.MkdirTemp("", "hpncp-install-e2e") // short: a socket's path must fit
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(top) })
	w := &installWorld{bin: testenv.BuildHpncp(t, top)}
	w.home = filepath.Join(top, "home")
	w.dir = filepath.Join(w.home, ".cache", "hpncp", "helper")
	w.runtime = filepath.Join(top, "run")
	config := filepath.Join(top, "config")
	for _, d := range []string{w.home, w.runtime, filepath.Join(config, "hpncp")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// hpncp's own configuration names the helpers' directory for the
	// host, as a user's would.
	if err := os.WriteFile(filepath.Join(config, "hpncp", "config"), []byte("Host e2e\n    HelperDir "+w.dir+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	w.conn = []string{"-F", srv.ConfigFile, "-o", "SetEnv=XDG_RUNTIME_DIR=" + w.runtime}
	w.env = append(os.Environ(), "XDG_CONFIG_HOME="+config, "XDG_CACHE_HOME="+filepath.Join(top, "cache"))
	return w
}

// run runs the hpncp binary with args and stdin; it returns stdout,
// stderr and the exit code.
func (w *installWorld) run(t *testing.T, stdin []byte, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, w.bin, args...)
	cmd.Env = w.env
	cmd.Stdin = bytes.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("hpncp %v: %v", args, err)
		}
		code = ee.ExitCode()
	}
	return out.String(), errb.String(), code
}

func (w *installWorld) ssh(flags ...string) []string {
	return append(append([]string{"ssh"}, w.conn...), flags...)
}

func (w *installWorld) helper(action string, flags ...string) []string {
	return append(append([]string{"helper", action}, w.conn...), append(flags, "e2e")...)
}

// entries lists what is under dir, relative to it.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		if p != dir {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, rel)
		}
		return nil
	})
	return out
}

// TestHelperInstallE2E: against a real sshd, hpncp uploads itself as
// the helper only when asked (hpncp helper install, or --helper install),
// the helper lands owner-only under its hash's name and is used by hpncp
// ssh from then on; a helper with changed bytes is never run; and
// hpncp helper remove leaves the home as it found it.
func TestHelperInstallE2E(t *testing.T) {
	w := newInstallWorld(t)
	data := make([]byte, 6<<20+3)
	rand.New(rand.NewSource(38)).Read(data)
	target := filepath.Join(t.TempDir(), "f")

	// Without consent nothing is uploaded: the command runs on one
	// channel, and a line (no -v) says a helper would have helped.
	out, stderr, code := w.run(t, nil, w.ssh("--connections", "3", "e2e", "echo ran")...)
	if code != 0 || out != "ran\n" {
		t.Fatalf("hpncp ssh without a helper: %q, exit %d\n%s", out, code, stderr)
	}
	if !strings.Contains(stderr, "no helper on e2e") || !strings.Contains(stderr, "hpncp helper install e2e") {
		t.Errorf("no hint that a helper would have helped:\n%s", stderr)
	}
	if got := entries(t, w.home); len(got) != 0 {
		t.Fatalf("a helper was uploaded without consent: %v", got)
	}

	// hpncp helper install: under DIR/PROTOCOL-HASH/hpncp, owner-only,
	// the bytes of the binary that ran.
	out, stderr, code = w.run(t, nil, w.helper("install")...)
	if code != 0 {
		t.Fatalf("hpncp helper install: exit %d\n%s%s", code, out, stderr)
	}
	bin, _ := os.ReadFile(w.bin)
	sum := sha256.Sum256(bin)
	installed := filepath.Join(w.dir, "1-"+hex.EncodeToString(sum[:8]), "hpncp")
	if !strings.Contains(out, "helper installed at e2e:"+installed) {
		t.Errorf("install says %q, want the path %s", out, installed)
	}
	got, err := os.ReadFile(installed)
	if err != nil || sha256.Sum256(got) != sum {
		t.Fatalf("the installed helper is not the binary (%v)", err)
	}
	for _, p := range []string{w.dir, filepath.Dir(installed), installed} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: mode %v (%v), want 0700", p, fi.Mode().Perm(), err)
		}
	}
	if names := entries(t, filepath.Dir(installed)); len(names) != 1 {
		t.Errorf("the helper's directory holds %v, want the helper alone", names)
	}

	// hpncp ssh finds it, checks it and stripes through it.
	_, stderr, code = w.run(t, data, w.ssh("--connections", "3", "-v", "e2e", "cat > "+target)...)
	if code != 0 || !strings.Contains(stderr, "striping over 3 connections") {
		t.Fatalf("hpncp ssh with the helper installed: exit %d, not striped\n%s", code, stderr)
	}
	if got, _ := os.ReadFile(target); sha256.Sum256(got) != sha256.Sum256(data) {
		t.Fatalf("the file written through the installed helper differs (%d bytes of %d)", len(got), len(data))
	}
	out, stderr, code = w.run(t, nil, w.helper("status")...)
	if code != 0 || !strings.Contains(out, "this hpncp's, sha256 checked") || !strings.Contains(out, "answers:   yes") {
		t.Errorf("hpncp helper status, installed: exit %d\n%s%s", code, out, stderr)
	}

	// A helper with a changed byte is never run: here one that would
	// leave a mark, with the command run on one channel all the same
	// and a line (no -v) saying why.
	mark := filepath.Join(t.TempDir(), "ran")
	fake := []byte("#!/bin/sh\ntouch " + mark + "\nexec " + w.bin + " \"$@\"\n")
	// Put in place by rename: a helper of the last run may still be
	// exiting, and a running binary cannot be written.
	if err := os.WriteFile(installed+".new", fake, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(installed+".new", installed); err != nil {
		t.Fatal(err)
	}
	out, stderr, code = w.run(t, nil, w.ssh("--connections", "3", "e2e", "echo ran")...)
	if code != 0 || out != "ran\n" {
		t.Fatalf("hpncp ssh with a changed helper: %q, exit %d\n%s", out, code, stderr)
	}
	if _, err := os.Stat(mark); err == nil {
		t.Fatalf("the changed helper ran")
	}
	if !strings.Contains(stderr, "sha256 differs; not running it") {
		t.Errorf("nothing says the changed helper was not run:\n%s", stderr)
	}
	out, _, _ = w.run(t, nil, w.helper("status")...)
	if !strings.Contains(out, "sha256 differs") || strings.Contains(out, "answers:   yes") {
		t.Errorf("hpncp helper status, changed helper:\n%s", out)
	}
	if _, err := os.Stat(mark); err == nil {
		t.Fatalf("the changed helper ran for status")
	}

	// --helper install asks for the upload: hpncp ssh puts the helper
	// back and stripes through it in the same run.
	_, stderr, code = w.run(t, data, w.ssh("--helper", "install", "--connections", "3", "-v", "e2e", "cat > "+target+".2")...)
	if code != 0 || !strings.Contains(stderr, "installed the helper at e2e:"+installed) || !strings.Contains(stderr, "striping over 3 connections") {
		t.Fatalf("hpncp ssh --helper install: exit %d\n%s", code, stderr)
	}
	if got, _ := os.ReadFile(target + ".2"); sha256.Sum256(got) != sha256.Sum256(data) {
		t.Fatalf("the file written through the helper installed by --helper install differs")
	}
	if got, _ := os.ReadFile(installed); sha256.Sum256(got) != sum {
		t.Fatalf("--helper install left the changed helper in place")
	}
	if _, err := os.Stat(mark); err == nil {
		t.Fatalf("the changed helper ran")
	}

	// hpncp helper remove: nothing of hpncp's is left in the home, or in
	// the socket directory; the record of a check beside the helper (the
	// launch line writes one for a file two seconds old) goes too.
	os.WriteFile(filepath.Join(filepath.Dir(installed), "hpncp.checked"), []byte(hex.EncodeToString(sum[:])+" 1 2 3 4 5\n"), 0o600)
	out, stderr, code = w.run(t, nil, w.helper("remove")...)
	if code != 0 {
		t.Fatalf("hpncp helper remove: exit %d\n%s%s", code, out, stderr)
	}
	if left := entries(t, w.home); len(left) != 0 {
		t.Errorf("hpncp helper remove left %v in the home", left)
	}
	if left := entries(t, w.runtime); len(left) != 0 {
		t.Errorf("hpncp helper remove left %v in the socket directory", left)
	}
	out, _, code = w.run(t, nil, w.helper("remove")...)
	if code != 0 || !strings.Contains(out, "no helper installed") {
		t.Errorf("a second remove: exit %d, %q", code, out)
	}
}

// TestHelperOtherSystemE2E: a server whose uname -s -m is another
// system's than the binary's (here a uname on the login's PATH that says
// so) never gets a helper uploaded, asked or not; the command still runs,
// on one channel.
func TestHelperOtherSystemE2E(t *testing.T) {
	fakebin := t.TempDir()
	if err := os.WriteFile(filepath.Join(fakebin, "uname"), []byte("#!/bin/sh\necho Linux mips\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(fakebin, 0o755)
	w := newInstallWorld(t, "SetEnv PATH="+fakebin+":/usr/local/bin:/usr/bin:/bin")
	out, stderr, code := w.run(t, nil, w.helper("install")...)
	if code != 1 || !strings.Contains(stderr, "not uploading a helper to e2e") {
		t.Errorf("hpncp helper install to another system: exit %d, want 1\n%s%s", code, out, stderr)
	}
	out, stderr, code = w.run(t, nil, w.ssh("--helper", "install", "--connections", "3", "e2e", "echo ran")...)
	if code != 0 || out != "ran\n" || !strings.Contains(stderr, "not uploading a helper to e2e") {
		t.Errorf("hpncp ssh --helper install to another system: %q, exit %d\n%s", out, code, stderr)
	}
	if got := entries(t, w.home); len(got) != 0 {
		t.Fatalf("a helper was uploaded to another system: %v", got)
	}
}
