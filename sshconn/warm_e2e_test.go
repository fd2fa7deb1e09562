//go:build linux

package sshconn

import (
	"context"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/hpncp/hpncp/internal/sshdtest"
)

// TestWarmAgainstOpenSSH pads a connection to a real sshd, which ignores
// the requests, and the connection works on: a command runs on it after,
// and sshd's log has no complaint.
func TestWarmAgainstOpenSSH(t *testing.T) {
	srv := sshdtest.Start(t, sshdtest.Options{})
	tcp, err := net.Dial("tcp", srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	sc, chans, reqs, err := ssh.NewClientConn(tcp, srv.Addr(), srv.ClientConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	c := &Client{Client: ssh.NewClient(sc, chans, reqs), Transport: tcp, done: make(chan struct{})}
	defer c.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if r, ok := c.Warm(ctx, 2*time.Second); !ok || r.StoppedFor != "short path" || r.Padding != 0 {
		t.Fatalf("loopback warmed: %s (ok %v), want left alone as a short path", r, ok)
	}
	// Warmed all the same, as a long path would be.
	r, ok := c.warm(ctx, 2*time.Second, 0)
	if !ok {
		t.Fatal("no TCP_INFO on a loopback connection")
	}
	t.Logf("warmed: %s", r)
	if r.Padding == 0 {
		t.Fatalf("no padding sent: %s", r)
	}
	// On loopback the window grows at once, or is never filled: a
	// bound, not the clock or the connection, ends it.
	switch r.StoppedFor {
	case "window grown", "padding spent", "window not growing", "slow start ended":
	default:
		t.Errorf("stopped for %q", r.StoppedFor)
	}
	if r.Padding > warmBudget {
		t.Errorf("%d bytes of padding, more than %d", r.Padding, warmBudget)
	}
	s, err := c.NewSession()
	if err != nil {
		t.Fatalf("a session after the padding: %v", err)
	}
	out, err := s.Output("echo still here")
	if err != nil || strings.TrimSpace(string(out)) != "still here" {
		t.Fatalf("a command after the padding: %q, %v", out, err)
	}
	log, _ := os.ReadFile(srv.LogFile)
	if strings.Contains(string(log), warmRequestName) && !strings.Contains(string(log), "debug") {
		t.Errorf("sshd logged the padding:\n%s", log)
	}
}
