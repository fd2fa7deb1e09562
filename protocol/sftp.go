// Package protocol speaks the wire protocols hpncp moves files with over
// SSH: SFTP to any stock server, and the streams of remote commands.
package protocol

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sync"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"

	"github.com/hpncp/hpncp/internal/starttrace"
)

// receiveWindow is the flow-control window x/crypto/ssh gives every
// channel it receives on (channelWindowSize, not configurable): more data
// in flight on one channel would only wait behind it.
const receiveWindow = 2 << 20

// posixRename is OpenSSH's extension for a rename that replaces its target
// atomically; plain SFTP rename refuses an existing target.
const posixRename = "posix-rename@openssh.com"

// SFTP is a remote file system reached over SFTP. Its methods have the
// shape transfer.FS asks for; metadata goes over one main session, and
// OpenReaderAt and OpenWriterAt open files on sessions of their own, over
// as many connections as asked, for parallel transfers. Those sessions,
// and Open's, speak SFTP directly (stream.go) rather than through
// pkg/sftp, to keep the data path free of copies and allocations.
type SFTP struct {
	// mc is the main session, for metadata; it is started again on a
	// live connection when the one under it is lost (see onMain).
	mc    mainClient
	label string
	// atomicRename is set when the server offers posix-rename.
	atomicRename bool
	packet       int
	pool         *pool
	batch        *batcher // sessions for PutSmall and GetSmall
	rtt          func() time.Duration
	reqRTT       time.Duration // an SFTP request's round trip, measured at start
	ping         ping          // one more request's, sent once the start is over
	tar          tarConn       // tar mode's connection (tar.go)
	lister       lister        // the session of listings (readdir.go)
	early        earlyStats    // the stats asked for with the start (early.go)
	created      created       // the temporary file the start created (precreate.go)
}

// Options say how to open an SFTP end.
type Options struct {
	// Label prefixes paths in messages ("host:").
	Label string
	// Dial opens another connection to the same host, authenticated as
	// the first; nil keeps every session on the first connection. It may
	// bring sessions being opened on it ahead of need (Readying,
	// OpenReady), which the streams then take as they come.
	Dial func(context.Context) (*ssh.Client, Readying, error)
	// Ahead is how many SFTP sessions a connection carries for the
	// streams of a copy whose plan is known before the SFTP start (ends'
	// Predial); AheadConns how many of the connections Dial returns
	// bring that many, opened as soon as they were up (OpenReady). The
	// first connection opens its own beside the SFTP start, whose spare
	// session counts as one. The streams then start on sessions ready
	// when the copy starts rather than three round trips after, and
	// PrepareStreams opens none in place of those still to come.
	Ahead, AheadConns int
	// PreCreate, when not nil, is the temporary file an upload of one
	// small file will write: the start creates it behind the early stat
	// (precreate.go), which must ask for PreCreate.Final.
	PreCreate *PreCreate
	// PreOpen, when not nil, names the file a download of one file
	// reads: the start tells it whether the file is a regular one, for
	// the sessions opened ahead after that to open it (OpenReady).
	PreOpen *PreOpen
	// Logf, when not nil, is told of connections opened and refused.
	Logf func(format string, args ...any)
	// RTT, when not nil, measures the path's round-trip time.
	RTT func() time.Duration
	// Reconnect bounds how long the sessions' connections are dialed
	// again once every one is lost; DefaultReconnect when zero.
	Reconnect time.Duration
	// Silent, when not nil, returns why a connection that ended was given
	// up for its server's silence (unanswered keepalives), or nil: then
	// no connection is dialed again.
	Silent func(*ssh.Client) error
	// Trace, when not nil, is told when the SFTP sessions are ready.
	Trace *starttrace.Trace
	// Stat names paths whose stat and lstat are asked for with the
	// sessions' start (early.go): the end's first Stat or Lstat, when it
	// is of one of them, takes that answer instead of a round trip of its
	// own.
	Stat []string
}

// clientOptions are pkg/sftp's options for a main session whose requests
// carry up to packet bytes.
func clientOptions(packet int) []sftp.ClientOption {
	return []sftp.ClientOption{
		sftp.MaxPacketUnchecked(packet),
		sftp.UseConcurrentWrites(true),
		sftp.UseConcurrentReads(true),
		// Enough requests in flight to cover a 2 MiB channel window and
		// the next one: the window, not the request count, is the limit.
		sftp.MaxConcurrentRequestsPerFile(max(64, 2*(2<<20)/packet)),
	}
}

// mainClient holds the main session, replaced when its connection is lost.
type mainClient struct {
	mu sync.Mutex
	c  *sftp.Client
}

func (m *mainClient) current() *sftp.Client {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.c
}

// onMain runs op on the main session. When op fails because the
// connection under the session is gone, the session is started again on
// a live connection (the pool dials one within its reconnect budget) and
// op runs once more there: a copy whose streams went on over new
// connections need not fail at its rename for want of the first one.
// Every op is one that may run twice: a lookup, or a change whose repeat
// fails without harm.
func (s *SFTP) onMain(op func(c *sftp.Client) error) error {
	s.early.drop()
	c := s.mc.current()
	err := op(c)
	if err == nil || !mainLost(err) {
		return err
	}
	c2, rerr := s.restartMain(c)
	if rerr != nil {
		return fmt.Errorf("%w (connecting again: %w)", err, rerr)
	}
	return op(c2)
}

// mainLost reports whether err from pkg/sftp says its session's
// connection is gone: no SFTP reply is io.EOF.
func mainLost(err error) bool {
	return Lost(err) || errors.Is(err, io.EOF)
}

// restartMain replaces old, the main session, with one on a live
// connection, unless another caller has already done so.
func (s *SFTP) restartMain(old *sftp.Client) (*sftp.Client, error) {
	s.mc.mu.Lock()
	defer s.mc.mu.Unlock()
	if s.mc.c != old {
		return s.mc.c, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.pool.reconnect+time.Second)
	defer cancel()
	var c *sftp.Client
	// A connection's death is known a moment after its sessions see it:
	// the one the pool offers may be on its way out too.
	for try := 1; c == nil; try++ {
		conn, err := s.pool.liveConn(ctx)
		if err != nil {
			return nil, err
		}
		c, err = sftp.NewClient(conn, clientOptions(s.packet)...)
		if err != nil {
			if !connGone(err) || try == maxOpenTries {
				return nil, &ConnError{Err: fmt.Errorf("start sftp session again: %w", err)}
			}
			s.pool.gone(conn)
		}
	}
	_ = old.Close()
	s.mc.c = c
	s.pool.logf("the main sftp session is started again on a new connection")
	return c, nil
}

// OpenSFTP starts an SFTP session on conn, with requests as large as the
// server accepts (see startSFTP).
func OpenSFTP(conn *ssh.Client, o Options) (*SFTP, error) {
	logf := o.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	ahead := StartReady(conn, o.Ahead-1, o.PreOpen) // the start's spare session is one
	var files startFiles
	if o.PreCreate != nil {
		files = startFiles{create: o.PreCreate.Temp, probe: o.PreCreate.Probe}
	}
	st, err := startSFTP(conn, clientOptions, o.Stat, files)
	if err != nil {
		if ahead.Wait != nil {
			for _, r := range ahead.Wait() {
				_ = r.ch.Close()
			}
		}
		return nil, fmt.Errorf("start sftp session on %s %w", o.Label, err)
	}
	limits := st.limits
	packet := limits.Packet()
	logf("sftp requests of up to %d bytes (server limits read %d, write %d)", packet, limits.MaxRead, limits.MaxWrite)
	_, ok := st.c.HasExtension(posixRename)
	p := newPool(conn, 1, o.Dial, packet, logf)
	p.mu.Lock()
	if o.Reconnect > 0 {
		p.reconnect = o.Reconnect
	}
	p.silent = o.Silent
	p.aheadConns, p.aheadSessions = o.AheadConns, o.Ahead
	p.mu.Unlock()
	var spare *rawSession
	if st.spare != nil {
		spare = newRawSession(st.spare, packet, sessionStart{})
		p.adopt(spare)
	}
	if o.PreOpen != nil {
		if a, ok := st.early[earlyKey{o.PreOpen.Name, false}]; ok && a.err == nil && a.fi.Mode().IsRegular() {
			o.PreOpen.regular.Store(true)
		}
	}
	p.expect(p.conns[0], ahead.N, ahead.Wait)
	o.Trace.Mark(starttrace.SFTP)
	s := &SFTP{
		mc: mainClient{c: st.c}, label: o.Label, atomicRename: ok, packet: packet,
		pool:   p,
		batch:  &batcher{p: p, ready: make(chan struct{})},
		rtt:    o.RTT,
		reqRTT: limits.RTT,
		early:  earlyStats{m: st.early},
	}
	s.ping.send(st.c)
	if o.PreCreate != nil && spare != nil {
		c := &s.created
		c.rs, c.final, c.name, c.handle = spare, o.PreCreate.Final, o.PreCreate.Temp, st.made.handle
		c.mask, c.maskKnown = st.made.mask, st.made.maskKnown
		if st.made.probeLeft {
			c.probeLeft = o.PreCreate.Probe
		}
	}
	return s, nil
}

// Close ends every session and the connections the SFTP end opened; the
// first connection stays open.
func (s *SFTP) Close() error {
	s.closeTar()
	s.batch.close()
	s.lister.close(s.pool)
	s.pool.close()
	return s.mc.current().Close()
}

// Packet is the request payload size in use.
func (s *SFTP) Packet() int { return s.packet }

// OpenReaderAt opens name for reading on a session of its own, placed
// among up to conns connections. Close returns the session to the pool.
func (s *SFTP) OpenReaderAt(ctx context.Context, name string, conns int) (ReaderAtCloser, error) {
	return s.openStream(ctx, name, fxfRead, conns)
}

// OpenWriterAt opens the existing file name for writing at offsets on a
// session of its own, like OpenReaderAt.
func (s *SFTP) OpenWriterAt(ctx context.Context, name string, conns int) (WriterAtCloser, error) {
	return s.openStream(ctx, name, fxfWrite, conns)
}

// PrepareStreams starts opening, in the background, the sessions that
// OpenReaderAt and OpenWriterAt will want for a copy about to start:
// until streams are idle or on their way, over up to conns connections.
// Their set-up then overlaps the copy's own round trips (the target's
// stat, the temporary file) rather than following them.
func (s *SFTP) PrepareStreams(ctx context.Context, streams, conns int) {
	s.pool.prepare(ctx, streams, conns)
}

// Standby has the host's connections grow, in the background, to conns
// in all, live or dialing; the new ones carry no stream until a plan
// asks for more connections than it had (see pool.standby).
func (s *SFTP) Standby(conns int) {
	s.pool.standby(conns)
}

// ReaderAtCloser and WriterAtCloser are files opened for parallel I/O.
type (
	ReaderAtCloser interface {
		io.ReaderAt
		io.Closer
	}
	WriterAtCloser interface {
		io.WriterAt
		io.Closer
	}
)

// streamFile is a file open on a session of its own. Its errors say
// what failed: a status from the server is about the file, anything else
// wraps ErrStreamLost.
type streamFile struct {
	*rawFile
	s    *session
	pool *pool
}

// Conn numbers the connection the file's session is on, from 0 in the
// order the pool opened them: a copy that stops some of its streams
// stops them where they crowd (pipeline.Stream.Conn).
func (f *streamFile) Conn() int { return f.s.pc.id }

// Abort gives the file's session up: its reads in flight fail at once,
// their buffers no longer written into, and so does every later request
// (pipeline.Stream.Abort). The session is not used again.
func (f *streamFile) Abort() {
	f.s.rawSession.fail(errAbandoned)
}

// errAbandoned is why the requests of an abandoned session failed.
var errAbandoned = errors.New("abandoned: its bytes came over another stream")

func (f *streamFile) Close() error {
	err := f.rawFile.Close()
	// A session whose close failed may be on a broken connection: drop it.
	f.pool.release(f.s, err != nil)
	return err
}

// maxOpenTries bounds how many sessions one open tries: an idle session
// may sit on a connection that died since it was released, and the next
// is then as likely to work as the first was.
const maxOpenTries = 8

func (s *SFTP) openStream(ctx context.Context, name string, pflags uint32, conns int) (*streamFile, error) {
	s.early.drop()
	for try := 1; ; try++ {
		sess, err := s.pool.acquireStream(ctx, conns)
		if err != nil {
			return nil, err
		}
		var f *rawFile
		if pflags == fxfRead {
			f, err = sess.openAhead(name)
		} else {
			f, err = sess.open(name, pflags)
		}
		if err == nil {
			return &streamFile{f, sess, s.pool}, nil
		}
		lost := errors.Is(err, ErrStreamLost)
		s.pool.release(sess, lost)
		if !lost || try == maxOpenTries || ctx.Err() != nil {
			return nil, err
		}
	}
}

// RTT returns the path's round-trip time, or 0 when it cannot be told.
//
// It is the kernel's estimate for the connections, unless the round trip
// of an SFTP request measured at start is well above it (relayed): through
// a relay, a jump host or a proxy the kernel sees only the first hop, and
// a path taken for a LAN would get one stream. Otherwise the request's
// round trip, which also holds the server's time to answer, is not taken
// for the path's: with the connections dialed ahead authenticating on
// the server at that moment, it reads well above the path, the first
// plan asks for more connections than were dialed for it, and its
// streams wait a dial for the last.
//
// The request's round trip is the lesser of two requests': the second
// is sent once the start is over. The start's own waits for the server
// to start its SFTP subsystem, which on a short path under load (the
// connections dialed beside it authenticating) takes tens of
// milliseconds: a loopback copy would be planned for a path of 40 ms. When the start's request reads
// as relayed and the second has not come back, RTT waits for it, at most
// as long as the first took; without a kernel estimate, it takes the
// second only when it is back.
func (s *SFTP) RTT() time.Duration {
	var kernel time.Duration
	if s.rtt != nil {
		kernel = s.rtt()
	}
	req := s.reqRTT
	switch {
	case kernel > 0 && req > kernel*relayedPct/100:
		if p, ok := s.ping.wait(req); ok {
			req = min(req, p)
		}
	case kernel == 0:
		// Nothing to check the request against (a ProxyJump, a
		// ProxyCommand): the second is taken only when it is back.
		if p, ok := s.ping.wait(0); ok {
			req = min(req, p)
		}
	}
	if kernel > 0 && req <= kernel*relayedPct/100 {
		return kernel
	}
	return max(kernel, req)
}

// ping times one SFTP request on the main session, sent in the
// background.
type ping struct {
	done chan struct{} // closed when rtt is set; nil before send
	rtt  time.Duration // 0 when the request failed
}

// send times a REALPATH of "." on c, a request every server answers
// without touching a file's data.
func (p *ping) send(c *sftp.Client) {
	p.done = make(chan struct{})
	go func() {
		defer close(p.done)
		start := time.Now()
		if _, err := c.RealPath("."); err == nil {
			p.rtt = time.Since(start)
		}
	}()
}

// wait returns the request's round trip once it is back, waiting at
// most d; ok is false when it is not back by then or failed.
func (p *ping) wait(d time.Duration) (rtt time.Duration, ok bool) {
	if p.done == nil {
		return 0, false
	}
	select {
	case <-p.done:
		return p.rtt, p.rtt > 0
	default:
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.done:
		return p.rtt, p.rtt > 0
	case <-t.C:
		return 0, false
	}
}

// relayedPct is how much of the kernel's round trip, in percent, an SFTP
// request's must take for the path to be taken for one the kernel sees
// only the first hop of.
const relayedPct = 150

func (s *SFTP) Label() string { return s.label }

// Changed tells s that something other than its own requests changed the
// server's files (a helper rewrote one): no answer kept from the start
// (early.go) holds any more.
func (s *SFTP) Changed() { s.early.drop() }

func (s *SFTP) Stat(name string) (fs.FileInfo, error) {
	if a, ok := s.early.take(name, false); ok {
		return a.fi, a.err
	}
	var fi fs.FileInfo
	err := s.onMain(func(c *sftp.Client) (err error) { fi, err = c.Stat(name); return })
	return fi, err
}

func (s *SFTP) lstat(name string) (fs.FileInfo, error) {
	var fi fs.FileInfo
	err := s.onMain(func(c *sftp.Client) (err error) { fi, err = c.Lstat(name); return })
	return fi, err
}

func (s *SFTP) ReadDir(name string) ([]fs.FileInfo, error) {
	return s.ReadDirContext(context.Background(), name)
}

func (s *SFTP) Glob(pattern string) ([]string, error) {
	var names []string
	err := s.onMain(func(c *sftp.Client) (err error) { names, err = c.Glob(pattern); return })
	return names, err
}

// Open opens name to be read front to back. The reads go on a session of
// their own, requests in flight ahead of the reader (see aheadReader);
// where the server allows no session beyond the main one, on that.
func (s *SFTP) Open(name string) (io.ReadCloser, error) {
	sess, err := s.pool.acquire(context.Background(), 1)
	if err != nil {
		return s.mc.current().Open(name)
	}
	f, err := sess.open(name, fxfRead)
	if err != nil {
		s.pool.release(sess, errors.Is(err, ErrStreamLost))
		return nil, err
	}
	// The window's worth, and one more to be sent as the window opens.
	max := (receiveWindow+s.packet-1)/s.packet + 1
	return newAheadReader(&streamFile{f, sess, s.pool}, s.packet, max), nil
}

// CreateExclusive creates name, failing with fs.ErrExist if it exists.
// The file is created owner-only (0600), in the OPEN request itself: a
// file created with the server's default mode and narrowed after could
// be opened by anyone in between, and read as it fills. The copy gives
// it its final mode before it takes its name. The writes go on a session
// of their own, as Open's reads; where the server allows none beyond the
// main one, pkg/sftp creates the file (it sends no mode) and narrows it
// at once, before any byte is written.
func (s *SFTP) CreateExclusive(name string) (io.WriteCloser, error) {
	var f *rawFile
	var sess *session
	// mayExist says an OPEN of name whose reply was lost may have made
	// the file on the server. Temporary names are random and this copy's
	// own, so an empty file under it is that one: removed, and the name
	// tried again, it is not left behind as an orphan. The name is tried
	// again only once the server has said what is there: when the stat
	// was lost too, the retry failed as existing, the caller took a new
	// name, and the run ended 0 with the first one left behind (fault
	// seed 9101, spares taken before their sessions were up).
	mayExist := false
	for try := 1; f == nil; try++ {
		var err error
		if sess, err = s.pool.acquire(context.Background(), 1); err != nil {
			if mayExist {
				if err := s.dropOwn(name); err != nil {
					return nil, err
				}
			}
			return s.createMain(name)
		}
		f, err = sess.openAttrs(name, fxfWrite|fxfCreat|fxfExcl, 0o600)
		if err == nil {
			break
		}
		lost := errors.Is(err, ErrStreamLost)
		s.pool.release(sess, lost)
		mayExist = mayExist || lost
		if !mayExist || try == maxOpenTries {
			return nil, s.createError(name, err)
		}
		if derr := s.dropOwn(name); errors.Is(derr, fs.ErrExist) {
			return nil, derr
		}
		// Any other failure to tell is asked again after the next try.
	}
	sf := &streamFile{f, sess, s.pool}
	// WriterAt is for sparse copies, which write at offsets.
	return struct {
		io.Writer
		io.WriterAt
		io.Closer
	}{io.NewOffsetWriter(sf, 0), sf, sf}, nil
}

// dropOwn removes name where it is an empty regular file, made by a
// create of this copy whose reply was lost (CreateExclusive). It fails
// with fs.ErrExist where something else is there, and with the server's
// error where it could not tell.
func (s *SFTP) dropOwn(name string) error {
	fi, err := s.lstat(name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	case !fi.Mode().IsRegular() || fi.Size() != 0:
		return &fs.PathError{Op: "create", Path: name, Err: fs.ErrExist}
	}
	if err := s.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// createMain is CreateExclusive on the main session.
func (s *SFTP) createMain(name string) (io.WriteCloser, error) {
	var f *sftp.File
	err := s.onMain(func(c *sftp.Client) (err error) {
		f, err = c.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL)
		return
	})
	if err != nil {
		return nil, s.createError(name, err)
	}
	if err := f.Chmod(0o600); err != nil {
		_ = f.Close()
		_ = s.Remove(name)
		return nil, err
	}
	return f, nil
}

// createError is the error of a failed exclusive create of name.
func (s *SFTP) createError(name string, err error) error {
	// SFTP v3 has no "exists" status: OpenSSH answers a plain failure.
	if _, serr := s.lstat(name); serr == nil {
		return &fs.PathError{Op: "create", Path: name, Err: fs.ErrExist}
	}
	return err
}

func (s *SFTP) Mkdir(name string) error {
	return s.onMain(func(c *sftp.Client) error { return c.Mkdir(name) })
}

// Rename replaces newname with oldname. Without posix-rename the server
// cannot replace atomically, so the old target is removed first: the only
// window in which neither exists.
func (s *SFTP) Rename(oldname, newname string) error {
	if s.atomicRename {
		return s.onMain(func(c *sftp.Client) error { return c.PosixRename(oldname, newname) })
	}
	rename := func(c *sftp.Client) error { return c.Rename(oldname, newname) }
	err := s.onMain(rename)
	if err == nil {
		return nil
	}
	if _, serr := s.lstat(newname); serr != nil {
		return err
	}
	if rerr := s.Remove(newname); rerr != nil {
		return errors.Join(err, rerr)
	}
	return s.onMain(rename)
}

func (s *SFTP) Remove(name string) error {
	return s.onMain(func(c *sftp.Client) error { return c.Remove(name) })
}

func (s *SFTP) Chmod(name string, mode fs.FileMode) error {
	return s.onMain(func(c *sftp.Client) error { return c.Chmod(name, mode) })
}

// Truncate sets the size of name (an SFTP setstat of the size): how a
// sparse copy gives a file that ends in a hole its last bytes, which
// were never written.
func (s *SFTP) Truncate(name string, size int64) error {
	return s.onMain(func(c *sftp.Client) error { return c.Truncate(name, size) })
}

func (s *SFTP) Chtimes(name string, atime, mtime time.Time) error {
	return s.onMain(func(c *sftp.Client) error { return c.Chtimes(name, atime, mtime) })
}

func (s *SFTP) Abs(name string) (string, error) {
	var p string
	err := s.onMain(func(c *sftp.Client) (err error) { p, err = c.RealPath(name); return })
	return p, err
}

// ReadLink returns the target of the symbolic link name, as stored.
func (s *SFTP) ReadLink(name string) (string, error) {
	var target string
	err := s.onMain(func(c *sftp.Client) (err error) { target, err = c.ReadLink(name); return })
	return target, err
}

func (s *SFTP) Join(elem ...string) string { return path.Join(elem...) }
func (s *SFTP) Dir(name string) string     { return path.Dir(name) }
func (s *SFTP) Base(name string) string    { return path.Base(name) }
