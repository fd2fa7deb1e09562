package protocol

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
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
				if r.sent != "" {
					e.ahead[r.ch] = true
				}
			}
			e.mu.Unlock()
			return c, readyNow(rs), nil
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
	missing := filepath.Join(srv.Root, "missing")
	pre := &PreOpen{Name: missing}
	pre.regular.Store(true) // as if a stat had said so before it went
	rs := OpenReady(first, 2, pre)
	if len(rs) != 2 {
		t.Fatalf("%d sessions ready, want 2 although their file is missing", len(rs))
	}
	// One taken as it is, one with its handle guessed: either way the
	// stream learns that the file is missing, from its open or its
	// first read.
	for i, r := range rs {
		guess := []string{"", "1"}[i]
		s := newRawSession(r.ch, 1<<15, sessionStart{versionDue: true, sent: r.sent, guess: guess})
		f, err := s.openAhead(missing)
		if err == nil {
			_, err = f.ReadAt(make([]byte, 1), 0)
		}
		var pe *fs.PathError
		if !errors.Is(err, fs.ErrNotExist) || !errors.As(err, &pe) || pe.Op != "open" || pe.Path != missing {
			t.Errorf("guess %q: a missing file opened ahead read with %v, want its open's error", guess, err)
		}
		_ = s.Close()
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

// TestGuessedHandleReads: a stream's file, opened on a fresh session
// whose first handle is guessed, reads its bytes whether the guess holds
// (pkg/sftp's first handle is "1") or not (OpenSSH's, from pkg/sftp),
// whether its reads went behind the OPEN or after its reply, from many
// readers at once; the server here may take a read before the OPEN it
// follows, which is then asked again. Without a guess, the open waits
// for its reply.
func TestGuessedHandleReads(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{})
	name := filepath.Join(srv.Root, "f")
	content := noise(3<<20 + 17)
	if err := os.WriteFile(name, content, 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := dialer(t, srv)(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, guess := range []string{"1", openSSHFirstHandle, ""} {
		for _, behindInit := range []bool{true, false} {
			pre := &PreOpen{Name: name}
			pre.regular.Store(behindInit)
			rs := OpenReady(c, 1, pre)
			if len(rs) != 1 {
				t.Fatal("no session ready")
			}
			s := newRawSession(rs[0].ch, 32<<10, sessionStart{versionDue: true, sent: rs[0].sent, guess: guess})
			f, err := s.openAhead(name)
			if err != nil {
				t.Fatal(err)
			}
			if guessed := f.opening != nil; guessed != (guess != "") {
				t.Errorf("guess %q: the open returned before its reply: %v", guess, guessed)
			}
			const chunk = 256 << 10
			got := make([]byte, len(content))
			var wg sync.WaitGroup
			errs := make(chan error, len(content)/chunk+1)
			for off := 0; off < len(content); off += chunk {
				wg.Go(func() {
					b := got[off:min(off+chunk, len(content))]
					if n, err := f.ReadAt(b, int64(off)); err != nil || n != len(b) {
						errs <- fmt.Errorf("read at %d: %d bytes, %v", off, n, err)
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Errorf("guess %q, opened behind INIT %v: %v", guess, behindInit, err)
			}
			if !bytes.Equal(got, content) {
				t.Errorf("guess %q, opened behind INIT %v: the bytes read differ from the file's", guess, behindInit)
			}
			if err := f.Close(); err != nil {
				t.Errorf("close: %v", err)
			}
			_ = s.Close()
		}
	}
}
