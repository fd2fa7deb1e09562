package sshconn

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pkg/sftp"

	"github.com/hpncp/hpncp/internal/faultnet"
	"github.com/hpncp/hpncp/internal/sshtest"
)

// stallProxy is a faultnet.StallProxy with its port: it forwards until
// stall is called, then neither reads nor writes but keeps every
// connection open, as a path whose router stopped forwarding.
type stallProxy struct {
	port  int
	stall func()
}

func newStallProxy(t *testing.T, target string) *stallProxy {
	t.Helper()
	p, err := faultnet.StallProxy(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	_, ps, _ := net.SplitHostPort(p.Addr)
	port, _ := strconv.Atoi(ps)
	return &stallProxy{port: port, stall: p.Fire}
}

// stallEnv is an SFTP server behind a stallProxy, and a client
// configuration naming it "target" with the given extra lines.
func stallEnv(t *testing.T, lines ...string) (*sshtest.Server, *stallProxy, *env) {
	t.Helper()
	srv := sshtest.Start(t, sshtest.Options{})
	proxy := newStallProxy(t, srv.Addr)
	e := newEnv(t)
	e.writeKnownHosts(knownLine(fmt.Sprintf("[127.0.0.1]:%d", proxy.port), srv.HostKey.PublicKey()))
	block := fmt.Sprintf("Host target\n  HostName 127.0.0.1\n  Port %d\n  IdentityFile %s\n  StrictHostKeyChecking yes\n",
		proxy.port, srv.ClientKeyFile)
	for _, l := range lines {
		block += "  " + l + "\n"
	}
	e.writeConfig(block)
	return srv, proxy, e
}

// TestStalledCopyFails: an upload whose path stops forwarding, with the
// writes blocked on a full TCP window, fails after ServerAliveInterval ×
// (ServerAliveCountMax+1) with an error naming the host, as ssh gives up.
func TestStalledCopyFails(t *testing.T) {
	_, proxy, e := stallEnv(t, "ServerAliveInterval 1", "ServerAliveCountMax 2")
	c, err := NewDialer(e.options(nil)).Dial(context.Background(), "target")
	if err != nil {
		t.Fatalf("%v\n%s", err, e.logs.String())
	}
	defer c.Close()
	sc, err := sftp.NewClient(c.Client)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	f, err := sc.Create("big")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	written := 0
	failed := make(chan error, 1)
	go func() {
		buf := make([]byte, 64<<10)
		for {
			n, err := f.Write(buf)
			mu.Lock()
			written += n
			mu.Unlock()
			if err != nil {
				failed <- err
				return
			}
		}
	}()
	waitFor(t, "the upload to get going", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return written >= 4<<20
	})
	proxy.stall()
	start := time.Now()
	select {
	case err := <-failed:
		took := time.Since(start)
		if took < 2*time.Second || took > 4500*time.Millisecond {
			t.Errorf("the stalled upload failed after %v (%v), want about 3s", took, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stalled upload has not failed after 10s")
	}
	werr := c.Wait()
	want := "connection to target: server not responding (no reply to 2 keepalives at 1s intervals)"
	if !errors.Is(werr, KindNotResponding) || werr.Error() != want {
		t.Errorf("Wait() = %v, want %q as KindNotResponding", werr, want)
	}
	if nr := c.NotResponding(); nr == nil || nr.Error() != want {
		t.Errorf("NotResponding() = %v, want %q", nr, want)
	}
}

// TestKeepaliveDefault: with no ServerAliveInterval configured, a silent
// server is still given up, at hpncp's default interval.
func TestKeepaliveDefault(t *testing.T) {
	defaultAliveInterval = 100 * time.Millisecond
	t.Cleanup(func() { defaultAliveInterval = DefaultServerAliveInterval })
	srv := newTestServer(t, withSilentKeepalive())
	e := authEnv(t, srv)
	c, err := NewDialer(e.options(nil)).Dial(context.Background(), "target")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	select {
	case err := <-done:
		// ServerAliveCountMax is 3 by default: 4 intervals of silence.
		if took := time.Since(start); took < 300*time.Millisecond {
			t.Errorf("gave the server up after %v, want 400ms", took)
		}
		if !errors.Is(err, KindNotResponding) || !strings.Contains(err.Error(), "no reply to 3 keepalives at 100ms intervals") {
			t.Errorf("Wait() = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a silent server's connection is still open 5s after the dial")
	}
}

// TestKeepaliveAnswered: a server that answers keepalives keeps its
// connection, and one that stays silent loses it.
func TestKeepaliveAnswered(t *testing.T) {
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
			go c.keepalive(c.transport, 20*time.Millisecond, 3, e.logs.f)
			closed := make(chan error, 1)
			go func() { closed <- c.Wait() }()
			select {
			case err := <-closed:
				if !silent {
					t.Fatalf("keepalive closed a connection whose server answers: %v", err)
				}
				if !errors.Is(err, KindNotResponding) {
					t.Errorf("Wait() = %v, want KindNotResponding", err)
				}
				if !strings.Contains(e.logs.String(), "Timeout, server target not responding.") {
					t.Errorf("log = %q", e.logs.String())
				}
			case <-time.After(500 * time.Millisecond):
				if silent {
					t.Fatal("keepalive did not close a connection whose server is silent")
				}
				if c.NotResponding() != nil {
					t.Errorf("NotResponding() = %v on a live connection", c.NotResponding())
				}
			}
		})
	}
}

// TestServerAliveCountMaxZero: ServerAliveCountMax 0 gives the server up
// after one interval of silence, sending no keepalive, as ssh does.
func TestServerAliveCountMaxZero(t *testing.T) {
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
	case err := <-done:
		if want := "connection to target: server not responding (nothing received for 1s)"; err == nil || err.Error() != want {
			t.Errorf("Wait() = %v, want %q", err, want)
		}
	case <-time.After(4 * time.Second):
		t.Fatal("ServerAliveInterval 1 with a silent server did not close the connection")
	}
}

// TestCloseStopsKeepalive: closing a connection ends it as a close, not
// as a server that stopped responding.
func TestCloseStopsKeepalive(t *testing.T) {
	srv := newTestServer(t, withSilentKeepalive())
	e := authEnv(t, srv, "ServerAliveInterval 1", "ServerAliveCountMax 0")
	c, err := NewDialer(e.options(nil)).Dial(context.Background(), "target")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	if err := c.NotResponding(); err != nil {
		t.Errorf("NotResponding() = %v after Close", err)
	}
	if errors.Is(c.Wait(), KindNotResponding) {
		t.Errorf("Wait() = %v after Close", c.Wait())
	}
}

// TestAliveInterval: the keepalive interval is ServerAliveInterval when
// the user set one, and hpncp's default when ssh would send none, or only
// its batch-mode 300 s.
func TestAliveInterval(t *testing.T) {
	for _, tc := range []struct {
		lines []string
		want  time.Duration
	}{
		{nil, DefaultServerAliveInterval},
		{[]string{"ServerAliveInterval 0"}, DefaultServerAliveInterval},
		{[]string{"BatchMode yes"}, DefaultServerAliveInterval},
		{[]string{"ServerAliveInterval 5"}, 5 * time.Second},
		{[]string{"BatchMode yes", "ServerAliveInterval 7"}, 7 * time.Second},
	} {
		srv := newTestServer(t)
		e := authEnv(t, srv, tc.lines...)
		cfg, err := Resolve(context.Background(), "target", e.options(nil))
		if err != nil {
			t.Fatal(err)
		}
		if got := aliveInterval(cfg); got != tc.want {
			t.Errorf("%q: keepalive interval %v (ServerAliveInterval %v), want %v", tc.lines, got, cfg.ServerAliveInterval, tc.want)
		}
	}
}

// TestQuickAckOnlyAtStart checks that the transport asks for immediate
// ACKs after its reads and writes while the start's first bytes come in,
// and not once the start's budget has been read: the bulk of a copy
// keeps delayed ACKs.
func TestQuickAckOnlyAtStart(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	calls := 0
	tr := newTransport(a, a)
	tr.quick = func() { calls++ }
	go func() {
		buf := make([]byte, 4096)
		for {
			if _, err := b.Read(buf); err != nil {
				return
			}
		}
	}()
	go func() {
		chunk := make([]byte, 4096)
		for range 2 * quickStart / len(chunk) {
			if _, err := b.Write(chunk); err != nil {
				return
			}
		}
	}()
	if _, err := tr.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if calls != 1 {
		t.Fatalf("after a write at the start: %d quick-ACK calls, want 1", calls)
	}
	buf := make([]byte, 4096)
	read := 0
	for read < quickStart {
		n, err := tr.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		read += n
	}
	atStart := calls
	if atStart < 2 {
		t.Fatalf("reads of the start's %d bytes made %d quick-ACK calls", read, atStart-1)
	}
	for read < 2*quickStart {
		n, err := tr.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		read += n
	}
	if _, err := tr.Write([]byte("bulk")); err != nil {
		t.Fatal(err)
	}
	if calls != atStart {
		t.Fatalf("%d quick-ACK calls after the start's budget was read", calls-atStart)
	}
}
