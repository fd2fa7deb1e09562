package protocol

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hpncp/hpncp/internal/sshtest"
)

func noise(n int) []byte {
	b := make([]byte, n)
	rand.New(rand.NewSource(int64(n))).Read(b)
	return b
}

func TestStreamRoundTrip(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{})
	end := openEnd(t, srv, true)
	name := filepath.Join(srv.Root, "f")
	if err := os.WriteFile(name, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// Pieces of every shape: below, at and above the packet size (32 KiB
	// against this server), written at once from many goroutines.
	src := noise(3<<20 + 7)
	sizes := []int{1, SafePacket - 1, SafePacket, SafePacket + 1, 5 * SafePacket, 200 << 10}
	type span struct{ off, n int }
	var spans []span
	for off, i := 0, 0; off < len(src); i++ {
		n := min(sizes[i%len(sizes)], len(src)-off)
		spans = append(spans, span{off, n})
		off += n
	}
	w, err := end.OpenWriterAt(context.Background(), name, 2)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(spans))
	for _, s := range spans {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := w.WriteAt(src[s.off:s.off+s.n], int64(s.off))
			if err == nil && n != s.n {
				err = errors.New("short write without an error")
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(name); !bytes.Equal(got, src) {
		t.Fatalf("the file differs from what was written (%d bytes, want %d)", len(got), len(src))
	}

	r, err := end.OpenReaderAt(context.Background(), name, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got := make([]byte, len(src))
	errs = make(chan error, len(spans))
	for _, s := range spans {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := r.ReadAt(got[s.off:s.off+s.n], int64(s.off))
			if err == nil && n != s.n {
				err = errors.New("short read without an error")
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(got, src) {
		t.Fatal("read back differs from the file")
	}

	// Across the end: the bytes that exist, then io.EOF.
	tail := make([]byte, 3*SafePacket)
	off := int64(len(src) - 100)
	n, err := r.ReadAt(tail, off)
	if n != 100 || err != io.EOF || !bytes.Equal(tail[:n], src[off:]) {
		t.Fatalf("read across the end: %d bytes, %v; want 100 and io.EOF", n, err)
	}
}

func TestStreamFollowsShortReplies(t *testing.T) {
	// The server returns at most 255 KiB per read, as OpenSSH does: a
	// session asking for more must ask again for the rest.
	srv := sshtest.Start(t, sshtest.Options{})
	conn, err := dialer(t, srv)(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	name := filepath.Join(srv.Root, "big")
	src := noise(2<<20 + 3)
	if err := os.WriteFile(name, src, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := openRawSession(conn, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	f, err := s.open(name, fxfRead)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(src))
	if n, err := f.ReadAt(got, 0); n != len(src) || err != nil {
		t.Fatalf("ReadAt of %d bytes in requests of 1 MiB: %d, %v", len(src), n, err)
	}
	if !bytes.Equal(got, src) {
		t.Fatal("read differs from the file")
	}
}

func TestStreamFileErrorsAreNotLostStreams(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{})
	end := openEnd(t, srv, false)
	_, err := end.OpenReaderAt(context.Background(), filepath.Join(srv.Root, "missing"), 1)
	if !errors.Is(err, fs.ErrNotExist) || errors.Is(err, ErrStreamLost) {
		t.Fatalf("opening a missing file: %v, want fs.ErrNotExist and no lost stream", err)
	}
	name := filepath.Join(srv.Root, "f")
	os.WriteFile(name, []byte("x"), 0o644)
	// The session that failed to open a file is as good as before.
	r, err := end.OpenReaderAt(context.Background(), name, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// Writing to a file opened for reading: the server refuses the request.
	_, err = r.(*streamFile).WriteAt([]byte("y"), 0)
	var se *StatusError
	if !errors.As(err, &se) || errors.Is(err, ErrStreamLost) {
		t.Fatalf("write to a read-only handle: %v, want a *StatusError and no lost stream", err)
	}
	b := make([]byte, 1)
	if n, err := r.ReadAt(b, 0); n != 1 || (err != nil && err != io.EOF) || b[0] != 'x' {
		t.Fatalf("read after a refused request: %d, %v, %q", n, err, b)
	}
}

// TestSenderWritesNoMoreThanWasQueued: a sender that found the session
// idle writes what was queued then, its own request among it, and
// returns once its reply is in, though other senders keep the queue
// filled; their requests are written all the same. A sender that wrote
// until the queue was empty held an upload's chunk for 1.3 s after its
// reply, and the spread bound stopped the whole copy behind it.
func TestSenderWritesNoMoreThanWasQueued(t *testing.T) {
	s, sr, sw := scripted(t, 4)
	f := &rawFile{s: s, handle: "h"}
	write := func(off int64) chan error {
		done := make(chan error, 1)
		go func() {
			_, err := f.WriteAt(make([]byte, 4), off)
			done <- err
		}()
		return done
	}
	// answer reads one write request and says it succeeded.
	answer := func() {
		typ, id := readRequest(t, sr)
		if typ != fxpWrite {
			t.Fatalf("request of type %d, want a write", typ)
		}
		reply(sw, fxpStatus, id, binary.BigEndian.AppendUint32(nil, fxOK))
	}
	returned := func(done chan error, what string) {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("the %s WriteAt did not return", what)
		}
	}
	first := write(0)
	// The first request is being written: the pipe holds it until read.
	waitQueue(t, s, 0)
	second := write(4)
	waitQueue(t, s, 1)
	answer()
	// The second request waits in the pipe, unread: the first sender,
	// its reply in, must not be the one writing it.
	returned(first, "first")
	answer()
	returned(second, "second")
	s.settle()
}

// waitQueue waits until a sender is writing s's requests and queued
// more wait behind it: the state a test of the queue sets up, which its
// goroutines reach in their own time.
func waitQueue(t *testing.T, s *rawSession, queued int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		s.qmu.Lock()
		writing, n := s.writing, len(s.queue)
		s.qmu.Unlock()
		if writing && n == queued {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 10 s: writing %v with %d requests queued, want a writer and %d queued", writing, n, queued)
		}
	}
}

// pipeChannel is the client end of a scripted SFTP server: what the
// client writes is read by the test, what the test writes is read by the
// client.
type pipeChannel struct {
	io.Reader
	io.Writer
	close func()
}

func (p *pipeChannel) Close() error                                   { p.close(); return nil }
func (p *pipeChannel) CloseWrite() error                              { return nil }
func (p *pipeChannel) SendRequest(string, bool, []byte) (bool, error) { return true, nil }
func (p *pipeChannel) Stderr() io.ReadWriter                          { return nil }

// scripted returns a session whose server is the test: requests arrive on
// the returned reader, replies go to the writer.
func scripted(t *testing.T, packet int) (*rawSession, io.Reader, io.Writer) {
	t.Helper()
	cr, sw := io.Pipe() // server to client
	sr, cw := io.Pipe() // client to server
	var once sync.Once
	ch := &pipeChannel{Reader: cr, Writer: cw, close: func() {
		once.Do(func() {
			cr.Close()
			cw.Close()
		})
	}}
	s := &rawSession{ch: ch, packet: packet, pending: map[uint32]*call{}}
	s.settled = sync.NewCond(&s.qmu)
	go s.receive()
	t.Cleanup(func() { ch.Close(); sr.Close(); sw.Close() })
	return s, sr, sw
}

// readRequest reads one request and returns its type and id.
func readRequest(t *testing.T, r io.Reader) (byte, uint32) {
	t.Helper()
	var hdr [9]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		t.Errorf("read request: %v", err)
		return 0, 0
	}
	body := make([]byte, binary.BigEndian.Uint32(hdr[:4])-5)
	if _, err := io.ReadFull(r, body); err != nil {
		t.Errorf("read request: %v", err)
	}
	return hdr[4], binary.BigEndian.Uint32(hdr[5:])
}

func reply(w io.Writer, typ byte, id uint32, body []byte) {
	b := binary.BigEndian.AppendUint32(nil, uint32(5+len(body)))
	b = append(b, typ)
	b = binary.BigEndian.AppendUint32(b, id)
	w.Write(append(b, body...))
}

func TestStreamBrokenRepliesAreLostStreams(t *testing.T) {
	for _, tc := range []struct {
		name  string
		reply func(w io.Writer, id uint32)
	}{
		{"more data than asked", func(w io.Writer, id uint32) {
			reply(w, fxpData, id, appendString(nil, string(make([]byte, 20))))
		}},
		{"data length disagrees with the packet", func(w io.Writer, id uint32) {
			reply(w, fxpData, id, append(binary.BigEndian.AppendUint32(nil, 4), 1, 2))
		}},
		{"empty data", func(w io.Writer, id uint32) {
			reply(w, fxpData, id, binary.BigEndian.AppendUint32(nil, 0))
		}},
		{"unknown id", func(w io.Writer, id uint32) {
			reply(w, fxpData, id+7, appendString(nil, "abcd"))
		}},
		{"wrong reply type", func(w io.Writer, id uint32) {
			reply(w, fxpHandle, id, appendString(nil, "h"))
		}},
		{"status OK to a read", func(w io.Writer, id uint32) {
			reply(w, fxpStatus, id, binary.BigEndian.AppendUint32(nil, fxOK))
		}},
		{"channel closed", func(w io.Writer, id uint32) {
			w.(io.Closer).Close()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, sr, sw := scripted(t, 16)
			f := &rawFile{s: s, handle: "h"}
			done := make(chan error, 1)
			go func() {
				_, err := f.ReadAt(make([]byte, 10), 0)
				done <- err
			}()
			typ, id := readRequest(t, sr)
			if typ != fxpRead {
				t.Fatalf("request type %d, want a read", typ)
			}
			tc.reply(sw, id)
			if err := <-done; !errors.Is(err, ErrStreamLost) {
				t.Fatalf("err = %v, want ErrStreamLost", err)
			}
		})
	}
}

func TestStreamFailureEndsEveryCall(t *testing.T) {
	s, sr, sw := scripted(t, 4)
	f := &rawFile{s: s, handle: "h"}
	done := make(chan error, 1)
	go func() {
		// Three requests in flight.
		_, err := f.WriteAt(make([]byte, 12), 0)
		done <- err
	}()
	var ids []uint32
	for range 3 {
		_, id := readRequest(t, sr)
		ids = append(ids, id)
	}
	reply(sw, fxpStatus, ids[1], binary.BigEndian.AppendUint32(nil, fxOK))
	sw.(io.Closer).Close()
	if err := <-done; !errors.Is(err, ErrStreamLost) {
		t.Fatalf("err = %v, want ErrStreamLost", err)
	}
	// And a dead session refuses new work at once.
	if _, err := f.ReadAt(make([]byte, 1), 0); !errors.Is(err, ErrStreamLost) {
		t.Fatalf("after the failure: %v, want ErrStreamLost", err)
	}
}

func TestStatusErrors(t *testing.T) {
	status := func(code uint32, msg string) []byte {
		return appendString(binary.BigEndian.AppendUint32(nil, code), msg)
	}
	if err := statusError(status(fxEOF, "")); err != io.EOF {
		t.Errorf("EOF: %v", err)
	}
	if err := statusError(status(fxPermissionDenied, "no")); !errors.Is(err, fs.ErrPermission) {
		t.Errorf("permission denied: %v", err)
	}
	// The hint for a full remote disk keys on the code's name.
	if err := statusError(status(4, "Failure")); err == nil || err.Error() != `sftp: "Failure" (SSH_FX_FAILURE)` {
		t.Errorf("failure: %v", err)
	}
}

func TestOpenReadsAhead(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{})
	end := openEnd(t, srv, false)
	for _, size := range []int{0, 1, SafePacket - 1, SafePacket, SafePacket + 1, 3*SafePacket + 7, 5 << 20} {
		name := filepath.Join(srv.Root, "f")
		src := noise(size)
		if err := os.WriteFile(name, src, 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := end.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := f.(*aheadReader); !ok {
			t.Fatalf("Open returned a %T, want reads ahead on a session of their own", f)
		}
		// Odd read sizes, so that replies are consumed in pieces.
		got, err := io.ReadAll(io.LimitReader(f, int64(size)+1))
		if err != nil || !bytes.Equal(got, src) {
			t.Fatalf("size %d: read %d bytes (%v), equal=%v", size, len(got), err, bytes.Equal(got, src))
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := end.Open(filepath.Join(srv.Root, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("open a missing file: %v, want fs.ErrNotExist", err)
	}
}

func TestReadAheadFollowsShortReplies(t *testing.T) {
	// Requests of 1 MiB against a server that answers at most 255 KiB:
	// every reply is short, and reading goes on from where each ended.
	srv := sshtest.Start(t, sshtest.Options{})
	end := openEnd(t, srv, false)
	name := filepath.Join(srv.Root, "big")
	src := noise(3<<20 + 11)
	if err := os.WriteFile(name, src, 0o644); err != nil {
		t.Fatal(err)
	}
	sess, err := end.pool.acquire(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	f, err := sess.open(name, fxfRead)
	if err != nil {
		t.Fatal(err)
	}
	r := newAheadReader(&streamFile{f, sess, end.pool}, 1<<20, 4)
	got, err := io.ReadAll(r)
	if err != nil || !bytes.Equal(got, src) {
		t.Fatalf("read %d bytes of %d (%v), equal=%v", len(got), len(src), err, bytes.Equal(got, src))
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestOpenWithoutSpareSessionUsesTheMainOne(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{MaxSessions: 1})
	end := openEnd(t, srv, false)
	name := filepath.Join(srv.Root, "f")
	src := noise(100 << 10)
	os.WriteFile(name, src, 0o644)
	f, err := end.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got, err := io.ReadAll(f); err != nil || !bytes.Equal(got, src) {
		t.Fatalf("read %d bytes (%v)", len(got), err)
	}
}

// TestStreamCutDataReportsNoBytes cuts the connection in the middle of a
// DATA reply: the bytes the reply announced did not all arrive, and
// neither ReadAt nor a read-ahead may hand them out as read.
func TestStreamCutDataReportsNoBytes(t *testing.T) {
	cut := func(t *testing.T, sr io.Reader, sw io.Writer) {
		_, id := readRequest(t, sr)
		b := binary.BigEndian.AppendUint32(nil, uint32(5+4+10))
		b = append(b, fxpData)
		b = binary.BigEndian.AppendUint32(b, id)
		b = binary.BigEndian.AppendUint32(b, 10)
		sw.Write(append(b, "abcd"...))
		sw.(io.Closer).Close()
	}
	t.Run("ReadAt", func(t *testing.T) {
		s, sr, sw := scripted(t, 16)
		f := &rawFile{s: s, handle: "h"}
		go cut(t, sr, sw)
		b := bytes.Repeat([]byte{'?'}, 10)
		n, err := f.ReadAt(b, 0)
		if !errors.Is(err, ErrStreamLost) || n > 4 || string(b[:n]) != "abcd"[:n] {
			t.Fatalf("ReadAt = %d, %v with %q in the buffer; want ErrStreamLost and at most the 4 bytes that came", n, err, b[:n])
		}
	})
	t.Run("read ahead", func(t *testing.T) {
		s, sr, sw := scripted(t, 16)
		r := newAheadReader(&streamFile{rawFile: &rawFile{s: s, handle: "h"}, s: &session{rawSession: s}}, 10, 1)
		go cut(t, sr, sw)
		got, err := io.ReadAll(r)
		if !errors.Is(err, ErrStreamLost) || len(got) > 4 || string(got) != "abcd"[:len(got)] {
			t.Fatalf("read %q, %v; want ErrStreamLost and at most the 4 bytes that came", got, err)
		}
	})
}

// blockedWriter is a channel's write side that takes nothing until
// released, as a stalled connection's.
type blockedWriter struct{ release chan struct{} }

func (w blockedWriter) Write(p []byte) (int, error) {
	<-w.release
	return 0, io.ErrClosedPipe
}

// TestStreamFailedWriteHoldsItsBuffer: when a session fails while its
// requests are still being written, WriteAt returns only once the writer
// is done with the caller's buffer, so that the buffer, reused for other
// bytes, can never go out under the old request's offset.
func TestStreamFailedWriteHoldsItsBuffer(t *testing.T) {
	cr, sw := io.Pipe()
	release := make(chan struct{})
	ch := &pipeChannel{Reader: cr, Writer: blockedWriter{release}, close: func() { cr.Close() }}
	s := newRawSession(ch, 4, sessionStart{})
	f := &rawFile{s: s, handle: "h"}
	// The first WriteAt's goroutine becomes the session's writer and is
	// stuck in the channel; the second queues its requests behind it.
	go func() { _, _ = f.WriteAt(make([]byte, 4), 0) }()
	waitQueue(t, s, 0)
	returned := make(chan error, 1)
	go func() {
		_, err := f.WriteAt(make([]byte, 12), 4)
		returned <- err
	}()
	waitQueue(t, s, 3) // 12 bytes in requests of 4
	// The session now fails.
	sw.Close()
	select {
	case err := <-returned:
		t.Fatalf("WriteAt returned (%v) while its requests were still being written", err)
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	select {
	case err := <-returned:
		if !errors.Is(err, ErrStreamLost) {
			t.Fatalf("err = %v, want ErrStreamLost", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("WriteAt did not return once the writer was done")
	}
}

// TestPooledCallHoldsNoSignal: a call released with its reply's signal
// unread is never handed out again as it is: its signal would end the
// next request's wait before that request's reply (seen as "reply of
// type 0" and a receiver stuck on the full channel, across copies).
func TestPooledCallHoldsNoSignal(t *testing.T) {
	for range 100 {
		c := getCall(nil)
		signal(c)
		putCall(c)
		d := getCall(nil)
		select {
		case <-d.done:
			t.Fatal("a pooled call came back with a signal in it")
		default:
		}
		putCall(d)
	}
	// A second signal never blocks the session's receiver.
	c := getCall(nil)
	signal(c)
	done := make(chan struct{})
	go func() { signal(c); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Second):
		t.Fatal("a second signal blocked")
	}
	<-c.done
	putCall(c)
}
