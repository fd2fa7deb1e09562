package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/hpncp/hpncp/ends"
	"github.com/hpncp/hpncp/internal/faultnet"
	"github.com/hpncp/hpncp/internal/sshtest"
)

// TestStalledPathReported: a path that stops forwarding in the middle of
// an upload ends the copy within the keepalive and connect bounds, with
// an error that names the host and says it stopped responding.
func TestStalledPathReported(t *testing.T) {
	slow(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var stderr bytes.Buffer
	// Four connections wanted, so that some are being dialed, or their
	// sessions opened, as the path stalls.
	done, dst := stalledCopy(t, ctx, &stderr, "-o", "ServerAliveInterval=1", "-o", "ServerAliveCountMax=1", "-o", "ConnectTimeout=2",
		"--connections", "4", "--streams", "8")
	start := time.Now()
	var err error
	select {
	case err = <-done:
	case <-time.After(40 * time.Second):
		t.Fatal("the copy has not ended 40s after its path stalled")
	}
	// 2 s of silence, and a path that stopped answering is not dialed
	// again (2 s more); without the keepalive the copy would wait for
	// its 60 s context. The bound is between, with room for a loaded
	// machine.
	if took := time.Since(start); took > 15*time.Second {
		t.Errorf("the copy ended %v after the stall, want within 15s", took)
	}
	code := reportError(&stderr, err)
	want := "hpncp: error: connection to stalled: server not responding (no reply to 1 keepalive at 1s intervals)"
	if code != exitConnection || !strings.Contains(stderr.String(), want) {
		t.Errorf("exit %d, stderr:\n%s\nwant the line %q", code, stderr.String(), want)
	}
	if _, serr := os.Stat(dst); serr == nil {
		t.Error("a failed copy left a file under the final name")
	}
}

// stalledCopy starts an upload of 64 MiB through a proxy with the extra
// hpncp arguments and stalls the proxy once the temporary file passed
// 4 MiB; it returns the copy's result channel and the target's path.
func stalledCopy(t *testing.T, ctx context.Context, stderr io.Writer, extra ...string) (<-chan error, string) {
	t.Helper()
	srv := sshtest.Start(t, sshtest.Options{})
	port, stall := stallingProxy(t, srv.Addr)
	work := t.TempDir()
	cfg := filepath.Join(work, "ssh_config")
	known := filepath.Join(work, "known_hosts")
	if err := os.WriteFile(known, []byte(fmt.Sprintf("[127.0.0.1]:%d %s", port, ssh.MarshalAuthorizedKey(srv.HostKey.PublicKey()))), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("Host stalled\n  HostName 127.0.0.1\n  Port %d\n  IdentityFile %s\n"+
		"  UserKnownHostsFile %s\n  GlobalKnownHostsFile /dev/null\n  StrictHostKeyChecking yes\n  BatchMode yes\n",
		port, srv.ClientKeyFile, known)), 0o600); err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(work, "big")
	if err := writeNoise(src, 64<<20); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(work, "copy")
	done := make(chan error, 1)
	args := append([]string{"hpncp", "-F", cfg, "-q", "-l", "80000"}, extra...)
	go func() { done <- run(ctx, append(args, src, "stalled:"+dst), nil, io.Discard, stderr) }()
	for stalled := false; !stalled; {
		select {
		case err := <-done:
			t.Fatalf("the copy ended before the path stalled: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
		matches, _ := filepath.Glob(filepath.Join(work, ".hpncp.copy.*.part"))
		for _, m := range matches {
			if fi, err := os.Stat(m); err == nil && fi.Size() > 4<<20 {
				stall()
				stalled = true
			}
		}
	}
	return done, dst
}

// TestInterruptOnStalledPath: an interrupt ends a copy whose path stalled
// within the clean-up's grace, though no keepalive would end it for a
// minute: the connections are closed under the clean-up.
func TestInterruptOnStalledPath(t *testing.T) {
	slow(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done, dst := stalledCopy(t, ctx, io.Discard, "-o", "ServerAliveInterval=60")
	time.Sleep(200 * time.Millisecond)
	cancel()
	start := time.Now()
	select {
	case err := <-done:
		if code := reportError(io.Discard, err); code != exitInterrupted {
			t.Errorf("exit %d (%v), want %d", code, err, exitInterrupted)
		}
	case <-time.After(ends.AbortGrace + 30*time.Second):
		t.Fatalf("the copy has not ended %v after the interrupt", ends.AbortGrace+30*time.Second)
	}
	// Without the abort it would wait for the keepalive, a minute; the
	// bound leaves a loaded machine room past the grace.
	if took := time.Since(start); took > ends.AbortGrace+15*time.Second {
		t.Errorf("the interrupted copy took %v to end, want within %v", took, ends.AbortGrace+15*time.Second)
	}
	if _, serr := os.Stat(dst); serr == nil {
		t.Error("an interrupted copy left a file under the final name")
	}
}

// stallingProxy forwards TCP connections on 127.0.0.1 to target until
// stall is called; then it neither reads nor writes but keeps the
// connections open, new ones too, as a router that stopped forwarding.
func stallingProxy(t *testing.T, target string) (port int, stall func()) {
	t.Helper()
	p, err := faultnet.StallProxy(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	_, ps, _ := net.SplitHostPort(p.Addr)
	port, _ = strconv.Atoi(ps)
	return port, p.Fire
}
