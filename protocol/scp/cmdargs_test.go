package scp

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/hpncp/hpncp/internal/sshdtest"
	"github.com/hpncp/hpncp/internal/sshtest"
	"github.com/hpncp/hpncp/protocol"
)

// scpArgs runs cmd under /bin/sh -c in dir with a shell function
// standing in for scp, and returns the arguments scp got after "--".
func scpArgs(t *testing.T, dir, cmd string) []string {
	t.Helper()
	c := exec.Command("/bin/sh", "-c", `scp() { printf '%s\0' "$#" "$@"; }; `+cmd)
	c.Dir = dir
	out, err := c.Output()
	if err != nil {
		t.Fatalf("sh -c %q: %v", cmd, err)
	}
	f := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	if n, err := strconv.Atoi(f[0]); err != nil || n != len(f)-1 {
		t.Fatalf("%s: scp got %q", cmd, out)
	}
	at := slices.Index(f, "--")
	if at < 0 {
		t.Fatalf("%s: no -- among %q", cmd, f[1:])
	}
	return f[at+1:]
}

// TestCommandPaths: the path of scp -f and scp -t, and every name the
// remote shell expands a pattern to, reach scp as paths, never options.
func TestCommandPaths(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"-rf", "a"} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	o := Options{Recursive: true, Preserve: true}
	for _, c := range []struct {
		p    string
		want []string // from the pattern of scp -f
	}{
		{"-x", []string{"./-x"}},
		{"-", []string{"./-"}},
		{"--", []string{"./--"}},
		{"-d/f", []string{"./-d/f"}},
		{"/abs/-x", []string{"/abs/-x"}},
		{"it's $(x)", []string{"it's $(x)"}},
		{"*", []string{"./-rf", "./a"}},
		{"??f", []string{"./-rf"}},
		{"-*", []string{"./-rf"}},
		{"[-a]*", []string{"./-rf", "./a"}},
		{"none*", []string{"./none*"}},
		{dir + "/*", []string{dir + "/-rf", dir + "/a"}},
	} {
		if got := scpArgs(t, dir, receiveCommand(c.p, o)); !slices.Equal(got, c.want) {
			t.Errorf("%s: scp -f got %q, want %q", receiveCommand(c.p, o), got, c.want)
		}
		want := protocol.NotOption(c.p)
		if got := scpArgs(t, dir, sendCommand(c.p, o)); len(got) != 1 || got[0] != want {
			t.Errorf("%s: scp -t got %q, want %q", sendCommand(c.p, o), got, want)
		}
	}
}

// TestDashPathsRealSCP: OpenSSH's scp, run by the in-process server's
// shell in the login's directory, sends a file named "-r" and receives
// one into a directory named "-d".
func TestDashPathsRealSCP(t *testing.T) {
	sshdtest.LookTool(t, "scp")
	home := t.TempDir()
	srv := sshtest.Start(t, sshtest.Options{Exec: sshtest.ShellExec(home)})
	h := NewHost(srv.Dial(t), "testhost:")
	if err := os.WriteFile(filepath.Join(home, "-r"), []byte("dash"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(home, "-d"), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	rcv, err := h.Receive(ctx, "-r", Options{})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := rcv.Next()
	if err != nil || rec.Type != File || rec.Name != "-r" {
		t.Fatalf("Next = %+v, %v; want the file -r", rec, err)
	}
	if err := rcv.Reply(nil); err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(rcv)
	if err != nil || string(body) != "dash" {
		t.Fatalf("body %q, %v", body, err)
	}
	if err := rcv.FinishBody(); err != nil {
		t.Fatal(err)
	}
	if err := rcv.Reply(nil); err != nil {
		t.Fatal(err)
	}
	if _, err := rcv.Next(); err != io.EOF {
		t.Fatalf("Next = %v, want io.EOF", err)
	}
	if err := rcv.Close(); err != nil {
		t.Fatal(err)
	}

	snd, err := h.Send(ctx, "-d", Options{TargetIsDir: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := snd.StartFile(Record{Type: File, Mode: 0o644, Size: 2, Name: "-f"}); err != nil {
		t.Fatal(err)
	}
	if _, err := snd.Write([]byte("up")); err != nil {
		t.Fatal(err)
	}
	if err := snd.EndFile(nil); err != nil {
		t.Fatal(err)
	}
	if err := snd.Close(); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(home, "-d", "-f")); err != nil || string(b) != "up" {
		t.Fatalf("-d/-f: %q, %v", b, err)
	}
	entries, err := os.ReadDir(home)
	if err != nil || len(entries) != 2 {
		t.Fatalf("the login's directory holds %v, %v; want -d and -r alone", entries, err)
	}
}
