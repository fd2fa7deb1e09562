package sshtest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hpncp/hpncp/internal/sshdtest"
	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// clientConfig authenticates with the given methods (the server's client
// key if none) and checks the host key against KnownHostsFile, so that
// every test also checks the files Start writes.
func clientConfig(t *testing.T, s *Server, auth ...ssh.AuthMethod) *ssh.ClientConfig {
	t.Helper()
	if len(auth) == 0 {
		pem, err := os.ReadFile(s.ClientKeyFile)
		if err != nil {
			t.Fatal(err)
		}
		signer, err := ssh.ParsePrivateKey(pem)
		if err != nil {
			t.Fatalf("parse %s: %v", s.ClientKeyFile, err)
		}
		auth = []ssh.AuthMethod{ssh.PublicKeys(signer)}
	}
	hostKeys, err := knownhosts.New(s.KnownHostsFile)
	if err != nil {
		t.Fatalf("read %s: %v", s.KnownHostsFile, err)
	}
	return &ssh.ClientConfig{
		User:            "tester",
		Auth:            auth,
		HostKeyCallback: hostKeys,
		Timeout:         10 * time.Second,
	}
}

func dial(t *testing.T, s *Server, auth ...ssh.AuthMethod) *ssh.Client {
	t.Helper()
	c, err := ssh.Dial("tcp", s.Addr, clientConfig(t, s, auth...))
	if err != nil {
		t.Fatalf("dial %s: %v", s.Addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func newSFTP(t *testing.T, c *ssh.Client) *sftp.Client {
	t.Helper()
	sc, err := sftp.NewClient(c, sftp.MaxPacketUnchecked(maxReadLength))
	if err != nil {
		t.Fatalf("start sftp: %v", err)
	}
	t.Cleanup(func() { sc.Close() })
	return sc
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7) + seed
	}
	return b
}

func TestSFTPServesFilesUnderRoot(t *testing.T) {
	s := Start(t, Options{})
	sc := newSFTP(t, dial(t, s))

	wd, err := sc.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if wd != s.Root {
		t.Errorf("remote working directory %q, want Root %q", wd, s.Root)
	}

	if err := sc.Mkdir("dir"); err != nil {
		t.Fatal(err)
	}
	want := pattern(3<<20+17, 1) // several maximal reads and a short tail
	f, err := sc.Create("dir/part")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(want); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.Root, "dir", "final"), []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	// posix-rename replaces an existing target, which plain SFTP rename
	// refuses to do.
	if err := sc.PosixRename("dir/part", "dir/final"); err != nil {
		t.Fatalf("posix-rename over an existing file: %v", err)
	}

	onDisk, err := os.ReadFile(filepath.Join(s.Root, "dir", "final"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(onDisk, want) {
		t.Errorf("file on disk: %d bytes differ from the %d written", len(onDisk), len(want))
	}
	r, err := sc.Open("dir/final")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("read back %d bytes, differing from the %d written", len(got), len(want))
	}
	if _, err := sc.Stat("dir/part"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stat renamed-away file: %v, want not exist", err)
	}
	if n := s.Connections(); n != 1 {
		t.Errorf("Connections() = %d, want 1", n)
	}
}

func TestAuthentication(t *testing.T) {
	withPassword := Start(t, Options{Password: "s3cret"})
	keyOnly := Start(t, Options{})
	answer := func(a string) ssh.AuthMethod {
		return ssh.KeyboardInteractive(func(_, _ string, questions []string, _ []bool) ([]string, error) {
			answers := make([]string, len(questions))
			for i := range answers {
				answers[i] = a
			}
			return answers, nil
		})
	}
	for _, tc := range []struct {
		name string
		srv  *Server
		auth ssh.AuthMethod // nil: the client key
		ok   bool
	}{
		{"key", keyOnly, nil, true},
		{"key with password set", withPassword, nil, true},
		{"password", withPassword, ssh.Password("s3cret"), true},
		{"wrong password", withPassword, ssh.Password("guess"), false},
		{"keyboard-interactive", withPassword, answer("s3cret"), true},
		{"wrong keyboard-interactive", withPassword, answer("guess"), false},
		{"password not enabled", keyOnly, ssh.Password(""), false},
		{"other key", keyOnly, ssh.PublicKeys(Start(t, Options{}).HostKey), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var auth []ssh.AuthMethod
			if tc.auth != nil {
				auth = append(auth, tc.auth)
			}
			c, err := ssh.Dial("tcp", tc.srv.Addr, clientConfig(t, tc.srv, auth...))
			if err == nil {
				c.Close()
			}
			if (err == nil) != tc.ok {
				t.Errorf("dial: %v, want success %v", err, tc.ok)
			}
		})
	}
}

// TestOpenSSHClient checks ConfigFile, KnownHostsFile and the server with
// the stock sftp client, which is stricter than pkg/sftp in places.
func TestOpenSSHClient(t *testing.T) {
	sftpBin := sshdtest.LookTool(t, "sftp")
	s := Start(t, Options{})
	local := filepath.Join(t.TempDir(), "up.txt")
	if err := os.WriteFile(local, []byte("from openssh"), 0o644); err != nil {
		t.Fatal(err)
	}
	batch := fmt.Sprintf("put %s sub-up.txt\nls -1\n", local)
	cmd := exec.Command(sftpBin, "-F", s.ConfigFile, "-b", "-", "testhost")
	cmd.Stdin = strings.NewReader(batch)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sftp -F %s testhost: %v\n%s", s.ConfigFile, err, out)
	}
	if !strings.Contains(string(out), "sub-up.txt") {
		t.Errorf("ls after put does not list the file:\n%s", out)
	}
	got, err := os.ReadFile(filepath.Join(s.Root, "sub-up.txt"))
	if err != nil || string(got) != "from openssh" {
		t.Errorf("uploaded file under Root: %q, %v", got, err)
	}
}

func TestNoSFTP(t *testing.T) {
	s := Start(t, Options{NoSFTP: true})
	if sc, err := sftp.NewClient(dial(t, s)); err == nil {
		sc.Close()
		t.Fatal("sftp subsystem started although NoSFTP is set")
	}
}

func TestMaxSessions(t *testing.T) {
	const max = 2
	s := Start(t, Options{MaxSessions: max})
	c := dial(t, s)

	var open []*ssh.Session
	for range max {
		sess, err := c.NewSession()
		if err != nil {
			t.Fatalf("session %d of %d: %v", len(open)+1, max, err)
		}
		open = append(open, sess)
	}
	_, err := c.NewSession()
	var oce *ssh.OpenChannelError
	if !errors.As(err, &oce) || oce.Reason != ssh.Prohibited {
		t.Fatalf("session beyond MaxSessions: %v, want an administratively prohibited refusal", err)
	}

	// A session closed just before is free for the next open: clients that
	// recycle sessions at the limit must never be refused. Requests queued
	// on the closing session keep the server busy, so that the close and
	// the open are pending together.
	for i := range 200 {
		for range 8 {
			if _, err := open[0].SendRequest("env", false, ssh.Marshal(struct{ Name, Value string }{"LANG", "C"})); err != nil {
				t.Fatal(err)
			}
		}
		open[0].Close()
		sess, err := c.NewSession()
		if err != nil {
			t.Fatalf("round %d: open right after a close at the limit: %v", i, err)
		}
		open[0] = sess
	}

	// Sessions on another connection are counted apart.
	if sess, err := dial(t, s).NewSession(); err != nil {
		t.Errorf("session on a second connection: %v", err)
	} else {
		sess.Close()
	}
	// Other channel types do not count.
	target := Start(t, Options{})
	if fwd, err := c.Dial("tcp", target.Addr); err != nil {
		t.Errorf("direct-tcpip at the session limit: %v", err)
	} else {
		fwd.Close()
	}
}

func TestExec(t *testing.T) {
	var mu sync.Mutex
	var gotCmd string
	s := Start(t, Options{Exec: func(cmd string, stdin io.Reader, stdout, stderr io.Writer) int {
		mu.Lock()
		gotCmd = cmd
		mu.Unlock()
		in, err := io.ReadAll(stdin)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		stdout.Write(bytes.ToUpper(in))
		fmt.Fprint(stderr, "warned")
		return 3
	}})
	sess, err := dial(t, s).NewSession()
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	sess.Stdin = strings.NewReader("hello")
	sess.Stdout = &stdout
	sess.Stderr = &stderr
	err = sess.Run("shout --loud 'a b'")
	var exit *ssh.ExitError
	if !errors.As(err, &exit) || exit.ExitStatus() != 3 {
		t.Errorf("Run: %v, want exit status 3", err)
	}
	if stdout.String() != "HELLO" || stderr.String() != "warned" {
		t.Errorf("stdout %q, stderr %q; want HELLO, warned", stdout.String(), stderr.String())
	}
	mu.Lock()
	defer mu.Unlock()
	if gotCmd != "shout --loud 'a b'" {
		t.Errorf("handler got command %q", gotCmd)
	}
}

func TestExecRefusedWithoutHandler(t *testing.T) {
	s := Start(t, Options{})
	sess, err := dial(t, s).NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	if err := sess.Run("true"); err == nil {
		t.Error("exec succeeded without an Exec handler")
	}
}

func TestConcurrentSFTPSessionsOnOneConnection(t *testing.T) {
	s := Start(t, Options{})
	c := dial(t, s)
	const n = 16
	errs := make(chan error, n)
	for i := range n {
		go func() {
			errs <- roundTrip(c, fmt.Sprintf("f%02d", i), pattern(1<<20, byte(i)))
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if n := s.Connections(); n != 1 {
		t.Errorf("Connections() = %d, want 1", n)
	}
}

func roundTrip(c *ssh.Client, name string, data []byte) error {
	sc, err := sftp.NewClient(c, sftp.MaxPacketUnchecked(maxReadLength))
	if err != nil {
		return fmt.Errorf("start sftp for %s: %w", name, err)
	}
	defer sc.Close()
	w, err := sc.Create(name)
	if err != nil {
		return err
	}
	if _, err := w.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	if err := w.Close(); err != nil {
		return err
	}
	r, err := sc.Open(name)
	if err != nil {
		return err
	}
	defer r.Close()
	got, err := io.ReadAll(r)
	if err != nil {
		return fmt.Errorf("read %s: %w", name, err)
	}
	if !bytes.Equal(got, data) {
		return fmt.Errorf("%s: read back %d bytes differing from the %d written", name, len(got), len(data))
	}
	return nil
}

func TestDirectTCPIPJumpHost(t *testing.T) {
	jump := Start(t, Options{})
	target := Start(t, Options{})
	jc := dial(t, jump)

	nc, err := jc.Dial("tcp", target.Addr)
	if err != nil {
		t.Fatalf("direct-tcpip to %s: %v", target.Addr, err)
	}
	conn, chans, reqs, err := ssh.NewClientConn(nc, target.Addr, clientConfig(t, target))
	if err != nil {
		t.Fatalf("ssh through the jump host: %v", err)
	}
	tc := ssh.NewClient(conn, chans, reqs)
	defer tc.Close()
	if err := roundTrip(tc, "hop", pattern(1<<20, 9)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(target.Root, "hop")); err != nil {
		t.Errorf("file not on the target: %v", err)
	}
	if _, err := os.Stat(filepath.Join(jump.Root, "hop")); err == nil {
		t.Error("file landed on the jump host")
	}

	// The address is from TEST-NET-1: it is refused before any dial.
	_, err = jc.Dial("tcp", "192.0.2.1:22")
	var oce *ssh.OpenChannelError
	if !errors.As(err, &oce) || oce.Reason != ssh.Prohibited {
		t.Errorf("direct-tcpip to a non-loopback address: %v, want a prohibited refusal", err)
	}
}

func TestKillConnections(t *testing.T) {
	s := Start(t, Options{})
	c := dial(t, s)
	sc := newSFTP(t, c)
	w, err := sc.Create("partial")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(pattern(1<<20, 2)); err != nil {
		t.Fatal(err)
	}

	s.KillConnections()
	waitClosed(t, c)
	if _, err := w.Write([]byte("more")); err == nil {
		t.Error("write succeeded on a killed connection")
	}
	if err := roundTrip(dial(t, s), "after", []byte("x")); err != nil {
		t.Errorf("new connection after KillConnections: %v", err)
	}
	if n := s.Connections(); n != 2 {
		t.Errorf("Connections() = %d, want 2", n)
	}
}

func TestStopsWhenTestEnds(t *testing.T) {
	var addr string
	var c *ssh.Client
	t.Run("inner", func(t *testing.T) {
		s := Start(t, Options{})
		addr = s.Addr
		c = dial(t, s)
		newSFTP(t, c)
	})
	if nc, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		nc.Close()
		t.Errorf("%s still accepts connections after its test ended", addr)
	}
	waitClosed(t, c)
}

func waitClosed(t *testing.T, c *ssh.Client) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		c.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("client connection still open 10s after the server dropped it")
	}
}

// TestWrapConn: WrapConn sees every connection in the order accepted and
// sits under the SSH handshake: closing the first one as it arrives fails
// its handshake, and the second is served through its wrapper.
func TestWrapConn(t *testing.T) {
	var mu sync.Mutex
	var seen []int
	s := Start(t, Options{WrapConn: func(n int, c net.Conn) net.Conn {
		mu.Lock()
		seen = append(seen, n)
		mu.Unlock()
		if n == 0 {
			c.Close()
		}
		return c
	}})
	if c, err := ssh.Dial("tcp", s.Addr, clientConfig(t, s)); err == nil {
		c.Close()
		t.Fatal("the handshake succeeded on a connection its wrapper closed")
	}
	dial(t, s)
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(seen) != "[0 1]" {
		t.Fatalf("WrapConn saw connections %v, want [0 1]", seen)
	}
}
