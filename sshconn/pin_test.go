package sshconn

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// splitServer listens on 127.0.0.1 and hands its first connection to the
// server `first` and every later one to `rest`: a host whose pool
// connections a man in the middle answers from the second one on.
// It returns the port.
func splitServer(t *testing.T, first, rest *testServer) int {
	return splitServerHeld(t, first, rest, nil)
}

// splitServerHeld is splitServer whose first server starts its handshake
// once hold is closed (nil: at once).
func splitServerHeld(t *testing.T, first, rest *testServer, hold <-chan struct{}) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for n := 0; ; n++ {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			if n == 0 {
				go func() {
					if hold != nil {
						<-hold
					}
					first.handle(nc)
				}()
			} else {
				go rest.handle(nc)
			}
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

func newECDSASigner(t *testing.T) ssh.Signer {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// meetAtHostKey makes the next n host key checks wait for each other
// before any of them decides, as dials whose key exchanges end at the
// same moment: each has read known_hosts before any has written it.
func meetAtHostKey(t *testing.T, n int) {
	t.Helper()
	var arrived atomic.Int32
	all := make(chan struct{})
	hook := func() {
		if arrived.Add(1) == int32(n) {
			close(all)
		}
		select {
		case <-all:
		case <-time.After(10 * time.Second):
			t.Errorf("only %d of %d dials reached the host key check", arrived.Load(), n)
		}
	}
	testHookHostKey.Store(&hook)
	t.Cleanup(func() { testHookHostKey.Store(nil) })
}

// dialBoth dials target twice through d, one after the other or both at
// once, and returns the two errors, closing what connected.
func dialBoth(t *testing.T, d *Dialer, concurrent bool) [2]error {
	t.Helper()
	var errs [2]error
	dial := func(i int) {
		c, err := d.Dial(context.Background(), "target")
		if err == nil {
			c.Close()
		}
		errs[i] = err
	}
	if !concurrent {
		dial(0)
		dial(1)
		return errs
	}
	meetAtHostKey(t, 2)
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dial(i)
		}()
	}
	wg.Wait()
	return errs
}

// knownHostsLines is the file's lines, none for a missing file.
func knownHostsLines(t *testing.T, file string) []string {
	t.Helper()
	data, err := os.ReadFile(file)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(string(data), "\n") {
		if l != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

// checkPinRefusal checks that err is a host key refusal naming key.
func checkPinRefusal(t *testing.T, err error, key ssh.PublicKey) {
	t.Helper()
	if err == nil {
		t.Fatal("a connection presenting another host key was accepted")
	}
	if kindOf(err) != KindHostKey {
		t.Errorf("error %v: kind %v, want KindHostKey", err, kindOf(err))
	}
	for _, s := range []string{"host key verification failed", ssh.FingerprintSHA256(key)} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q lacks %q", err, s)
		}
	}
}

// TestPoolPinsFirstHostKey: of the connections one Dialer makes to an
// unknown host, only the first learns its key; one answered with another
// key, of the same type or not, is refused and its key never written,
// whether it comes after the first or at the same moment.
func TestPoolPinsFirstHostKey(t *testing.T) {
	for _, strict := range []string{"accept-new", "no", "ask"} {
		for _, otherType := range []string{"ed25519", "ecdsa"} {
			for _, order := range []string{"sequential", "concurrent"} {
				t.Run(strict+"/"+otherType+"/"+order, func(t *testing.T) {
					a := newTestServer(t)
					mitmKey := newSigner(t)
					if otherType == "ecdsa" {
						mitmKey = newECDSASigner(t)
					}
					b := newTestServer(t, withHostKey(mitmKey))
					port := splitServer(t, a, b)
					display := fmt.Sprintf("[127.0.0.1]:%d", port)
					e := newEnv(t)
					e.writeConfig(fmt.Sprintf("Host target\n  HostName 127.0.0.1\n  Port %d\n  StrictHostKeyChecking %s\n", port, strict))
					p := &fakePrompter{lines: []string{"yes", "yes"}}
					d := NewDialer(e.options(p))

					errs := dialBoth(t, d, order == "concurrent")

					// Sequential, the first is A's; at once, either may
					// have been decided first, and known_hosts says which.
					won, lost := a.hostKey.PublicKey(), mitmKey.PublicKey()
					known := knownHostsLines(t, e.knownHosts)
					if order == "concurrent" && len(known) == 1 && known[0] == knownLine(display, lost) {
						won, lost = lost, won
					}
					if order == "concurrent" && errs[0] != nil && errs[1] == nil {
						errs[0], errs[1] = errs[1], errs[0]
					}
					if errs[0] != nil {
						t.Fatalf("first connection: %v\nlog:\n%s", errs[0], e.logs.String())
					}
					checkPinRefusal(t, errs[1], lost)
					if w := e.warnings.String(); !strings.Contains(w, "HOST KEY DIFFERS BETWEEN CONNECTIONS") || !strings.Contains(w, ssh.FingerprintSHA256(lost)) {
						t.Errorf("no warning names the refused key:\n%s", w)
					}
					if want := []string{knownLine(display, won)}; strings.Join(known, "\n") != strings.Join(want, "\n") {
						t.Errorf("known_hosts = %q, want %q", known, want)
					}
					if strict == "ask" && len(p.prompts()) != 1 {
						t.Errorf("asked %d times, want once: %q", len(p.prompts()), p.prompts())
					}
				})
			}
		}
	}
}

// TestPoolPinsKnownHostKey: a host known_hosts already vouches for, by a
// plain key or a CA, pins the key its first connection presented: a later
// connection answered with a key of a type known_hosts does not list (which
// StrictHostKeyChecking accept-new or no would learn on a first contact) or
// with a changed key under no is refused, and known_hosts stays as it was.
func TestPoolPinsKnownHostKey(t *testing.T) {
	ca := newSigner(t)
	oldKey := newSigner(t)
	cases := []struct {
		name   string
		strict string
		// first is the server of the first connection; known its
		// known_hosts lines.
		first func(t *testing.T) *testServer
		known func(display string, first *testServer) []string
		mitm  func(t *testing.T) ssh.Signer
	}{
		{"known ed25519, ecdsa offered", "accept-new",
			func(t *testing.T) *testServer { return newTestServer(t) },
			func(d string, s *testServer) []string { return []string{knownLine(d, s.hostKey.PublicKey())} },
			newECDSASigner},
		{"cert-authority, plain key offered", "accept-new",
			func(t *testing.T) *testServer { return newTestServer(t, withHostCert(ca, "127.0.0.1")) },
			func(d string, _ *testServer) []string {
				return []string{knownLine("@cert-authority "+d, ca.PublicKey())}
			},
			newSigner},
		{"changed, another changed key", "no",
			func(t *testing.T) *testServer { return newTestServer(t) },
			func(d string, _ *testServer) []string { return []string{knownLine(d, oldKey.PublicKey())} },
			newSigner},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := tc.first(t)
			mitmKey := tc.mitm(t)
			b := newTestServer(t, withHostKey(mitmKey))
			port := splitServer(t, a, b)
			e := newEnv(t)
			e.writeKnownHosts(tc.known(fmt.Sprintf("[127.0.0.1]:%d", port), a)...)
			e.writeConfig(fmt.Sprintf("Host target\n  HostName 127.0.0.1\n  Port %d\n  StrictHostKeyChecking %s\n", port, tc.strict))
			before, _ := os.ReadFile(e.knownHosts)
			d := NewDialer(e.options(nil))

			errs := dialBoth(t, d, false)
			if errs[0] != nil {
				t.Fatalf("first connection: %v\nlog:\n%s", errs[0], e.logs.String())
			}
			checkPinRefusal(t, errs[1], mitmKey.PublicKey())
			if after, _ := os.ReadFile(e.knownHosts); string(after) != string(before) {
				t.Errorf("known_hosts changed:\n%s", after)
			}
		})
	}
}

// TestPinnedKeyRevoked: a key the first connection learned is still
// checked against known_hosts by the next: revoked meanwhile, it is
// refused.
func TestPinnedKeyRevoked(t *testing.T) {
	srv := newTestServer(t)
	e := newEnv(t)
	e.writeConfig(targetBlock("target", srv, "StrictHostKeyChecking accept-new"))
	d := NewDialer(e.options(nil))
	c, err := d.Dial(context.Background(), "target")
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	e.writeKnownHosts(knownLine("@revoked *", srv.hostKey.PublicKey()))
	_, err = d.Dial(context.Background(), "target")
	if err == nil || kindOf(err) != KindHostKey || !strings.Contains(err.Error(), "revoked") {
		t.Fatalf("err = %v, want the revoked key refused", err)
	}
}

// TestPinnedKeyNoKnownHostsFile: with UserKnownHostsFile /dev/null, as
// often beside StrictHostKeyChecking no, nothing is learned on disk; the
// Dialer still holds later connections to the first one's key.
func TestPinnedKeyNoKnownHostsFile(t *testing.T) {
	for _, strict := range []string{"no", "accept-new"} {
		t.Run(strict, func(t *testing.T) {
			a := newTestServer(t)
			b := newTestServer(t)
			port := splitServer(t, a, b)
			e := newEnv(t)
			e.knownHosts = "/dev/null"
			e.writeConfig(fmt.Sprintf("Host target\n  HostName 127.0.0.1\n  Port %d\n  StrictHostKeyChecking %s\n", port, strict))
			d := NewDialer(e.options(nil))
			errs := dialBoth(t, d, false)
			if errs[0] != nil {
				t.Fatal(errs[0])
			}
			checkPinRefusal(t, errs[1], b.hostKey.PublicKey())
		})
	}
}

// slowPrompter answers yes to the host key question once wait is over, as
// a user reading the fingerprint.
type slowPrompter struct {
	fakePrompter
	wait <-chan time.Time
}

func (p *slowPrompter) ReadLine(prompt string) (string, error) {
	<-p.wait
	return p.fakePrompter.ReadLine(prompt)
}

// TestPinWaitIsNotTimed: a dial waiting for the verdict of one whose user
// is still reading the host key question is not cut by ConnectTimeout.
func TestPinWaitIsNotTimed(t *testing.T) {
	defaultConnectTimeout = 300 * time.Millisecond
	t.Cleanup(func() { defaultConnectTimeout = DefaultConnectTimeout })
	srv := newTestServer(t)
	e := newEnv(t)
	e.writeConfig(targetBlock("target", srv, "StrictHostKeyChecking ask"))
	p := &slowPrompter{fakePrompter: fakePrompter{lines: []string{"yes"}}, wait: time.After(3 * defaultConnectTimeout)}
	errs := dialBoth(t, NewDialer(e.options(p)), true)
	for _, err := range errs {
		if err != nil {
			t.Errorf("dial: %v", err)
		}
	}
	if n := len(p.prompts()); n != 1 {
		t.Errorf("asked %d times, want once", n)
	}
}

// TestDeclinedKeyAskedOnce: the user who said no to a host's key is not
// asked again by the pool's other connections, sequential or at once.
func TestDeclinedKeyAskedOnce(t *testing.T) {
	for _, order := range []string{"sequential", "concurrent"} {
		t.Run(order, func(t *testing.T) {
			srv := newTestServer(t)
			e := newEnv(t)
			e.writeConfig(targetBlock("target", srv, "StrictHostKeyChecking ask"))
			p := &fakePrompter{lines: []string{"no", "yes"}}
			errs := dialBoth(t, NewDialer(e.options(p)), order == "concurrent")
			for _, err := range errs {
				if err == nil || kindOf(err) != KindHostKey {
					t.Errorf("err = %v, want the host key refused", err)
				}
			}
			if n := len(p.prompts()); n != 1 {
				t.Errorf("asked %d times, want once: %q", n, p.prompts())
			}
			if lines := knownHostsLines(t, e.knownHosts); len(lines) != 0 {
				t.Errorf("known_hosts = %q", lines)
			}
		})
	}
}

// TestFirstConnectedDecides: the dial connected first decides on the
// host's key even when a later one's key exchange ends before its own, as
// a man in the middle nearer than the host would make it: the later one
// waits for the verdict and is refused.
func TestFirstConnectedDecides(t *testing.T) {
	a, b := newTestServer(t), newTestServer(t)
	hold := make(chan struct{})
	port := splitServerHeld(t, a, b, hold)
	e := newEnv(t)
	e.writeConfig(fmt.Sprintf("Host target\n  HostName 127.0.0.1\n  Port %d\n  StrictHostKeyChecking accept-new\n", port))
	d := NewDialer(e.options(nil))

	// The first host key check to start is the second dial's, the first
	// server's handshake being held: let the first server go then.
	var once sync.Once
	hook := func() { once.Do(func() { close(hold) }) }
	testHookHostKey.Store(&hook)
	t.Cleanup(func() { testHookHostKey.Store(nil) })

	second := make(chan error, 1)
	c, err := d.DialWith(context.Background(), "target", DialHooks{Connected: func(net.Conn) {
		// As a pool starts its other connections.
		go func() {
			c, err := d.Dial(context.Background(), "target")
			if err == nil {
				c.Close()
			}
			second <- err
		}()
	}})
	if err != nil {
		t.Fatalf("the first dial: %v", err)
	}
	c.Close()
	checkPinRefusal(t, <-second, b.hostKey.PublicKey())
	display := fmt.Sprintf("[127.0.0.1]:%d", port)
	if got, want := knownHostsLines(t, e.knownHosts), []string{knownLine(display, a.hostKey.PublicKey())}; strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("known_hosts = %q, want %q", got, want)
	}
}
