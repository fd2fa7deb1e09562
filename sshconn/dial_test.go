package sshconn

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/hpncp/hpncp/internal/sshtest"
)

// jumpEnv is a jump server and a target server whose host keys are both
// known, and a key both accept.
func jumpEnv(t *testing.T, jumpOpts ...serverOption) (jump, target *testServer, e *env, keyFile string) {
	t.Helper()
	dir := t.TempDir()
	keyFile = filepath.Join(dir, "id")
	pub := writeKey(t, dir, "id", "ed25519", false)
	jump = newTestServer(t, append([]serverOption{withKeys(pub), withDirectTCPIP()}, jumpOpts...)...)
	target = newTestServer(t, withKeys(pub))
	e = newEnv(t)
	e.writeKnownHosts(
		knownLine(fmt.Sprintf("[127.0.0.1]:%d", jump.port), jump.hostKey.PublicKey()),
		knownLine(fmt.Sprintf("[127.0.0.1]:%d", target.port), target.hostKey.PublicKey()))
	return jump, target, e, keyFile
}

func TestJumpHost(t *testing.T) {
	for _, viaFlag := range []bool{false, true} {
		t.Run(fmt.Sprintf("flag=%v", viaFlag), func(t *testing.T) {
			jump, target, e, key := jumpEnv(t)
			proxyJump := "  ProxyJump jumpbox\n"
			if viaFlag {
				proxyJump = ""
			}
			e.writeConfig(targetBlock("jumpbox", jump)+targetBlock("target", target)+proxyJump,
				"StrictHostKeyChecking yes", "IdentityFile "+key)
			o := e.options(nil)
			if viaFlag {
				o.JumpHosts = "jumpbox"
			}
			c, err := NewDialer(o).Dial(context.Background(), "target")
			if err != nil {
				t.Fatalf("%v\n%s", err, e.logs.String())
			}
			if jump.forwards.Load() != 1 {
				t.Errorf("jump server forwarded %d connections, want 1", jump.forwards.Load())
			}
			if _, _, err := c.SendRequest("keepalive@openssh.com", true, nil); err != nil {
				t.Errorf("request over the jumped connection: %v", err)
			}
			if err := c.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			waitFor(t, "the jump connection to close", func() bool { return jump.closedConns.Load() == 1 })
		})
	}
}

// TestJumpHostKeyCheckedPerHop: the jump host's key is checked on its own.
func TestJumpHostKeyCheckedPerHop(t *testing.T) {
	jump, target, e, key := jumpEnv(t)
	e.writeKnownHosts(knownLine(fmt.Sprintf("[127.0.0.1]:%d", target.port), target.hostKey.PublicKey()))
	e.writeConfig(targetBlock("jumpbox", jump)+targetBlock("target", target, "ProxyJump jumpbox"),
		"StrictHostKeyChecking yes", "IdentityFile "+key)
	_, err := NewDialer(e.options(nil)).Dial(context.Background(), "target")
	he, ok := asError(err)
	if !ok || he.Host != fmt.Sprintf("[127.0.0.1]:%d", jump.port) || !strings.Contains(he.Error(), "host key verification failed") {
		t.Fatalf("err = %v, want the jump host's key refused", err)
	}
}

func TestJumpHostLoop(t *testing.T) {
	jump, _, e, key := jumpEnv(t)
	e.writeConfig(targetBlock("jumpbox", jump), "ProxyJump jumpbox", "IdentityFile "+key)
	_, err := NewDialer(e.options(nil)).Dial(context.Background(), "jumpbox")
	if err == nil || !strings.Contains(err.Error(), "jump host loop") {
		t.Fatalf("err = %v, want a loop error", err)
	}
}

func TestProxyCommand(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	pub := writeKey(t, dir, "id", "ed25519", false)
	srv := newTestServer(t, withKeys(pub))
	e := authEnv(t, srv, "IdentityFile "+filepath.Join(dir, "id"),
		fmt.Sprintf("ProxyCommand env HPNCP_SSHCONN_NETCAT=%%h:%%p %s", exe))
	c, err := NewDialer(e.options(nil)).Dial(context.Background(), "target")
	if err != nil {
		t.Fatalf("%v\n%s", err, e.logs.String())
	}
	if err := c.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

func TestCiphers(t *testing.T) {
	srv := newTestServer(t)
	e := authEnv(t, srv)
	negotiated := func(c *Client) string {
		return c.Conn.(ssh.AlgorithmsConnMetadata).Algorithms().Write.Cipher
	}
	c, err := NewDialer(e.options(nil)).Dial(context.Background(), "target")
	if err != nil {
		t.Fatal(err)
	}
	if want := preferredCiphers(hasAESHardware())[0]; negotiated(c) != want {
		t.Errorf("default cipher %s, want %s", negotiated(c), want)
	}
	c.Close()

	o := e.options(nil)
	o.Ciphers = "aes192-cbc,aes256-ctr"
	c, err = NewDialer(o).Dial(context.Background(), "target")
	if err != nil {
		t.Fatal(err)
	}
	if negotiated(c) != "aes256-ctr" {
		t.Errorf("-c aes192-cbc,aes256-ctr negotiated %s", negotiated(c))
	}
	c.Close()

	o.Ciphers = "aes192-cbc"
	_, err = NewDialer(o).Dial(context.Background(), "target")
	if he, ok := asError(err); !ok || !strings.Contains(he.Error(), `no supported cipher in "aes192-cbc"`) {
		t.Errorf("err = %v, want the unsupported cipher named", err)
	}
}

func TestPreferredCiphers(t *testing.T) {
	if got := preferredCiphers(true); !slices.Equal(got[:3], []string{"aes128-gcm@openssh.com", "aes256-gcm@openssh.com", "chacha20-poly1305@openssh.com"}) {
		t.Errorf("with AES hardware: %q", got)
	}
	if got := preferredCiphers(false); got[0] != "chacha20-poly1305@openssh.com" {
		t.Errorf("without AES hardware: %q", got)
	}
}

func TestConnectRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	_, err = NewDialer(Options{ConfigFile: "none", Port: port, BatchMode: true}).Dial(context.Background(), "127.0.0.1")
	he, ok := asError(err)
	if !ok || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("err = %v, want *Error wrapping ECONNREFUSED", err)
	}
	if want := fmt.Sprintf("connect to host 127.0.0.1:%d: connection refused", port); he.Error() != want {
		t.Errorf("error %q, want %q", he.Error(), want)
	}
}

// TestDialCancel: a server that never speaks does not hold Dial past its
// context, nor past ConnectTimeout.
func TestDialCancel(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = NewDialer(Options{ConfigFile: "none", Port: port}).Dial(ctx, "127.0.0.1")
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 3*time.Second {
		t.Errorf("err = %v after %v, want the context's deadline", err, time.Since(start))
	}

	start = time.Now()
	_, err = NewDialer(Options{ConfigFile: "none", Port: port, Options: []string{"ConnectTimeout=1"}}).Dial(context.Background(), "127.0.0.1")
	if !errors.Is(err, os.ErrDeadlineExceeded) || !strings.Contains(err.Error(), "timed out") || time.Since(start) > 3*time.Second {
		t.Errorf("err = %v after %v, want ConnectTimeout", err, time.Since(start))
	}
}

// sshtestEnv is a client configuration naming srv "target".
func sshtestEnv(t *testing.T, srv *sshtest.Server, lines ...string) *env {
	t.Helper()
	e := newEnv(t)
	e.writeKnownHosts(knownLine(fmt.Sprintf("[127.0.0.1]:%d", srv.Port), srv.HostKey.PublicKey()))
	block := fmt.Sprintf("Host target\n  HostName 127.0.0.1\n  Port %d\n  IdentityFile %s\n  StrictHostKeyChecking yes\n",
		srv.Port, srv.ClientKeyFile)
	for _, l := range lines {
		block += "  " + l + "\n"
	}
	e.writeConfig(block)
	return e
}

// TestDialRetriesDropped: 30 dials at once against a server that drops
// three connections at accept, as sshd's MaxStartups does, all succeed.
func TestDialRetriesDropped(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{DropFirst: 3})
	e := sshtestEnv(t, srv)
	d := NewDialer(e.options(nil))
	const n = 30
	errs := make(chan error, n)
	for range n {
		go func() {
			c, err := d.Dial(context.Background(), "target")
			if err == nil {
				c.Close()
			}
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Errorf("dial: %v", err)
		}
	}
	if got := srv.Connections(); got != n+3 {
		t.Errorf("the server accepted %d connections, want %d: 3 dropped and retried", got, n+3)
	}
	// The drop reads as EOF or as a reset, as the kernel has it.
	if log := e.logs.String(); !strings.Contains(log, "connection closed by the server before the key exchange: ") ||
		!strings.Contains(log, "; trying again in ") {
		t.Errorf("the retries are not in the -v log:\n%s", e.logs.String())
	}
}

// TestDialDroppedGivesUp: a server that drops every connection is tried
// until ConnectTimeout, then explained.
func TestDialDroppedGivesUp(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{DropFirst: 1 << 30})
	e := sshtestEnv(t, srv, "ConnectTimeout 2")
	start := time.Now()
	_, err := NewDialer(e.options(nil)).Dial(context.Background(), "target")
	took := time.Since(start)
	he, ok := asError(err)
	if !ok || !errors.Is(err, KindDropped) {
		t.Fatalf("err = %v, want KindDropped", err)
	}
	if took < 500*time.Millisecond || took > 3*time.Second {
		t.Errorf("gave up after %v, want within ConnectTimeout 2s", took)
	}
	if srv.Connections() < 3 {
		t.Errorf("tried %d times, want retries", srv.Connections())
	}
	want := fmt.Sprintf("handshake with 127.0.0.1:%d: connection closed by the server before the key exchange: ", srv.Port)
	if !strings.HasPrefix(he.Error(), want) || !strings.HasSuffix(he.Error(), " in 2s)") || !strings.Contains(he.Hint, "MaxStartups") || !strings.Contains(he.Hint, "--connections 1") {
		t.Errorf("error %q, hint %q", he.Error(), he.Hint)
	}
}

// TestDialDropRetryCancelled: cancelling ctx ends a dial waiting to retry.
func TestDialDropRetryCancelled(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{DropFirst: 1 << 30})
	e := sshtestEnv(t, srv, "ConnectTimeout 10")
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := NewDialer(e.options(nil)).Dial(ctx, "target")
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 2*time.Second {
		t.Errorf("err = %v after %v, want the context's deadline", err, time.Since(start))
	}
}

// silentListener accepts TCP connections and never says a word.
func silentListener(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestDialDefaultTimeout: with no ConnectTimeout configured, a server
// that accepts and never sends its banner still ends the dial, at hpncp's
// default.
func TestDialDefaultTimeout(t *testing.T) {
	defaultConnectTimeout = 500 * time.Millisecond
	t.Cleanup(func() { defaultConnectTimeout = DefaultConnectTimeout })
	port := silentListener(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	_, err := NewDialer(Options{ConfigFile: "none", Port: port}).Dial(ctx, "127.0.0.1")
	took := time.Since(start)
	if !errors.Is(err, KindUnreachable) || !errors.Is(err, os.ErrDeadlineExceeded) || took > 3*time.Second {
		t.Fatalf("err = %v after %v, want a timeout after 500ms", err, took)
	}
	if want := fmt.Sprintf("connect to host 127.0.0.1:%d: connection timed out during key exchange (ConnectTimeout 500ms)", port); !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error %q, want %q", err, want)
	}
}

// TestDialTimeoutCoversAuth: ConnectTimeout bounds authentication too
// when nobody is asked anything.
func TestDialTimeoutCoversAuth(t *testing.T) {
	srv := newTestServer(t, withAuthDelay(5*time.Second))
	e := authEnv(t, srv, "ConnectTimeout 1")
	start := time.Now()
	_, err := NewDialer(e.options(nil)).Dial(context.Background(), "target")
	if !errors.Is(err, KindUnreachable) || !strings.Contains(err.Error(), "timed out during authentication") || time.Since(start) > 3*time.Second {
		t.Errorf("err = %v after %v, want a timeout during authentication", err, time.Since(start))
	}
}

// TestErrorKinds: each failure is told by its Kind, not by its text.
func TestErrorKinds(t *testing.T) {
	dir := t.TempDir()
	pub := writeKey(t, dir, "id", "ed25519", false)
	writeKey(t, dir, "other", "ed25519", false)
	srv := newTestServer(t, withKeys(pub), withServerCiphers(ssh.CipherAES128CTR))

	unknownHost := newEnv(t)
	unknownHost.writeConfig(targetBlock("target", srv, "StrictHostKeyChecking yes", "IdentityFile "+filepath.Join(dir, "id")))
	wrongKey := authEnv(t, srv, "IdentityFile "+filepath.Join(dir, "other"), "IdentitiesOnly yes")
	noCipher := authEnv(t, srv, "IdentityFile "+filepath.Join(dir, "id"))
	good := authEnv(t, srv, "IdentityFile "+filepath.Join(dir, "id"))

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedPort := ln.Addr().(*net.TCPAddr).Port
	ln.Close()

	for _, tc := range []struct {
		name string
		o    Options
		host string
		want Kind
	}{
		{"unknown host key", unknownHost.options(nil), "target", KindHostKey},
		{"key refused", wrongKey.options(nil), "target", KindAuth},
		{"no common cipher", func() Options { o := noCipher.options(nil); o.Ciphers = ssh.CipherChaCha20Poly1305; return o }(), "target", KindNegotiation},
		{"port closed", Options{ConfigFile: "none", Port: closedPort, BatchMode: true}, "127.0.0.1", KindUnreachable},
		{"works", good.options(nil), "target", KindOther},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := NewDialer(tc.o).Dial(context.Background(), tc.host)
			if err == nil {
				c.Close()
			}
			if got := kindOf(err); got != tc.want || (tc.want == KindOther) != (err == nil) {
				t.Fatalf("err = %v, kind %v, want %v", err, got, tc.want)
			}
			if err != nil && !errors.Is(err, tc.want) {
				t.Errorf("errors.Is(%v, %v) is false", err, tc.want)
			}
		})
	}
}

// TestDialCancelledAfterReturnKeepsConnection: a caller that cancels the
// dial's context as soon as Dial returns (the pool does, for each
// connection it adds) keeps a working connection, even where the
// goroutine watching the context only runs after both the handshake's
// end and the cancellation (a loaded machine). Found as streams of a
// fault-free copy failing with "stream lost: EOF" while other copies
// loaded the machine: the watch saw both at once and closed the
// connection half the time.
func TestDialCancelledAfterReturnKeepsConnection(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{})
	e := sshtestEnv(t, srv)
	d := NewDialer(e.options(nil))
	release := make(chan struct{})
	hook := func() { <-release }
	testHookWatch.Store(&hook)
	t.Cleanup(func() { testHookWatch.Store(nil) })
	for i := range 16 {
		ctx, cancel := context.WithCancel(context.Background())
		c, err := d.Dial(ctx, "target")
		cancel()
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		// The watch runs now, with the handshake ended and ctx done.
		release <- struct{}{}
		time.Sleep(time.Millisecond)
		s, err := c.NewSession()
		if err != nil {
			t.Fatalf("dial %d: the connection was closed after Dial returned and its context was cancelled: %v", i, err)
		}
		s.Close()
		c.Close()
	}
}

// TestDialAuthGate: a dial with an AuthGate goes through its key
// exchange and then waits for the gate before authenticating (the pool's
// other connections wait for the first's authentication); a gate that
// fails ends the dial with its error. Connected is told of the TCP
// connection before the handshake.
func TestDialAuthGate(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{})
	e := sshtestEnv(t, srv)
	d := NewDialer(e.options(nil))

	gate := make(chan error, 1)
	var connected atomic.Int32
	done := make(chan error, 1)
	go func() {
		c, err := d.DialWith(context.Background(), "target", DialHooks{
			Connected: func(net.Conn) { connected.Add(1) },
			AuthGate: func(ctx context.Context) error {
				select {
				case err := <-gate:
					return err
				case <-ctx.Done():
					return ctx.Err()
				}
			},
		})
		if err == nil {
			c.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("the dial ended with its gate shut: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	if connected.Load() != 1 {
		t.Errorf("Connected was called %d times, want once", connected.Load())
	}
	gate <- nil
	if err := <-done; err != nil {
		t.Fatalf("the dial failed once its gate opened: %v", err)
	}

	refused := errors.New("the first connection was refused")
	go func() {
		_, err := d.DialWith(context.Background(), "target", DialHooks{AuthGate: func(context.Context) error { return refused }})
		done <- err
	}()
	if err := <-done; !errors.Is(err, refused) {
		t.Errorf("a failed gate: the dial returned %v, want the gate's error", err)
	}
}
