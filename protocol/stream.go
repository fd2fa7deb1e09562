package protocol

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
)

// The data path of parallel transfers speaks SFTP itself, on channels of
// its own, rather than through pkg/sftp: pkg/sftp allocates a fresh buffer
// for every reply and copies it again into the caller's, which for a
// download of 1 GiB meant more than 2 GiB allocated, hundreds of garbage
// collections and a peak heap of over 200 MiB at 32 streams. Here a DATA
// reply is read from the channel straight into the caller's buffer.
// Metadata stays with pkg/sftp on the main session.

// StatusError is a failure status the server sent for one request: it is
// about the file, not the stream.
type StatusError struct {
	Code uint32
	Msg  string
}

func (e *StatusError) Error() string {
	name := fmt.Sprintf("SSH_FX_%d", e.Code)
	if int(e.Code) < len(statusNames) {
		name = statusNames[e.Code]
	}
	return fmt.Sprintf("sftp: %q (%s)", e.Msg, name)
}

// channelPacket is the channel data one SSH packet carries from OpenSSH's
// sessions (CHAN_SES_PACKET_DEFAULT) and x/crypto's. A write request's
// header goes out in one packet with the start of its data rather than in
// a packet of its own: x/crypto/ssh writes every packet with a system
// call of its own, and a request of 255 KiB then takes 8 rather than 9.
const channelPacket = 32 << 10

// maxSmallReply bounds replies other than DATA (STATUS, HANDLE), which
// carry a message or a handle: anything larger is a broken stream.
const maxSmallReply = 64 << 10

// rawSession is an SFTP session on a channel of its own that carries one
// open file's reads or writes, many requests in flight at once.
type rawSession struct {
	ch     ssh.Channel
	packet int // the most payload one request carries

	// Requests wait in queue while one sender writes; that sender then
	// writes what the others queued, many requests in one SSH packet
	// where they fit (see send).
	qmu     sync.Mutex
	queue   []request
	spare   []request // the queue's other buffer
	writing bool
	settled *sync.Cond // on qmu: broadcast when writing ends
	wbuf    []byte     // the writer's scratch, used by one writer at a time

	mu      sync.Mutex
	nextID  uint32
	pending map[uint32]*call
	err     error      // once set, the session is dead and every call fails with it
	pre     *preOpened // a file opened ahead and not yet taken (OpenReady)
	// guess is the handle the server gives the first file a session
	// opens, where that is known (firstHandle), else "". opened says an
	// OPEN or OPENDIR went out: the guess holds no longer.
	guess  string
	opened bool
	// versionDue says VERSION is still on its way: the session was
	// taken over as soon as its INIT went out (OpenReady), and its first
	// reply is that.
	versionDue bool
}

// call is one request waiting for its reply.
type call struct {
	buf  []byte // where the payload of a DATA reply goes
	n    int    // DATA bytes received
	typ  byte
	body []byte // the rest of any other reply
	err  error
	done chan struct{}
}

var calls = sync.Pool{New: func() any { return &call{done: make(chan struct{}, 1)} }}

func getCall(buf []byte) *call {
	c := calls.Get().(*call)
	c.buf, c.n, c.typ, c.body, c.err = buf, 0, 0, nil, nil
	// A signal left in a pooled call (a call released without its wait)
	// would end the next request's wait before its reply: never reused.
	select {
	case <-c.done:
		c = &call{buf: buf, done: make(chan struct{}, 1)}
	default:
	}
	return c
}

// signal ends c's wait. It never blocks: a call is signalled once, by the
// session it was sent on, and a second signal (a bug) must not stop that
// session's receiver for good, which would hang every call behind it.
func signal(c *call) {
	select {
	case c.done <- struct{}{}:
	default:
	}
}

func putCall(c *call) {
	c.buf, c.body = nil, nil
	calls.Put(c)
}

// openRawSession opens a session channel on conn, starts the sftp
// subsystem on it and says hello. A refused channel comes back as the
// *ssh.OpenChannelError it is, so that MaxSessions can be recognised.
func openRawSession(conn *ssh.Client, packet int) (*rawSession, error) {
	ch, _, err := helloSFTP(conn, nil)
	if err != nil {
		return nil, err
	}
	return newRawSession(ch, packet, sessionStart{guess: firstHandle(conn)}), nil
}

// helloSFTP opens a session channel on conn, starts the sftp subsystem on
// it and exchanges INIT and VERSION. The packets ahead returns (whole SFTP
// packets, length first; ahead may be nil) go out in the same write as
// INIT, before VERSION is in: their replies are the caller's to read.
// ahead is called once the subsystem has started, just before INIT goes
// out, two round trips after the channel was asked for: what it sends
// may depend on answers that came meanwhile (OpenReady).
func helloSFTP(conn *ssh.Client, ahead func() [][]byte) (ssh.Channel, hello, error) {
	ch, err := startSession(conn, ahead)
	if err != nil {
		return nil, hello{}, err
	}
	sent := time.Now()
	h, err := readHello(ch, sent)
	if err != nil {
		_ = ch.Close()
		return nil, hello{}, fmt.Errorf("start sftp session: %w", err)
	}
	return ch, h, nil
}

// startSession is helloSFTP up to INIT and what ahead returns, written
// out: VERSION is the caller's to read, before any other reply.
func startSession(conn *ssh.Client, ahead func() [][]byte) (ssh.Channel, error) {
	ch, reqs, err := conn.OpenChannel("session", nil)
	if err != nil {
		return nil, err
	}
	go ssh.DiscardRequests(reqs)
	// The server's stderr shares the channel's window: unread, it could
	// stall the data.
	go func() { _, _ = io.Copy(io.Discard, ch.Stderr()) }()
	ok, err := ch.SendRequest("subsystem", true, ssh.Marshal(struct{ Name string }{"sftp"}))
	if err == nil && !ok {
		err = errors.New("the server refused the sftp subsystem")
	}
	if err == nil {
		out := sftpPacket(fxpInit, binary.BigEndian.AppendUint32(nil, 3))
		if ahead != nil {
			for _, p := range ahead() {
				out = append(out, p...)
			}
		}
		_, err = ch.Write(out)
	}
	if err != nil {
		_ = ch.Close()
		return nil, fmt.Errorf("start sftp session: %w", err)
	}
	return ch, nil
}

// readHello reads the server's VERSION reply to an INIT sent at sent.
func readHello(r io.Reader, sent time.Time) (hello, error) {
	typ, body, err := readPacket(r)
	switch {
	case err != nil:
		return hello{}, err
	case typ != fxpVersion || len(body) < 4:
		return hello{}, fmt.Errorf("sftp: unexpected reply %d to init", typ)
	}
	return hello{ext: body[4:], rtt: time.Since(sent), sent: sent}, nil
}

// hello is what a server's VERSION reply told.
type hello struct {
	ext  []byte        // the extension pairs announced
	rtt  time.Duration // the round trip of INIT
	sent time.Time     // when INIT went out
}

// sessionStart is what a session's channel carried before it was taken
// over: whether its VERSION is still due, the file opened behind its
// INIT, and the handle its first OPEN will get (rawSession.guess).
type sessionStart struct {
	versionDue bool
	sent       string // the file whose OPEN went out behind INIT (preOpenID), "" for none
	guess      string
}

// newRawSession takes over ch, an SFTP session past its INIT with no
// request in flight but what start says.
func newRawSession(ch ssh.Channel, packet int, start sessionStart) *rawSession {
	s := &rawSession{ch: ch, packet: packet, pending: map[uint32]*call{},
		guess: start.guess, versionDue: start.versionDue}
	s.settled = sync.NewCond(&s.qmu)
	if start.sent != "" {
		c := getCall(nil)
		s.nextID = preOpenID
		s.pending[preOpenID] = c
		s.opened = true
		s.pre = &preOpened{name: start.sent, op: s.await(c, start.sent)}
	}
	go s.receive()
	return s
}

// openSSHFirstHandle is the handle OpenSSH's sftp-server gives the first
// file a session opens: the index of its first handle slot, four bytes
// big-endian.
const openSSHFirstHandle = "\x00\x00\x00\x00"

// firstHandle is the handle the server conn leads to gives the first
// file a session opens, where that is known: OpenSSH's sftp-server, in
// the sshd OpenSSH's version line names. Another server's guess is "".
// A variable for the tests.
var firstHandle = func(conn *ssh.Client) string {
	if conn != nil && bytes.HasPrefix(conn.ServerVersion(), []byte("SSH-2.0-OpenSSH_")) {
		return openSSHFirstHandle
	}
	return ""
}

// settle waits until no request is queued or being written. A failed
// session's requests may still be on their way into the channel, read
// from their callers' buffers, after their calls ended: a caller whose
// write failed waits for this before its buffer can hold anything else,
// so that no request ever carries bytes other than those it was sent
// with, whatever a server still does with it.
func (s *rawSession) settle() {
	s.qmu.Lock()
	defer s.qmu.Unlock()
	for s.writing || len(s.queue) > 0 {
		s.settled.Wait()
	}
}

// Close closes the channel; calls in flight fail.
func (s *rawSession) Close() error {
	return s.ch.Close()
}

// failed reports whether the session is dead.
func (s *rawSession) failed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err != nil
}

// fail marks the session dead with err and ends every call waiting.
func (s *rawSession) fail(err error) {
	s.mu.Lock()
	if s.err == nil {
		s.err = fmt.Errorf("%w: %w", ErrStreamLost, err)
	}
	pending := s.pending
	s.pending = map[uint32]*call{}
	err = s.err
	s.mu.Unlock()
	for _, c := range pending {
		c.err = err
		signal(c)
	}
	_ = s.ch.Close()
}

// receive reads replies and hands each to its call until the channel
// fails.
func (s *rawSession) receive() {
	if s.versionDue {
		if _, err := readHello(s.ch, time.Time{}); err != nil {
			s.fail(err)
			return
		}
	}
	var hdr [9]byte // length, type, request id
	for {
		if _, err := io.ReadFull(s.ch, hdr[:]); err != nil {
			s.fail(err)
			return
		}
		length := binary.BigEndian.Uint32(hdr[:4])
		typ := hdr[4]
		id := binary.BigEndian.Uint32(hdr[5:])
		s.mu.Lock()
		c := s.pending[id]
		delete(s.pending, id)
		s.mu.Unlock()
		if c == nil {
			s.fail(fmt.Errorf("sftp: reply to unknown request %d", id))
			return
		}
		if err := s.readReply(c, typ, int64(length)-5); err != nil {
			c.err = fmt.Errorf("%w: %w", ErrStreamLost, err)
			signal(c)
			s.fail(err)
			return
		}
		c.typ = typ
		signal(c)
	}
}

// readReply reads the rest of a reply of type typ, rest bytes long, into c.
func (s *rawSession) readReply(c *call, typ byte, rest int64) error {
	if rest < 0 {
		return errors.New("sftp: reply too short")
	}
	if typ == fxpData {
		var lb [4]byte
		if rest < 4 {
			return errors.New("sftp: data reply too short")
		}
		if _, err := io.ReadFull(s.ch, lb[:]); err != nil {
			return err
		}
		n := int64(binary.BigEndian.Uint32(lb[:]))
		if n != rest-4 || n > int64(len(c.buf)) || n == 0 {
			return fmt.Errorf("sftp: %d bytes of data in a reply of %d to a read of %d", n, rest, len(c.buf))
		}
		// The count is set only once every byte is in: a reply cut short
		// by a lost stream leaves the rest of the buffer as it was, and
		// counting it would pass those stale bytes off as the file's.
		if _, err := io.ReadFull(s.ch, c.buf[:n]); err != nil {
			return err
		}
		c.n = int(n)
		return nil
	}
	limit := int64(maxSmallReply)
	if typ == fxpName {
		limit = maxNameReply
	}
	if rest > limit {
		return fmt.Errorf("sftp: reply of type %d is %d bytes long", typ, rest)
	}
	c.body = make([]byte, rest)
	_, err := io.ReadFull(s.ch, c.body)
	return err
}

// send registers c and writes one request: its type, a fresh id, the
// fields appended by fields, then data. It fails only when the session
// already has: once c is registered, a failure to write reaches c's wait.
//
// The request may be written by another goroutine, after send returns:
// data must stay as it is until c's reply has come. A sender that finds
// no write in progress writes its request and then whatever other
// senders queued meanwhile, so that the requests of many small files
// share SSH packets (one system call and one encryption each) without
// waiting for one another.
func (s *rawSession) send(c *call, typ byte, fields func([]byte) []byte, data []byte) error {
	s.mu.Lock()
	if s.err != nil {
		err := s.err
		s.mu.Unlock()
		return err
	}
	s.nextID++
	id := s.nextID
	s.pending[id] = c
	if typ == fxpOpen || typ == fxpOpendir {
		s.opened = true
	}
	s.mu.Unlock()

	b := append(make([]byte, 0, 64), 0, 0, 0, 0, typ)
	b = binary.BigEndian.AppendUint32(b, id)
	b = fields(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4+len(data)))

	s.qmu.Lock()
	s.queue = append(s.queue, request{b, data})
	if s.writing {
		s.qmu.Unlock()
		return nil
	}
	s.writing = true
	s.qmu.Unlock()
	s.flush()
	return nil
}

// request is one request waiting to be written: its header, then data.
type request struct {
	hdr, data []byte
}

// copyMax is the most data of one request copied to share a packet with
// others; larger data is written from where it is.
const copyMax = 16 << 10

// flush writes the queue as it is, the sender's own request among it,
// and then lets the next sender write; what other senders queued
// meanwhile is written by a goroutine of its own. A sender that wrote
// until the queue was empty was held there as long as others kept it
// filled: an upload's lanes keep eight writes in flight each, their
// writes wait on the channel's window, and one worker of a lane wrote
// its siblings' chunks for 1.3 s after its own had been acknowledged.
// Its chunk held the copy's watermark, the spread bound stopped every
// lane until the queue ran dry, and the cycle began again (1 GiB up at
// 100 ms: a stall of the whole copy every 1.3 s).
func (s *rawSession) flush() {
	if s.flushQueued() {
		go func() {
			for s.flushQueued() {
			}
		}()
	}
}

// flushQueued writes what is queued, a request at least (the writer
// starts with its own, goes on only when more came, and is the only one
// to take from the queue), and reports whether more was queued
// meanwhile; when not, the writing ends.
func (s *rawSession) flushQueued() bool {
	s.qmu.Lock()
	q := s.queue
	s.queue = s.spare[:0]
	s.qmu.Unlock()

	if err := s.write(q); err != nil {
		s.fail(err)
	}
	clear(q)
	s.qmu.Lock()
	s.spare = q[:0]
	more := len(s.queue) > 0
	if !more {
		s.writing = false
		s.settled.Broadcast()
	}
	s.qmu.Unlock()
	return more
}

// write writes the requests q in order. x/crypto/ssh cuts a channel write
// into packets of channelPacket bytes from its start: the start of large
// data fills the packet its header begins.
func (s *rawSession) write(q []request) error {
	b := s.wbuf[:0]
	defer func() { s.wbuf = b[:0] }()
	for _, r := range q {
		b = append(b, r.hdr...)
		if len(r.data) <= copyMax {
			b = append(b, r.data...)
		} else {
			head := min(len(r.data), channelPacket-len(b)%channelPacket)
			b = append(b, r.data[:head]...)
			if _, err := s.ch.Write(b); err != nil {
				return err
			}
			b = b[:0]
			if _, err := s.ch.Write(r.data[head:]); err != nil {
				return err
			}
		}
		if len(b) >= receiveWindow/4 {
			if _, err := s.ch.Write(b); err != nil {
				return err
			}
			b = b[:0]
		}
	}
	if len(b) > 0 {
		if _, err := s.ch.Write(b); err != nil {
			return err
		}
	}
	return nil
}

// wait waits for c's reply, which should be of type want or a status,
// and returns the error of a failed session or of a status other than OK.
func wait(c *call, want byte) error {
	<-c.done
	switch {
	case c.err != nil:
		return c.err
	case c.typ == fxpStatus:
		err := statusError(c.body)
		if err == nil && want != fxpStatus {
			err = fmt.Errorf("%w: sftp: status OK where a reply of type %d was due", ErrStreamLost, want)
		}
		return err
	case c.typ != want:
		return fmt.Errorf("%w: sftp: reply of type %d where %d was due", ErrStreamLost, c.typ, want)
	}
	return nil
}

// statusError turns the body of a STATUS reply into nil, io.EOF, an fs
// error where one fits, or a *StatusError.
func statusError(body []byte) error {
	if len(body) < 4 {
		return fmt.Errorf("%w: sftp: short status reply", ErrStreamLost)
	}
	code := binary.BigEndian.Uint32(body)
	msg, _, _ := readString(body[4:])
	switch code {
	case fxOK:
		return nil
	case fxEOF:
		return io.EOF
	case fxNoSuchFile:
		return fs.ErrNotExist
	case fxPermissionDenied:
		return fs.ErrPermission
	}
	return &StatusError{Code: code, Msg: msg}
}

// rawFile is a file open on a rawSession.
type rawFile struct {
	s      *rawSession
	handle string
	// opening, when not nil, is the file's OPEN, whose reply may still be
	// on its way: handle is then the session's guess. Reads go out with
	// it behind the OPEN, and what they bring counts only once the reply
	// has come and named that handle (ReadAt). Only a file opened for
	// reading has one (openAhead, takePre); open waits for the reply.
	opening *opening
}

// opening is an OPEN whose reply is awaited apart from the requests that
// follow it (rawSession.await).
type opening struct {
	done   chan struct{} // closed when the reply is in
	handle string        // the handle the file got, once done
	err    error         // why it did not open, once done
}

// await has the reply to the OPEN of name sent as c read into a new
// opening, away from the caller.
func (s *rawSession) await(c *call, name string) *opening {
	op := &opening{done: make(chan struct{})}
	go func() {
		defer close(op.done)
		defer putCall(c)
		err := wait(c, fxpHandle)
		if err == nil {
			if op.handle, _, err = readString(c.body); err != nil {
				err = fmt.Errorf("%w: sftp: %w in handle reply", ErrStreamLost, err)
			}
		}
		if err != nil {
			op.err = &fs.PathError{Op: "open", Path: name, Err: err}
		}
	}()
	return op
}

// open opens the existing file name with SFTP open flags pflags (read
// or write, no create: no attributes go with the request).
func (s *rawSession) open(name string, pflags uint32) (*rawFile, error) {
	if f := s.takePre(name, pflags); f != nil && f.waitOpen() == nil {
		return f, nil
	}
	// Where the file opened ahead did not open, this OPEN says why.
	return s.openAttrs(name, pflags, 0)
}

// openAhead opens the existing file name for reading, like open, but
// where the server's handle for the session's first file is known
// (guess), it returns at once: the file's first reads then go out behind
// its OPEN rather than a round trip after it. Until the reply is in,
// the file's handle is that guess (rawFile.opening).
func (s *rawSession) openAhead(name string) (*rawFile, error) {
	if f := s.takePre(name, fxfRead); f != nil {
		return f, nil
	}
	s.mu.Lock()
	guess := s.guess
	if s.opened || s.err != nil {
		guess = ""
	}
	s.mu.Unlock()
	if guess == "" {
		return s.openAttrs(name, fxfRead, 0)
	}
	c := getCall(nil)
	if err := s.send(c, fxpOpen, func(b []byte) []byte { return appendOpen(b, name, fxfRead, 0) }, nil); err != nil {
		putCall(c)
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	return &rawFile{s: s, handle: guess, opening: s.await(c, name)}, nil
}

// takePre returns the file the session opened ahead when it is name
// opened for reading, its OPEN's reply perhaps still on its way (opening);
// a file opened ahead for nothing is closed.
func (s *rawSession) takePre(name string, pflags uint32) *rawFile {
	s.mu.Lock()
	pre := s.pre
	s.pre = nil
	guess := s.guess
	s.mu.Unlock()
	if pre == nil {
		return nil
	}
	f := &rawFile{s: s, handle: guess, opening: pre.op}
	if pre.name == name && pflags == fxfRead {
		if guess == "" {
			if f.waitOpen() != nil {
				return nil // the stream's own OPEN says why
			}
		}
		return f
	}
	go func() { _ = f.Close() }()
	return nil
}

// waitOpen waits for f's OPEN's reply, if it was still on its way, and
// returns why the file did not open; f's handle is then the server's.
func (f *rawFile) waitOpen() error {
	op := f.opening
	if op == nil {
		return nil
	}
	<-op.done
	if op.err == nil {
		f.handle = op.handle
		f.opening = nil
	}
	return op.err
}

// handleNow is the handle requests for f carry now, and whether it is a
// guess, the OPEN's reply still out; err says the file did not open.
func (f *rawFile) handleNow() (h string, guessed bool, err error) {
	op := f.opening
	if op == nil {
		return f.handle, false, nil
	}
	select {
	case <-op.done:
		return op.handle, false, op.err
	default:
		return f.handle, true, nil
	}
}

// Close closes the file; one that never opened has nothing to close.
func (f *rawFile) Close() error {
	h := f.handle
	if op := f.opening; op != nil {
		<-op.done
		if op.err != nil {
			if errors.Is(op.err, ErrStreamLost) {
				return op.err
			}
			return nil
		}
		h = op.handle
	}
	c := getCall(nil)
	defer putCall(c)
	err := f.s.send(c, fxpClose, func(b []byte) []byte { return appendString(b, h) }, nil)
	if err == nil {
		err = wait(c, fxpStatus)
	}
	return err
}

// piece is one request of a ReadAt or WriteAt.
type piece struct {
	c   *call
	b   []byte
	off int64
	err error // of sending
}

// split cuts b at off into requests of at most f.s.packet bytes.
func (f *rawFile) split(b []byte, off int64) []piece {
	ps := make([]piece, 0, (len(b)+f.s.packet-1)/f.s.packet)
	for len(b) > 0 {
		n := min(len(b), f.s.packet)
		ps = append(ps, piece{b: b[:n], off: off})
		b, off = b[n:], off+int64(n)
	}
	return ps
}

// ReadAt reads len(b) bytes at off, all requests in flight at once. A
// short reply is followed by a read of the rest: servers may return less
// than asked (OpenSSH caps a reply at 255 KiB) without being at the end.
// While the file's OPEN is unanswered the reads carry the guessed handle
// (openAhead); their replies count only once the OPEN's reply has named
// it, and are asked for again with the file's handle where it did not.
func (f *rawFile) ReadAt(b []byte, off int64) (int, error) {
	h, guessed, err := f.handleNow()
	if err != nil {
		return 0, err
	}
	ps := f.split(b, off)
	for i := range ps {
		ps[i].c = getCall(ps[i].b)
		ps[i].err = f.s.send(ps[i].c, fxpRead, rangeFields(h, ps[i].off, len(ps[i].b)), nil)
	}
	if guessed {
		op := f.opening
		<-op.done
		if op.err != nil || op.handle != h {
			// Sent with a handle the file did not get, or it did not
			// open: what came back is nobody's. Every reply is in
			// before b is read into again.
			for _, p := range ps {
				if p.err == nil {
					<-p.c.done
				}
				putCall(p.c)
			}
			if op.err != nil {
				return 0, op.err
			}
			return f.ReadAt(b, off)
		}
	}
	n := 0
	var first error
	for _, p := range ps {
		err := p.err
		if err == nil {
			err = wait(p.c, fxpData)
		}
		got := 0
		switch {
		case err == nil:
			got = p.c.n
		case guessed && !errors.Is(err, ErrStreamLost):
			// A server that took the read before the OPEN: asked again
			// with the handle now known.
			err = nil
		}
		putCall(p.c)
		for err == nil && got < len(p.b) {
			var m int
			m, err = f.readOnce(h, p.b[got:], p.off+int64(got))
			got += m
		}
		if first == nil {
			n += got
			first = err
		}
	}
	return n, first
}

// readOnce sends one read request with handle h and waits for it.
func (f *rawFile) readOnce(h string, b []byte, off int64) (int, error) {
	c := getCall(b)
	defer putCall(c)
	err := f.s.send(c, fxpRead, rangeFields(h, off, len(b)), nil)
	if err == nil {
		err = wait(c, fxpData)
	}
	if err != nil {
		return 0, err
	}
	return c.n, nil
}

// rangeFields writes the fields a READ and a WRITE begin with: the
// handle, the offset and n, the bytes to read or the length of the data
// written, which follows.
func rangeFields(handle string, off int64, n int) func([]byte) []byte {
	return func(b []byte) []byte {
		b = appendString(b, handle)
		b = binary.BigEndian.AppendUint64(b, uint64(off))
		return binary.BigEndian.AppendUint32(b, uint32(n))
	}
}

// WriteAt writes b at off, all requests in flight at once; on failure
// the count is that of the requests before the first that failed.
func (f *rawFile) WriteAt(b []byte, off int64) (int, error) {
	ps := f.split(b, off)
	for i := range ps {
		p := &ps[i]
		p.c = getCall(nil)
		p.err = f.s.send(p.c, fxpWrite, rangeFields(f.handle, p.off, len(p.b)), p.b)
		if p.err != nil {
			// The session has failed: the rest would too.
			ps = ps[:i+1]
			break
		}
	}
	n := 0
	var first error
	for _, p := range ps {
		err := p.err
		if err == nil {
			err = wait(p.c, fxpStatus)
		}
		putCall(p.c)
		if first == nil {
			if err != nil {
				first = err
			} else {
				n += len(p.b)
			}
		}
	}
	if first != nil && f.s.failed() {
		f.s.settle()
	}
	return n, first
}
