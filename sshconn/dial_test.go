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
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
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

func TestKeepalive(t *testing.T) {
	for _, silent := range []bool{false, true} {
		t.Run(fmt.Sprintf("silent=%v", silent), func(t *testing.T) {
			var opts []serverOption
			if silent {
				opts = append(opts, withSilentKeepalive())
			}
			srv := newTestServer(t, opts...)
			e := authEnv(t, srv)
			c, err := NewDialer(e.options(nil)).Dial(context.Background(), "target")
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			go c.keepalive(20*time.Millisecond, 3, e.warnings.f)
			closed := make(chan struct{})
			go func() {
				c.Wait()
				close(closed)
			}()
			select {
			case <-closed:
				if !silent {
					t.Fatal("keepalive closed a connection whose server answers")
				}
				if !strings.Contains(e.warnings.String(), "Timeout, server target not responding.") {
					t.Errorf("warnings = %q", e.warnings.String())
				}
			case <-time.After(500 * time.Millisecond):
				if silent {
					t.Fatal("keepalive did not close a connection whose server is silent")
				}
			}
		})
	}
}

// TestServerAliveIntervalStartsKeepalive: the configured interval runs
// keepalives, and Close stops them.
func TestServerAliveIntervalStartsKeepalive(t *testing.T) {
	srv := newTestServer(t, withSilentKeepalive())
	e := authEnv(t, srv, "ServerAliveInterval 1", "ServerAliveCountMax 0")
	c, err := NewDialer(e.options(nil)).Dial(context.Background(), "target")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	select {
	case <-done:
	case <-time.After(4 * time.Second):
		t.Fatal("ServerAliveInterval 1 with a silent server did not close the connection")
	}
}
