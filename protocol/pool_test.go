package protocol

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/hpncp/hpncp/internal/sshtest"
)

func dialer(t *testing.T, srv *sshtest.Server) func(context.Context) (*ssh.Client, error) {
	t.Helper()
	cfg := srv.ClientConfig(t)
	var mu sync.Mutex
	var clients []*ssh.Client
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range clients {
			c.Close()
		}
	})
	return func(context.Context) (*ssh.Client, error) {
		c, err := ssh.Dial("tcp", srv.Addr, cfg)
		if err == nil {
			mu.Lock()
			clients = append(clients, c)
			mu.Unlock()
		}
		return c, err
	}
}

// bare is dial as Options.Dial, opening no sessions ahead.
func bare(dial func(context.Context) (*ssh.Client, error)) func(context.Context) (*ssh.Client, Readying, error) {
	return func(ctx context.Context) (*ssh.Client, Readying, error) {
		c, err := dial(ctx)
		return c, Readying{}, err
	}
}

func openEnd(t *testing.T, srv *sshtest.Server, withDial bool) *SFTP {
	t.Helper()
	dial := dialer(t, srv)
	first, err := dial(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Label: "testhost:", Logf: t.Logf}
	if withDial {
		o.Dial = bare(dial)
	}
	end, err := OpenSFTP(first, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { end.Close() })
	return end
}

// delayedDialEnd opens an end on an in-process server whose further
// connections are dialed once wait returns, and a one-byte file on it.
func delayedDialEnd(t *testing.T, wait func(context.Context) error) (*SFTP, string) {
	t.Helper()
	srv := sshtest.Start(t, sshtest.Options{})
	dial := dialer(t, srv)
	first, err := dial(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	end, err := OpenSFTP(first, Options{Label: "testhost:", Logf: t.Logf,
		Dial: func(ctx context.Context) (*ssh.Client, Readying, error) {
			if err := wait(ctx); err != nil {
				return nil, Readying{}, err
			}
			c, err := dial(ctx)
			return c, Readying{}, err
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { end.Close() })
	name := filepath.Join(srv.Root, "f")
	if err := os.WriteFile(name, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	return end, name
}

func TestLimitsFromServer(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{})
	end := openEnd(t, srv, false)
	// pkg/sftp's server announces no limits: the safe size applies.
	if got := end.Packet(); got != SafePacket {
		t.Errorf("packet = %d, want %d for a server that states no limits", got, SafePacket)
	}
	if end.RTT() <= 0 {
		t.Error("no request round trip measured at start")
	}
	if rtt, ok := end.ping.wait(10 * time.Second); !ok || rtt <= 0 {
		t.Errorf("the request after the start: %v, %v; want its round trip", rtt, ok)
	}
	if got := (Limits{MaxRead: 261120, MaxWrite: 261120}).Packet(); got != 261120 {
		t.Errorf("OpenSSH's limits give packet %d, want 261120", got)
	}
	if got := (Limits{MaxRead: 1 << 20, MaxWrite: 1 << 20}).Packet(); got != maxPacketCap {
		t.Errorf("a generous server gives packet %d, want the cap %d", got, maxPacketCap)
	}
}

func TestPoolOpensConnectionsPastMaxSessions(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{MaxSessions: 2})
	end := openEnd(t, srv, true)
	name := filepath.Join(srv.Root, "f")
	if err := os.WriteFile(name, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	var files []WriterAtCloser
	for i := range 5 {
		f, err := end.OpenWriterAt(context.Background(), name, 1)
		if err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
		if _, err := f.WriteAt([]byte{byte(i)}, int64(i)); err != nil {
			t.Fatalf("stream %d write: %v", i, err)
		}
		files = append(files, f)
	}
	// One session is the main one; two fit per connection: 3 connections.
	if n := srv.Connections(); n < 3 {
		t.Errorf("%d connections for 6 sessions at MaxSessions 2, want at least 3", n)
	}
	for _, f := range files {
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// Released sessions are reused, not reopened.
	before := srv.Connections()
	f, err := end.OpenReaderAt(context.Background(), name, 1)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if srv.Connections() != before {
		t.Error("a released session was not reused")
	}
}

func TestPoolWithoutDialStopsAtMaxSessions(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{MaxSessions: 2})
	end := openEnd(t, srv, false)
	name := filepath.Join(srv.Root, "f")
	os.WriteFile(name, []byte("x"), 0o644)
	f, err := end.OpenReaderAt(context.Background(), name, 4)
	if err != nil {
		t.Fatalf("the second session should fit: %v", err)
	}
	defer f.Close()
	_, err = end.OpenReaderAt(context.Background(), name, 4)
	if err == nil || !strings.Contains(err.Error(), "MaxSessions") {
		t.Fatalf("err = %v, want one naming MaxSessions", err)
	}
}

func TestPoolSpreadsOverConnections(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{})
	end := openEnd(t, srv, true)
	name := filepath.Join(srv.Root, "f")
	os.WriteFile(name, []byte("x"), 0o644)
	var files []ReaderAtCloser
	for range 4 {
		f, err := end.OpenReaderAt(context.Background(), name, 4)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	if n := srv.Connections(); n != 4 {
		t.Errorf("4 streams asked over 4 connections used %d connections", n)
	}
}

// TestPoolReusesIdleWhereFewestBusy: a session given back is reused from
// the connection with the fewest busy sessions, not the first connection
// that has one idle, so that streams stopped and started again stay
// spread over the connections.
func TestPoolReusesIdleWhereFewestBusy(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{})
	end := openEnd(t, srv, true)
	name := filepath.Join(srv.Root, "f")
	os.WriteFile(name, []byte("x"), 0o644)
	conn := func(f ReaderAtCloser) int { return f.(interface{ Conn() int }).Conn() }
	var files []ReaderAtCloser
	for range 4 {
		f, err := end.OpenReaderAt(context.Background(), name, 2)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	on := map[int][]ReaderAtCloser{}
	for _, f := range files {
		on[conn(f)] = append(on[conn(f)], f)
	}
	if len(on[0]) != 2 || len(on[1]) != 2 {
		t.Fatalf("4 streams over 2 connections: %d on the first, %d on the second, want 2 each", len(on[0]), len(on[1]))
	}
	// The first connection: one busy, one idle; the second: both idle.
	on[0][0].Close()
	on[1][0].Close()
	on[1][1].Close()
	f, err := end.OpenReaderAt(context.Background(), name, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	defer on[0][1].Close()
	if c := conn(f); c != 1 {
		t.Errorf("a stream reopened beside one busy on connection 0 and none on connection 1 went to connection %d, want 1", c)
	}
}

// TestPoolStreamGoesToTheIdleConnection: a stream of a plan that grew to
// a connection with no sessions yet opens one there rather than take a
// session left idle on a connection that carries a stream already. At
// 1 ms the probe of two streams on two connections ran both on the first
// connection, its second connection idle, failed for want of a gain,
// and held the upload at one connection: 52-67 MB/s where two carried
// 78-87.
func TestPoolStreamGoesToTheIdleConnection(t *testing.T) {
	end, name := delayedDialEnd(t, func(context.Context) error { return nil })
	end.Standby(2)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		end.pool.mu.Lock()
		n := len(end.pool.conns)
		end.pool.mu.Unlock()
		if n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d connections after 10 s of standby, want 2", n)
		}
	}
	conn := func(f ReaderAtCloser) int { return f.(interface{ Conn() int }).Conn() }
	open := func(conns int) ReaderAtCloser {
		t.Helper()
		f, err := end.OpenReaderAt(context.Background(), name, conns)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	a, b := open(1), open(1)
	defer a.Close()
	if conn(a) != 0 || conn(b) != 0 {
		t.Fatalf("a one-connection plan's streams went to connections %d and %d, want 0", conn(a), conn(b))
	}
	b.Close() // the first connection: one stream, one session idle
	f := open(2)
	defer f.Close()
	if c := conn(f); c != 1 {
		t.Errorf("a two-connection plan's second stream went to connection %d, beside the first stream, with connection 1 idle; want 1", c)
	}
}

// TestPoolPlacesStreamsBesideHeldSessions: the sessions a connection
// holds for other things than a copy's streams (a temporary file's
// handle, a reader) do not count as streams when streams are placed: at
// 100 ms the first connection's temporary file and probe made it take
// one stream where the others took three or four, and it carried 16 MB/s
// beside their 26.
func TestPoolPlacesStreamsBesideHeldSessions(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{})
	end := openEnd(t, srv, true)
	name := filepath.Join(srv.Root, "f")
	os.WriteFile(name, []byte("x"), 0o644)
	for range 2 {
		r, err := end.Open(name) // a session of its own, held until closed
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
	}
	conn := func(f ReaderAtCloser) int { return f.(interface{ Conn() int }).Conn() }
	on := map[int]int{}
	for range 4 {
		f, err := end.OpenReaderAt(context.Background(), name, 2)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		on[conn(f)]++
	}
	if on[0] != 2 || on[1] != 2 {
		t.Errorf("4 streams over 2 connections, the first holding two readers: %d on the first, %d on the second, want 2 each", on[0], on[1])
	}
}

// TestPoolSharesStreamsWhileDialing: the streams of a copy prepared for
// 12 streams on 4 connections go 3 to each connection, once all four
// are up: none piles on the first while the others are in their
// handshakes, and none starts ahead of the others.
func TestPoolSharesStreamsWhileDialing(t *testing.T) {
	const handshake = 300 * time.Millisecond
	end, name := delayedDialEnd(t, func(context.Context) error {
		time.Sleep(handshake) // a long path's TCP, key exchange and auth
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	end.PrepareStreams(ctx, 12, 4)
	type opened struct {
		f     ReaderAtCloser
		after time.Duration
		err   error
	}
	got := make(chan opened, 12)
	for range 12 {
		go func() {
			f, err := end.OpenReaderAt(ctx, name, 4)
			got <- opened{f, time.Since(start), err}
		}()
	}
	on := map[int]int{}
	early := 0
	for range 12 {
		o := <-got
		if o.err != nil {
			t.Fatal(o.err)
		}
		defer o.f.Close()
		c := o.f.(interface{ Conn() int }).Conn()
		on[c]++
		if c == 0 && o.after < handshake {
			early++
		}
	}
	for c := range 4 {
		if on[c] != 3 {
			t.Errorf("12 streams over 4 connections: %v per connection, want 3 on each", on)
			break
		}
	}
	if early != 0 {
		t.Errorf("%d of the first connection's streams opened before the other connections' handshakes ended, want none", early)
	}
}

// TestPoolOneSessionWaitsForNoDial: while the streams prepared for a
// copy over two connections wait for the second one's dial, a session
// asked for on any connection (a temporary file's, a batch's) opens on
// the first at once. It used to wait for the prepared ones, and so for
// the dial: at 50 ms, half a second for each file of a tree.
func TestPoolOneSessionWaitsForNoDial(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	defer unblock()
	end, name := delayedDialEnd(t, func(ctx context.Context) error {
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The sessions opened with the end are taken, as a tree's listing
	// and batches take them.
	for {
		end.pool.mu.Lock()
		idle := len(end.pool.conns[0].idle)
		end.pool.mu.Unlock()
		if idle == 0 {
			break
		}
		s, err := end.pool.acquire(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		defer end.pool.release(s, false)
	}
	end.PrepareStreams(ctx, 4, 2)
	opened := make(chan error, 1)
	go func() {
		f, err := end.Open(name)
		if err == nil {
			_, err = io.ReadAll(f)
			f.Close()
		}
		opened <- err
	}()
	select {
	case err := <-opened:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		unblock()
		t.Fatal("a file opened while the prepared streams waited for a dial waited for the dial too")
	}
}

func TestLostConnectionIsStreamLost(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{})
	end := openEnd(t, srv, true)
	name := filepath.Join(srv.Root, "f")
	os.WriteFile(name, []byte("x"), 0o644)
	// The first stream takes the session kept from the limits question,
	// on the first connection; the second gets a connection of its own
	// (the second accepted).
	first, err := end.OpenWriterAt(context.Background(), name, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	f, err := end.OpenWriterAt(context.Background(), name, 2)
	if err != nil {
		t.Fatal(err)
	}
	if !srv.KillConnection(1) {
		t.Fatal("no second connection to kill")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err = f.WriteAt(make([]byte, 64<<10), 0)
		if err != nil || time.Now().After(deadline) {
			break
		}
	}
	if !errors.Is(err, ErrStreamLost) {
		t.Fatalf("write on a killed connection: %v, want ErrStreamLost", err)
	}
	f.Close()
	// The main session, on the first connection, still works.
	if _, err := end.Stat(name); err != nil {
		t.Fatalf("main session after losing another connection: %v", err)
	}
	// And a new stream can be had.
	g, err := end.OpenReaderAt(context.Background(), name, 2)
	if err != nil {
		t.Fatal(fmt.Errorf("new stream after a loss: %w", err))
	}
	g.Close()
}

// TestEveryConnectionLost: once every connection is gone, the end dials
// again, streams open on the new connection and the main session starts
// again for metadata; with the server gone for good, the pool gives up
// within its reconnect budget with a connection error.
func TestEveryConnectionLost(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{})
	end := openEnd(t, srv, true)
	name := filepath.Join(srv.Root, "f")
	if err := os.WriteFile(name, []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := end.OpenReaderAt(context.Background(), name, 1)
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	before := srv.Connections()
	srv.KillConnections()

	fi, err := end.Stat(name)
	if err != nil || fi.Size() != 5 {
		t.Fatalf("stat after every connection was lost: %v, %v", fi, err)
	}
	r, err = end.OpenReaderAt(context.Background(), name, 1)
	if err != nil {
		t.Fatalf("open a stream after every connection was lost: %v", err)
	}
	b := make([]byte, 5)
	if n, err := r.ReadAt(b, 0); n != 5 || (err != nil && err != io.EOF) || string(b) != "hello" {
		t.Fatalf("read on the new connection: %d, %v, %q", n, err, b)
	}
	r.Close()
	if srv.Connections() <= before {
		t.Fatal("no new connection was dialed")
	}

	end.pool.reconnect = 300 * time.Millisecond
	dial := end.pool.dial
	end.pool.dial = func(ctx context.Context) (*ssh.Client, Readying, error) {
		return nil, Readying{}, errors.New("connection refused")
	}
	defer func() { end.pool.dial = dial }()
	srv.KillConnections()
	start := time.Now()
	_, err = end.OpenReaderAt(context.Background(), name, 1)
	var ce *ConnError
	if !errors.As(err, &ce) || !Lost(err) {
		t.Fatalf("open with the server gone: %v, want a *ConnError", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("giving up took %s with a 300ms budget", d)
	}
	if _, err := end.Stat(name); !Lost(err) && !errors.Is(err, io.EOF) {
		t.Fatalf("stat with the server gone: %v, want a lost connection", err)
	}
}

// TestSilentPathEndsDials: once a connection is given up for its
// server's silence, a dial under way on the same path is ended and the
// pool fails at once, rather than when that dial's ConnectTimeout ends.
func TestSilentPathEndsDials(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{})
	first, err := dialer(t, srv)(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	dialing := make(chan struct{})
	end, err := OpenSFTP(first, Options{Label: "testhost:", Logf: t.Logf,
		Dial: func(ctx context.Context) (*ssh.Client, Readying, error) {
			close(dialing)
			<-ctx.Done() // a path that never answers
			return nil, Readying{}, ctx.Err()
		},
		Silent: func(c *ssh.Client) error {
			if c == first {
				return errors.New("server not responding")
			}
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer end.Close()
	name := filepath.Join(srv.Root, "f")
	if err := os.WriteFile(name, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The first stream takes the idle session of the first connection.
	r, err := end.OpenReaderAt(context.Background(), name, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got := make(chan error, 1)
	go func() {
		// Two connections wanted: the pool dials a second one.
		_, err := end.OpenReaderAt(context.Background(), name, 2)
		got <- err
	}()
	select {
	case <-dialing:
	case <-time.After(5 * time.Second):
		t.Fatal("the pool did not dial a second connection")
	}
	start := time.Now()
	srv.KillConnections()
	select {
	case err := <-got:
		var ce *ConnError
		if !errors.As(err, &ce) {
			t.Fatalf("open after the path went silent: %v, want a *ConnError", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the dial under way was not ended when the path went silent")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("ended after %v", d)
	}
}

// TestRTTKernelUnlessRelayed: the path's round trip is the kernel's,
// whatever the server's time to answer added to the request measured at
// start, unless that request took well over it (a relay, a jump host),
// or the kernel tells nothing.
func TestRTTKernelUnlessRelayed(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct{ req, kernel, want time.Duration }{
		{128 * ms, 101 * ms, 101 * ms}, // a busy server's answer
		{90 * ms, 101 * ms, 101 * ms},
		{250 * ms, 101 * ms, 250 * ms}, // the kernel sees the first hop
		{2 * ms, 50 * time.Microsecond, 2 * ms},
		{30 * ms, 0, 30 * ms}, // no TCP_INFO
	} {
		s := &SFTP{reqRTT: tc.req, rtt: func() time.Duration { return tc.kernel }}
		if got := s.RTT(); got != tc.want {
			t.Errorf("request %s, kernel %s: RTT %s, want %s", tc.req, tc.kernel, got, tc.want)
		}
	}
	if got := (&SFTP{reqRTT: 30 * ms}).RTT(); got != 30*ms {
		t.Errorf("without a kernel estimate: RTT %s, want the request's 30ms", got)
	}
}

// TestRTTSecondRequest: a start's request slowed by the server's start
// reads as a relay until the request sent after it comes back short; one
// that comes back long, or not at all within the first's time, leaves
// the first's reading.
func TestRTTSecondRequest(t *testing.T) {
	ms := time.Millisecond
	kernel := func() time.Duration { return 50 * time.Microsecond }
	back := func(rtt time.Duration) ping {
		p := ping{done: make(chan struct{}), rtt: rtt}
		close(p.done)
		return p
	}
	for _, tc := range []struct {
		name      string
		req       time.Duration
		ping      ping
		want      time.Duration
		kernelRTT func() time.Duration
	}{
		{"loopback, the start slowed", 40 * ms, back(60 * time.Microsecond), 50 * time.Microsecond, kernel},
		{"loopback, the second request slow too", 40 * ms, back(300 * time.Microsecond), 300 * time.Microsecond, kernel},
		{"a relay", 101 * ms, back(100 * ms), 100 * ms, kernel},
		{"the second request failed", 40 * ms, back(0), 40 * ms, kernel},
		{"not back within the first's time", 3 * ms, ping{done: make(chan struct{})}, 3 * ms, kernel},
		{"no kernel estimate, the second back", 40 * ms, back(1 * ms), 1 * ms, func() time.Duration { return 0 }},
		{"no kernel estimate, the second not back: no wait", 10 * time.Second, ping{done: make(chan struct{})}, 10 * time.Second, func() time.Duration { return 0 }},
	} {
		s := &SFTP{reqRTT: tc.req, rtt: tc.kernelRTT, ping: tc.ping}
		start := time.Now()
		if got := s.RTT(); got != tc.want {
			t.Errorf("%s: RTT %s, want %s", tc.name, got, tc.want)
		}
		// A wait is bounded by the start's request (10 s in the case
		// that must not wait at all).
		if d := time.Since(start); d > tc.req+time.Second {
			t.Errorf("%s: RTT took %s, more than the start's request", tc.name, d)
		}
	}
}

// TestPoolStandby: connections dialed on standby carry no stream until a
// plan asks for more connections than the others, which then takes one
// of them without dialing; the tar streams' connections leave them out
// too, and a failed dial ends the standby's dialing.
func TestPoolStandby(t *testing.T) {
	var mu sync.Mutex
	dials := 0
	end, name := delayedDialEnd(t, func(context.Context) error {
		mu.Lock()
		dials++
		mu.Unlock()
		return nil
	})
	reserved := func() (n int) {
		end.pool.mu.Lock()
		defer end.pool.mu.Unlock()
		for _, pc := range end.pool.conns {
			if pc.reserve && !pc.dead {
				n++
			}
		}
		return n
	}

	end.Standby(4)
	for deadline := time.Now().Add(10 * time.Second); reserved() < 3; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections on standby after 10 s, want 3", reserved())
		}
	}
	var files []ReaderAtCloser
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	open := func(conns int) int {
		t.Helper()
		f, err := end.OpenReaderAt(context.Background(), name, conns)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
		return f.(*streamFile).Conn()
	}
	for range 2 {
		if c := open(1); c != 0 {
			t.Errorf("a stream of a one-connection plan went to connection %d, on standby", c)
		}
	}
	if c := open(2); c == 0 {
		t.Errorf("a two-connection plan's stream stayed on connection 0")
	}
	mu.Lock()
	n := dials
	mu.Unlock()
	if n != 3 || reserved() != 2 {
		t.Errorf("after a plan took a connection on standby: %d dials, %d on standby; want 3 and 2", n, reserved())
	}
	if c := len(end.pool.spareConns()); c != 2 {
		t.Errorf("the tar streams are offered %d connections, want the 2 not on standby", c)
	}

	// A connection lost on standby is not taken: the plan takes the one
	// left, then dials.
	end.pool.mu.Lock()
	var lost *pconn
	for _, pc := range end.pool.conns {
		if pc.reserve {
			lost = pc
			break
		}
	}
	end.pool.mu.Unlock()
	lost.c.Close()
	for deadline := time.Now().Add(10 * time.Second); reserved() != 1; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections on standby after one was lost, want 1", reserved())
		}
	}
	for range 2 {
		if c := open(4); c == lost.id {
			t.Errorf("a stream went to connection %d, lost on standby", c)
		}
	}
	mu.Lock()
	n = dials
	mu.Unlock()
	if n != 4 || reserved() != 0 {
		t.Errorf("a four-connection plan after a loss on standby: %d dials, %d on standby; want 4 and 0", n, reserved())
	}

	// A failed dial ends the standby's dialing, as it ends growth.
	failed := 0
	end2, _ := delayedDialEnd(t, func(context.Context) error {
		mu.Lock()
		failed++
		mu.Unlock()
		return errors.New("refused")
	})
	end2.Standby(8)
	// Once the first dial has failed, a while for any other to show.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		mu.Lock()
		n := failed
		mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("standby made no dial in 30 s")
		}
	}
	time.Sleep(200 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if failed != 1 {
		t.Errorf("standby dialed %d times after its first dial failed, want 1", failed)
	}
}

// TestPoolSaysNothingAfterClose: a dial under way when the end closes
// ends without a log line once Close has returned, since the run whose
// log it is may have ended (a sync's small-file sessions, prepared in the
// background, once failed a -race run that way).
func TestPoolSaysNothingAfterClose(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	srv := sshtest.Start(t, sshtest.Options{})
	dial := dialer(t, srv)
	first, err := dial(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	closed, late := false, []string{}
	logf := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if closed {
			late = append(late, fmt.Sprintf(format, args...))
		}
	}
	end, err := OpenSFTP(first, Options{Label: "testhost:", Logf: logf,
		Dial: func(ctx context.Context) (*ssh.Client, Readying, error) {
			started <- struct{}{}
			<-release
			return nil, Readying{}, errors.New("refused")
		}})
	if err != nil {
		t.Fatal(err)
	}
	end.Standby(2)
	<-started
	end.pool.mu.Lock()
	ended := end.pool.dialReady
	end.pool.mu.Unlock()
	end.Close()
	mu.Lock()
	closed = true
	mu.Unlock()
	close(release)
	<-ended            // the dial has failed, and would have said so
	end.pool.mu.Lock() // in the same hold of the lock
	end.pool.mu.Unlock()
	mu.Lock()
	defer mu.Unlock()
	if len(late) > 0 {
		t.Errorf("logged after Close: %q", late)
	}
}
