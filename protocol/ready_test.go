package protocol

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/hpncp/hpncp/internal/sshtest"
)

// preOpenEnd opens an end that asks for the stat of the file at name
// (content) with its start, and whose further connections come with
// sessions opened ahead (OpenReady) with pre, their files opened ahead
// recorded in handles.
type preOpenEnd struct {
	*SFTP
	name, root string
	pre        *PreOpen
	mu         sync.Mutex
	ahead      map[ssh.Channel]bool // the sessions that opened the file ahead
}

func openPreOpenEnd(t *testing.T, content []byte) *preOpenEnd {
	t.Helper()
	srv := sshtest.Start(t, sshtest.Options{})
	e := &preOpenEnd{name: filepath.Join(srv.Root, "f"), root: srv.Root, ahead: map[ssh.Channel]bool{}}
	if err := os.WriteFile(e.name, content, 0o644); err != nil {
		t.Fatal(err)
	}
	e.pre = &PreOpen{Name: e.name}
	dial := dialer(t, srv)
	first, err := dial(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	e.SFTP, err = OpenSFTP(first, Options{Label: "testhost:", Logf: t.Logf, Stat: []string{e.name}, PreOpen: e.pre,
		Dial: func(ctx context.Context) (*ssh.Client, Readying, error) {
			c, err := dial(ctx)
			if err != nil {
				return nil, Readying{}, err
			}
			rs := OpenReady(c, 2, e.pre)
			e.mu.Lock()
			for _, r := range rs {
				if r.pre != nil {
					e.ahead[r.ch] = true
				}
			}
			e.mu.Unlock()
			return c, ReadyNow(rs), nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// TestPreOpenedFileServesTheStreams: once the start's stat has shown the
// download's file to be a regular one, the sessions a connection opens
// ahead open it behind INIT; the streams reading it on that connection
// take the handles, so that their first request is a READ, and read the
// file's bytes.
func TestPreOpenedFileServesTheStreams(t *testing.T) {
	content := bytes.Repeat([]byte("0123456789"), 1000)
	e := openPreOpenEnd(t, content)
	if e.pre.name() != e.name {
		t.Fatal("the start did not tell the file a regular one")
	}
	var files []ReaderAtCloser
	took := 0
	for range 3 {
		f, err := e.OpenReaderAt(context.Background(), e.name, 2)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
		sf := f.(*streamFile)
		e.mu.Lock()
		if e.ahead[sf.s.ch] {
			took++
		}
		e.mu.Unlock()
		if sf.s.pre != nil {
			t.Error("a stream's session still holds its file opened ahead")
		}
		b := make([]byte, len(content))
		if _, err := f.ReadAt(b, 0); err != nil || !bytes.Equal(b, content) {
			t.Fatalf("read: %v", err)
		}
	}
	if len(e.ahead) != 2 || took != 2 {
		t.Errorf("%d sessions opened the file ahead, %d of them served a stream; want 2 and 2 (the second connection's)", len(e.ahead), took)
	}
	for _, f := range files {
		if err := f.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	}
}

// TestPreOpenedOtherFile: a session whose file opened ahead is not the
// one its stream asks for opens the asked one, and the file opened ahead
// is closed; a file that did not open leaves the session without one.
func TestPreOpenedOtherFile(t *testing.T) {
	e := openPreOpenEnd(t, []byte("ahead"))
	other := filepath.Join(e.root, "g")
	if err := os.WriteFile(other, []byte("other"), 0o644); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		f, err := e.OpenReaderAt(context.Background(), other, 2)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		b := make([]byte, 5)
		if _, err := f.ReadAt(b, 0); err != nil || string(b) != "other" {
			t.Fatalf("read %q (%v), want the asked file's bytes", b, err)
		}
	}
	if len(e.ahead) == 0 {
		t.Fatal("no file opened ahead: the test tested nothing")
	}

	srv := sshtest.Start(t, sshtest.Options{})
	first, err := dialer(t, srv)(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	pre := &PreOpen{Name: filepath.Join(srv.Root, "missing")}
	pre.regular.Store(true) // as if a stat had said so before it went
	rs := OpenReady(first, 2, pre)
	if len(rs) != 2 {
		t.Fatalf("%d sessions ready, want 2 although their file is missing", len(rs))
	}
	for _, r := range rs {
		if r.pre != nil {
			t.Errorf("a missing file opened ahead: %+v", r.pre)
		}
		_ = r.ch.Close()
	}
}

// TestPreOpenNotARegularFile: where the start's stat shows no regular
// file (a FIFO, whose OPEN would hold the server's sftp-server until a
// writer came), or was not asked, nothing is opened ahead.
func TestPreOpenNotARegularFile(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{})
	dial := dialer(t, srv)
	for _, tc := range []struct {
		what string
		stat bool
	}{{"a directory", true}, {"an unasked stat", false}} {
		first, err := dial(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		pre := &PreOpen{Name: srv.Root}
		o := Options{Label: "testhost:", Logf: t.Logf, PreOpen: pre}
		if tc.stat {
			o.Stat = []string{srv.Root}
		}
		end, err := OpenSFTP(first, o)
		if err != nil {
			t.Fatal(err)
		}
		if pre.name() != "" {
			t.Errorf("%s: told to open %q ahead", tc.what, pre.name())
		}
		end.Close()
	}
}

// TestStreamsStartAsSessionsCome: a connection dialed ahead is the
// pool's as soon as it is up, its sessions when they are ready. The
// streams of a copy over three connections start on the sessions of
// those whose sessions are ready, and only those meant for the one
// whose sessions are late wait for them. They all used to wait for the
// last (seen at 100 ms: one connection's OPEN reply held a round trip
// behind its VERSION by the server's Nagle).
func TestStreamsStartAsSessionsCome(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{})
	name := filepath.Join(srv.Root, "f")
	if err := os.WriteFile(name, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	dial := dialer(t, srv)
	first, err := dial(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	var releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	defer unblock()
	var (
		mu    sync.Mutex
		dials int
		late  *ssh.Client
	)
	const ahead = 2
	end, err := OpenSFTP(first, Options{Label: "testhost:", Logf: t.Logf, Ahead: ahead, AheadConns: 2,
		Dial: func(ctx context.Context) (*ssh.Client, Readying, error) {
			c, err := dial(ctx)
			if err != nil {
				return nil, Readying{}, err
			}
			mu.Lock()
			dials++
			held := dials == 1
			if held {
				late = c
			}
			mu.Unlock()
			return c, Readying{N: ahead, Wait: func() []ReadySession {
				if held {
					<-release
				}
				return OpenReady(c, ahead, nil)
			}}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer end.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	type opened struct {
		f   ReaderAtCloser
		err error
	}
	got := make(chan opened, 3*ahead)
	for range 3 * ahead {
		go func() {
			f, err := end.OpenReaderAt(ctx, name, 3)
			got <- opened{f, err}
		}()
	}
	take := func() ReaderAtCloser {
		t.Helper()
		select {
		case o := <-got:
			if o.err != nil {
				t.Fatal(o.err)
			}
			return o.f
		case <-time.After(10 * time.Second):
			t.Fatal("streams waited for the sessions of a connection not theirs")
		}
		return nil
	}
	var files []ReaderAtCloser
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	lateConn := func(f ReaderAtCloser) bool {
		end.pool.mu.Lock()
		defer end.pool.mu.Unlock()
		return end.pool.conns[f.(interface{ Conn() int }).Conn()].c == late
	}
	for range 2 * ahead {
		f := take()
		files = append(files, f)
		if lateConn(f) {
			t.Fatal("a stream opened on the connection whose sessions are held")
		}
	}
	select {
	case o := <-got:
		if o.err == nil {
			files = append(files, o.f)
		}
		t.Fatalf("a stream opened before the late connection's sessions came: %v", o.err)
	case <-time.After(200 * time.Millisecond):
	}
	unblock()
	for range ahead {
		f := take()
		files = append(files, f)
		if !lateConn(f) {
			t.Error("a stream meant for the late connection opened elsewhere")
		}
	}
}

// TestReadySessionOpensAfterVersion: a session whose INIT went out
// before the start's stat was answered opens the file after VERSION
// when the answer has come by then, so that its stream's first request
// is a READ; one with no answer yet leaves the OPEN to its stream.
func TestReadySessionOpensAfterVersion(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{})
	name := filepath.Join(srv.Root, "f")
	if err := os.WriteFile(name, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := dialer(t, srv)(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, answered := range []bool{true, false} {
		pre := &PreOpen{Name: name}
		ch, _, err := helloSFTP(c, func() [][]byte {
			pre.regular.Store(answered) // the stat answered as INIT left
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		r, err := openedAfter(ch, "", pre)
		if err != nil {
			t.Fatal(err)
		}
		if got := r.pre != nil; got != answered {
			t.Errorf("stat answered %v: opened ahead %v", answered, got)
		}
		if r.pre != nil && r.pre.name != name {
			t.Errorf("opened %q ahead, want %q", r.pre.name, name)
		}
		_ = ch.Close()
	}
}
