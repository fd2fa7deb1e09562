package ends

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hpncp/hpncp/internal/sshtest"
	"github.com/hpncp/hpncp/protocol"
	"github.com/hpncp/hpncp/sshconn"
	"github.com/hpncp/hpncp/transfer"
)

func TestRemotePath(t *testing.T) {
	for in, want := range map[string]string{
		"~":       ".",
		"~/":      ".",
		"~//":     ".",
		"~/x":     "x",
		"~//x/y":  "x/y",
		"/abs":    "/abs",
		"rel/x":   "rel/x",
		"~user/x": "~user/x", // another user's home is the server's to resolve
		"":        "",
	} {
		if got := RemotePath(in); got != want {
			t.Errorf("RemotePath(%q) = %q, want %q", in, got, want)
		}
	}
}

// connOptions reaches srv as "testhost" without prompting.
func connOptions(srv *sshtest.Server) sshconn.Options {
	return sshconn.Options{ConfigFile: srv.ConfigFile, BatchMode: true}
}

func remote(path string) transfer.Location {
	return transfer.Location{Host: "testhost", Path: path}
}

// scratch writes a file of n bytes and returns its path and content.
func scratch(t *testing.T, n int) (string, []byte) {
	t.Helper()
	b := bytes.Repeat([]byte("hpncp ends\n"), n/11+1)[:n]
	p := filepath.Join(t.TempDir(), "src.bin")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p, b
}

func TestOpenSFTP(t *testing.T) {
	state := t.TempDir()
	t.Setenv("XDG_STATE_HOME", state)
	srv := sshtest.Start(t, sshtest.Options{})
	src, want := scratch(t, 300<<10)

	h := New(Options{SSH: connOptions(srv)})
	defer h.Close()
	run, err := h.Open(t.Context(), []transfer.Location{{Path: src}, remote("~/up.bin")},
		transfer.Options{Tar: transfer.TarOptions{Mode: transfer.TarAuto}})
	if err != nil {
		t.Fatal(err)
	}
	if run.Legacy {
		t.Error("a host with SFTP was given the legacy scp protocol")
	}
	if run.Options.Tar.Mode != transfer.TarAuto {
		t.Errorf("tar mode %v over SFTP, want TarAuto kept", run.Options.Tar.Mode)
	}
	if !strings.HasPrefix(run.Options.ResumeDir, state) {
		t.Errorf("resume journal in %q, want it under XDG_STATE_HOME %s", run.Options.ResumeDir, state)
	}
	res, err := run.Copy(t.Context())
	if err != nil || len(res.Errors) > 0 || res.Files != 1 {
		t.Fatalf("copy: %v, result %+v", err, res)
	}
	// "~/" is the remote home, where the SFTP server starts.
	got, err := os.ReadFile(filepath.Join(srv.Root, "up.bin"))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("uploaded file: %d bytes, %v; want the %d source bytes", len(got), err, len(want))
	}
	if lost := h.Lost(); lost != nil {
		t.Errorf("Lost after a good copy: %v", lost)
	}
	// One destination, one set of connections: a second end to the same
	// host dials nothing new.
	n := srv.Connections()
	if _, err := h.Endpoint(t.Context(), remote("other")); err != nil {
		t.Fatal(err)
	}
	if srv.Connections() != n {
		t.Errorf("a second end on the same host dialed again: %d connections, want %d", srv.Connections(), n)
	}
}

func TestOpenRefusesBeforeDialing(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{})
	src, _ := scratch(t, 10)
	for name, tc := range map[string]struct {
		legacy bool
		o      transfer.Options
		want   string
	}{
		"-O --verify": {true, transfer.Options{Verify: true}, "legacy scp protocol (-O)"},
		"-O --tar":    {true, transfer.Options{Recursive: true, Tar: transfer.TarOptions{Mode: transfer.TarForce}}, "--tar does not work with the legacy"},
	} {
		t.Run(name, func(t *testing.T) {
			h := New(Options{SSH: connOptions(srv), Legacy: tc.legacy})
			defer h.Close()
			before := srv.Connections()
			_, err := h.Open(t.Context(), []transfer.Location{{Path: src}, remote("x")}, tc.o)
			var oe *transfer.OptionError
			if !errors.As(err, &oe) || !strings.Contains(oe.Msg, tc.want) || oe.Hint == "" {
				t.Fatalf("Open: %v, want an OptionError with a hint saying %q", err, tc.want)
			}
			if srv.Connections() != before {
				t.Errorf("Open refused the options after dialing %d connection(s)", srv.Connections()-before)
			}
		})
	}
}

func TestOpenResumeNeedsJournal(t *testing.T) {
	// No directory for the journal: XDG_STATE_HOME unset and no home.
	t.Setenv("XDG_STATE_HOME", "")
	t.Setenv("HOME", "")
	if _, err := transfer.ResumeDir(); err == nil {
		t.Skip("this system has a resume journal directory without HOME or XDG_STATE_HOME")
	}
	src, _ := scratch(t, 10)
	dst := filepath.Join(t.TempDir(), "dst")
	h := New(Options{})
	defer h.Close()
	_, err := h.Open(t.Context(), []transfer.Location{{Path: src}, {Path: dst}}, transfer.Options{Resume: true})
	var oe *transfer.OptionError
	if !errors.As(err, &oe) || !strings.HasPrefix(oe.Msg, "--resume: ") || !strings.Contains(oe.Hint, "XDG_STATE_HOME") {
		t.Fatalf("Open --resume without a journal directory: %v, want an OptionError naming --resume and XDG_STATE_HOME", err)
	}
	// Without --resume the journal is optional: the copy goes on.
	run, err := h.Open(t.Context(), []transfer.Location{{Path: src}, {Path: dst}}, transfer.Options{})
	if err != nil {
		t.Fatalf("Open without --resume and without a journal directory: %v", err)
	}
	if run.Options.ResumeDir != "" {
		t.Errorf("ResumeDir %q, want none", run.Options.ResumeDir)
	}
}

func TestOpenFallsBackToSCP(t *testing.T) {
	if _, err := exec.LookPath("scp"); err != nil {
		t.Skip("needs OpenSSH scp on the server side")
	}
	srv := sshtest.Start(t, sshtest.Options{NoSFTP: true, Exec: sshtest.ShellExec(t.TempDir())})
	src, want := scratch(t, 100<<10)
	dst := filepath.Join(t.TempDir(), "up.bin")
	var log []string
	var mu sync.Mutex
	co := connOptions(srv)
	co.Logf = func(f string, a ...any) {
		mu.Lock()
		defer mu.Unlock()
		log = append(log, fmt.Sprintf(f, a...))
	}

	// What the legacy protocol cannot do is refused once the host is
	// known to have no SFTP.
	h := New(Options{SSH: co})
	_, err := h.Open(t.Context(), []transfer.Location{{Path: src}, remote(dst)}, transfer.Options{Verify: true})
	h.Close()
	var oe *transfer.OptionError
	if !errors.As(err, &oe) || !strings.Contains(oe.Msg, "legacy scp protocol") {
		t.Fatalf("Open --verify on a host without SFTP: %v, want the legacy protocol's OptionError", err)
	}

	h = New(Options{SSH: co})
	defer h.Close()
	run, err := h.Open(t.Context(), []transfer.Location{{Path: src}, remote(dst)},
		transfer.Options{Tar: transfer.TarOptions{Mode: transfer.TarAuto}})
	if err != nil {
		t.Fatal(err)
	}
	if !run.Legacy || run.Options.Tar.Mode != transfer.TarOff {
		t.Errorf("host without SFTP: legacy %v, tar mode %v; want the legacy protocol without tar", run.Legacy, run.Options.Tar.Mode)
	}
	mu.Lock()
	said := strings.Join(log, "\n")
	mu.Unlock()
	if !strings.Contains(said, "has no sftp subsystem: using the legacy scp protocol (-O)") {
		t.Errorf("-v log does not tell of the fallback:\n%s", said)
	}
	res, err := run.Copy(t.Context())
	if err != nil || len(res.Errors) > 0 || res.Files != 1 {
		t.Fatalf("copy: %v, result %+v", err, res)
	}
	if got, err := os.ReadFile(dst); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("copied file: %d bytes, %v; want the %d source bytes", len(got), err, len(want))
	}
}

// After an interrupt the connections serve the clean-up for as long as
// their server answers, and are closed once all of them have been silent
// for AbortGrace.
func TestAbortOnCancel(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{})
	h := New(Options{SSH: connOptions(srv)})
	defer h.Close()
	e, err := h.Endpoint(t.Context(), remote("."))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer h.AbortOnCancel(ctx)()
	cancel()
	// A server that keeps answering keeps its connection, past the grace.
	// A Stat that failed after a gap of a grace between answers, on a
	// machine too busy to ask in time, proves nothing either way.
	last := time.Now()
	for end := last.Add(2 * AbortGrace); time.Now().Before(end); {
		if _, err := e.FS.Stat("."); err != nil {
			if gap := time.Since(last); gap < AbortGrace {
				t.Fatalf("%v after the last answer: %v, want the connection still up", gap, err)
			}
			t.Skipf("the machine left %v between two Stats: not checked", time.Since(last))
		}
		last = time.Now()
		time.Sleep(AbortGrace / 6)
	}
	// Silent, it is closed.
	closed := make(chan struct{})
	go func() {
		h.clients[0].Wait()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(AbortGrace + 30*time.Second):
		t.Fatalf("connection still open %v after it went silent", AbortGrace+30*time.Second)
	}
	if _, err := e.FS.Stat("."); err == nil {
		t.Error("a Stat succeeded after the abort")
	}
	// A new destination (the same server, named with its port) is not
	// connected to after the abort.
	if _, err := h.Endpoint(t.Context(), transfer.Location{Host: "testhost", Port: srv.Port, Path: "."}); err == nil {
		t.Error("a new destination was connected to after the abort")
	}
}

func TestDialCappedBufferWarns(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("only Linux reports the buffer it granted")
	}
	limit := func(name string) int {
		b, err := os.ReadFile("/proc/sys/net/core/" + name)
		if err != nil {
			t.Skipf("cannot read %s: %v", name, err)
		}
		n, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || n > 1<<29 {
			t.Skipf("%s %q: no size above it fits an int32", name, b)
		}
		return n
	}
	rlimit, wlimit := limit("rmem_max"), limit("wmem_max")
	srv := sshtest.Start(t, sshtest.Options{})
	var warned []string
	co := connOptions(srv)
	co.Warnf = func(f string, a ...any) { warned = append(warned, fmt.Sprintf(f, a...)) }
	c, err := Dial(t.Context(), Options{SSH: co, RcvBuf: 2 * rlimit}, "testhost")
	if err != nil {
		t.Fatalf("a capped buffer failed the connection: %v", err)
	}
	c.Close()
	if len(warned) != 1 || !strings.HasPrefix(warned[0], "hpncp: warning: ") || !strings.Contains(warned[0], "rmem_max") {
		t.Errorf("warnings %q, want one naming rmem_max", warned)
	}

	// Both buffers above their limits (an ordinary user asking for what
	// only root's SO_SNDBUFFORCE would give): a warning each.
	warned = nil
	c, err = Dial(t.Context(), Options{SSH: co, RcvBuf: 2 * rlimit, SndBuf: 2 * wlimit}, "testhost")
	if err != nil {
		t.Fatalf("two capped buffers failed the connection: %v", err)
	}
	c.Close()
	if len(warned) != 2 || !strings.HasPrefix(warned[0], "hpncp: warning: ") || !strings.Contains(warned[0], "rmem_max") ||
		!strings.HasPrefix(warned[1], "hpncp: warning: ") || !strings.Contains(warned[1], "wmem_max") {
		t.Errorf("warnings %q, want one naming rmem_max and one naming wmem_max", warned)
	}
}

// TestDialCongestion: --cc's algorithm is set on the connection before
// its handshake; one the kernel lacks fails the dial when it was asked
// for by name, and leaves the system's when it was only hpncp's choice
// (--cc auto), which -v says.
func TestDialCongestion(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("only Linux's TCP_CONGESTION is set")
	}
	srv := sshtest.Start(t, sshtest.Options{})
	var logged []string
	co := connOptions(srv)
	co.Logf = func(f string, a ...any) { logged = append(logged, fmt.Sprintf(f, a...)) }
	c, err := Dial(t.Context(), Options{SSH: co, CC: "reno"}, "testhost")
	if err != nil {
		t.Fatal(err)
	}
	if got := sshconn.Congestion(c.Transport); got != "reno" {
		t.Errorf("--cc reno: the connection runs %q", got)
	}
	c.Close()
	if !slices.ContainsFunc(logged, func(l string) bool { return strings.Contains(l, "congestion control reno") }) {
		t.Errorf("-v log %q does not say which congestion control was set", logged)
	}

	if c, err := Dial(t.Context(), Options{SSH: connOptions(srv), CC: "nosuchcc"}, "testhost"); err == nil {
		c.Close()
		t.Error("--cc nosuchcc: the dial succeeded")
	} else if !strings.Contains(err.Error(), "tcp_available_congestion_control") {
		t.Errorf("--cc nosuchcc: %v, want the sysctl that lists what there is", err)
	}

	logged = nil
	c, err = Dial(t.Context(), Options{SSH: co, CC: "nosuchcc", CCBestEffort: true}, "testhost")
	if err != nil {
		t.Fatalf("an algorithm the kernel lacks, asked for at best, failed the dial: %v", err)
	}
	defer c.Close()
	if !slices.ContainsFunc(logged, func(l string) bool { return strings.Contains(l, "left to the system's") }) {
		t.Errorf("-v log %q does not say the system's congestion control was kept", logged)
	}
}

// countingConn counts the bytes a server wrote to its client.
type countingConn struct {
	net.Conn
	wrote *atomic.Int64
}

func (c countingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.wrote.Add(int64(n))
	return n, err
}

// TestPredial: the connections Predial asks for are dialed as soon as the
// host's first is through its TCP handshake, before its SSH handshake,
// and before any stream asks, and each opens the sessions it asks for;
// the copy's streams take them rather than dialing or opening more.
func TestPredial(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	var firstWrote atomic.Int64
	srv := sshtest.Start(t, sshtest.Options{WrapConn: func(n int, c net.Conn) net.Conn {
		if n == 0 {
			return countingConn{c, &firstWrote}
		}
		return c
	}})
	var asked time.Duration = -1
	var wroteThen int64
	h := New(Options{SSH: connOptions(srv), Predial: func(rtt time.Duration) (int, int) {
		asked, wroteThen = rtt, firstWrote.Load()
		return 3, 2
	}})
	defer h.Close()
	e, err := h.Endpoint(t.Context(), remote("f"))
	if err != nil {
		t.Fatal(err)
	}
	if asked < 0 {
		t.Fatal("Predial was not asked")
	}
	// The server's version line is all it may have sent by then; its key
	// exchange reply alone (host key, signature) is longer.
	if wroteThen > 256 {
		t.Errorf("Predial was asked once the server had sent %d bytes on the first connection: after its key exchange, not after its TCP handshake", wroteThen)
	}
	deadline := time.Now().Add(10 * time.Second)
	for srv.Connections() < 3 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := srv.Connections(); n != 3 {
		t.Fatalf("%d connections after Predial asked for 2 more, want 3", n)
	}
	// Two sessions ahead on each: on the first, its SFTP start's spare
	// and one more, beside its main session.
	const sessions = 1 + 3*2
	for srv.Sessions() < sessions && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := srv.Sessions(); n != sessions {
		t.Fatalf("%d sessions opened, want %d: the main one and two ahead on each connection", n, sessions)
	}
	os.WriteFile(filepath.Join(srv.Root, "f"), []byte("x"), 0o644)
	type opener interface {
		OpenReaderAt(context.Context, string, int) (protocol.ReaderAtCloser, error)
	}
	for range 6 {
		f, err := e.FS.(opener).OpenReaderAt(t.Context(), e.Path, 3)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
	}
	if n := srv.Connections(); n != 3 {
		t.Errorf("6 streams over 3 connections dialed %d connections in all, want the 3 there were", n)
	}
	if n := srv.Sessions(); n != sessions {
		t.Errorf("6 streams opened %d sessions of their own, want none: they take those opened ahead", n-sessions)
	}
}

// heldConn is a server's connection whose writes wait until release is
// closed: a dial to it stays in its SSH handshake.
type heldConn struct {
	net.Conn
	release <-chan struct{}
}

func (c heldConn) Write(p []byte) (int, error) {
	<-c.release
	return c.Conn.Write(p)
}

// TestUnusedSparesClosed: connections Predial asked for that the copy
// never took (a download that turned out small) are closed with the run,
// and one still dialing then is ended rather than left open once its
// handshake ends.
func TestUnusedSparesClosed(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	release := make(chan struct{})
	srv := sshtest.Start(t, sshtest.Options{WrapConn: func(n int, c net.Conn) net.Conn {
		if n == 2 {
			return heldConn{c, release}
		}
		return c
	}})
	h := New(Options{SSH: connOptions(srv), Predial: func(time.Duration) (int, int) { return 3, 0 }})
	if _, err := h.Endpoint(t.Context(), remote("f")); err != nil {
		t.Fatal(err)
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("after 10 s: %s", what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitFor("the server accepted fewer than 3 connections", func() bool { return srv.Connections() == 3 })
	h.Close()
	close(release)
	waitFor(fmt.Sprintf("%d connections still open after Close", srv.Open()), func() bool { return srv.Open() == 0 })
}
