package protocol

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sync"
	"time"

	"github.com/hpncp/hpncp/internal/starttrace"
)

// Small files cost round trips, not bandwidth: at 50 ms a file sent with
// one request after another (stat, open, write, close, stat, chmod,
// rename) takes a third of a second. PutSmall and GetSmall send the
// requests that depend only on an earlier one's success, not on its
// answer, without waiting: OpenSSH's sftp-server answers a channel's
// requests in order. An upload then takes three round trips (open; the
// writes, close, setstat and stat; rename) and a download two (open; the
// reads, fstat and close), and many files are in flight at once over a
// few sessions of their own.

// SmallMax is the largest file PutSmall and GetSmall take: its bytes are
// held in memory, once per file in flight.
const SmallMax = 256 << 10

// Bounds of the sessions that carry small files: a few sessions, leaving
// most of the server's MaxSessions (10 by default) to parallel streams,
// each with a bounded number of files open at once, so that the server's
// open files stay well below its descriptor limit.
const (
	batchSessions = 4
	batchPerSess  = 256
)

// PutAttrs say what a file written by PutSmall gets besides its bytes.
type PutAttrs struct {
	// Perm is the permission the file is created with, which the server's
	// umask may narrow: owner-only (0600) for a temporary file, which
	// SetMode then gives its final mode.
	Perm fs.FileMode
	// SetMode sets Mode exactly once the bytes are written (-p, or the
	// mode of the file being replaced).
	SetMode bool
	Mode    fs.FileMode
	// SetTimes sets the access and modification times (-p).
	SetTimes     bool
	Atime, Mtime time.Time
	// Final, when not nil, gives SetMode, Mode and the times in place of
	// the fields above, and is called once the open is answered: working
	// the final mode out may wait on a round trip of its own (the
	// receiving end's umask, learnt once a run), which then goes beside
	// the open's instead of before it.
	Final func() PutAttrs
}

// ErrSizeMismatch is the cause of a PutSmall failure where the written
// file's size on the server is not the number of bytes sent.
var ErrSizeMismatch = errors.New("size on the server differs from the bytes sent")

// PutSmall writes data to the new file tmp (which must not exist) with
// attributes a, checks that the server holds len(data) bytes, and only
// then renames tmp to name, replacing it. On any failure, and when ctx is
// done before the rename, tmp is removed and name left as it was. With
// tmp equal to name there is no rename: the caller writes into a
// directory nobody sees until it renames the directory into place.
func (s *SFTP) PutSmall(ctx context.Context, tmp, name string, data []byte, a PutAttrs) error {
	if len(data) > SmallMax {
		return fmt.Errorf("put %s: %d bytes is more than %d", name, len(data), SmallMax)
	}
	// The temporary file created with the start (PreCreate) is written
	// on the session that holds its handle; any other is opened on a
	// batch session.
	var bs *batchSession
	rs, f := s.takeCreated(tmp)
	if f != nil {
		s.early.drop()
	} else {
		var err error
		if bs, err = s.getBatch(ctx); err != nil {
			return err
		}
		defer s.batch.put(bs)
		rs = bs.s.rawSession
		if f, err = rs.openAttrs(tmp, fxfWrite|fxfCreat|fxfExcl, a.Perm); err != nil {
			s.batch.drop(bs, err)
			return err
		}
	}
	if a.Final != nil {
		perm := a.Perm
		a = a.Final()
		a.Perm = perm
	}
	// After the close the file is addressed by name: a server that runs a
	// handle's writes concurrently (pkg/sftp's does) still finishes them
	// before it closes the handle, so the setstat and stat see them all.
	var cs []*call
	defer func() {
		for _, c := range cs {
			putCall(c)
		}
	}()
	sendc := func(typ byte, fields func([]byte) []byte, data []byte) *call {
		c := getCall(nil)
		cs = append(cs, c)
		if err := rs.send(c, typ, fields, data); err != nil {
			c.err = err
			c.done <- struct{}{}
		}
		return c
	}
	starttrace.From(ctx).Mark(starttrace.FirstByte)
	var writes []*call
	for off := 0; off < len(data); off += rs.packet {
		p := data[off:min(off+rs.packet, len(data))]
		o := int64(off)
		writes = append(writes, sendc(fxpWrite, func(h []byte) []byte {
			h = appendString(h, f.handle)
			h = binary.BigEndian.AppendUint64(h, uint64(o))
			return binary.BigEndian.AppendUint32(h, uint32(len(p)))
		}, p))
	}
	closing := sendc(fxpClose, func(b []byte) []byte { return appendString(b, f.handle) }, nil)
	var setstat *call
	if attrs := setAttrs(a); attrs != nil {
		setstat = sendc(fxpSetstat, func(b []byte) []byte { return append(appendString(b, tmp), attrs...) }, nil)
	}
	stat := sendc(fxpStat, func(b []byte) []byte { return appendString(b, tmp) }, nil)

	var first error
	note := func(op string, err error) {
		if err != nil && first == nil {
			first = &fs.PathError{Op: op, Path: tmp, Err: err}
		}
	}
	for _, c := range writes {
		note("write", wait(c, fxpStatus))
	}
	note("close", wait(closing, fxpStatus))
	if setstat != nil {
		note("setstat", wait(setstat, fxpStatus))
	}
	if err := wait(stat, fxpAttrs); err != nil {
		note("stat", err)
	} else if fi, err := parseAttrs(stat.body, tmp); err != nil {
		note("stat", fmt.Errorf("%w: sftp: %w in attributes", ErrStreamLost, err))
	} else if fi.Size() != int64(len(data)) {
		note("write", fmt.Errorf("%w: %d bytes arrived of %d sent", ErrSizeMismatch, fi.Size(), len(data)))
	}
	if first == nil {
		first = ctx.Err()
	}
	if first == nil && tmp != name {
		if err := s.rename(rs, tmp, name); err != nil {
			first = &fs.PathError{Op: "rename", Path: tmp, Err: err}
		}
	}
	if first != nil {
		// The removal must happen even when ctx was cancelled: that is when
		// a half-written temporary file is most likely.
		if rs.simple(fxpRemove, func(b []byte) []byte { return appendString(b, tmp) }) != nil {
			_ = s.Remove(tmp)
		}
		if bs != nil {
			s.batch.drop(bs, first)
		}
		return first
	}
	return nil
}

// GetSmall reads all of name, expected to be size bytes long, in one
// batch of requests, and returns its bytes with its attributes as the
// server gave them once the reads were done. It fails when the file's
// size is not size.
func (s *SFTP) GetSmall(ctx context.Context, name string, size int64) ([]byte, fs.FileInfo, error) {
	if size > SmallMax || size < 0 {
		return nil, nil, fmt.Errorf("get %s: %d bytes is more than %d", name, size, SmallMax)
	}
	bs, err := s.getBatch(ctx)
	if err != nil {
		return nil, nil, err
	}
	defer s.batch.put(bs)
	rs := bs.s.rawSession

	f, err := rs.open(name, fxfRead) // the file opened ahead, if it is name
	if err != nil {
		s.batch.drop(bs, err)
		return nil, nil, err
	}
	buf := make([]byte, size)
	type read struct {
		c   *call
		b   []byte
		off int64
	}
	var reads []read
	var sendErr error
	for off := 0; off < len(buf) && sendErr == nil; off += rs.packet {
		b := buf[off:min(off+rs.packet, len(buf))]
		c := getCall(b)
		sendErr = rs.send(c, fxpRead, rangeFields(f.handle, int64(off), len(b)), nil)
		if sendErr != nil {
			putCall(c)
			break
		}
		reads = append(reads, read{c, b, int64(off)})
	}
	fstat, closing := getCall(nil), getCall(nil)
	defer putCall(fstat)
	defer putCall(closing)
	// A call once sent is waited for, whatever failed after it: the
	// session signals it, and a pooled call must not hold that signal.
	fstatSent, closeSent := false, false
	if sendErr == nil {
		sendErr = rs.send(fstat, fxpFstat, func(b []byte) []byte { return appendString(b, f.handle) }, nil)
		fstatSent = sendErr == nil
	}
	if sendErr == nil {
		sendErr = rs.send(closing, fxpClose, func(b []byte) []byte { return appendString(b, f.handle) }, nil)
		closeSent = sendErr == nil
	}

	first := sendErr
	for i, r := range reads {
		err := wait(r.c, fxpData)
		if i == 0 && err == nil {
			starttrace.From(ctx).Mark(starttrace.FirstByte)
		}
		got := r.c.n
		putCall(r.c)
		switch {
		case errors.Is(err, io.EOF) && !Lost(err):
			// The server's EOF status; a session lost on its channel's
			// EOF says io.EOF too, and is a lost stream, to be tried
			// again, not a file that shrank.
			err = fmt.Errorf("file changed size during the copy: expected %d bytes, read %d", size, r.off)
		case err == nil && got < len(r.b):
			// A server may answer with less than asked without being at
			// the end; the handle is closed by now, so the file goes
			// the ordinary way, which asks again.
			err = fmt.Errorf("%w: the server answered a read of %d bytes with %d", ErrNoBatch, len(r.b), got)
		}
		if err != nil && first == nil {
			first = err
		}
	}
	var fi fs.FileInfo
	if fstatSent {
		if err := wait(fstat, fxpAttrs); err != nil {
			first = cmpOr(first, err)
		} else if fi, err = parseAttrs(fstat.body, name); err != nil {
			first = cmpOr(first, fmt.Errorf("%w: sftp: %w in attributes", ErrStreamLost, err))
		} else if fi.Size() != size && first == nil {
			first = fmt.Errorf("file changed size during the copy: expected %d bytes, it now has %d", size, fi.Size())
		}
	}
	if closeSent {
		if err := wait(closing, fxpStatus); err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		s.batch.drop(bs, first)
		return nil, nil, &fs.PathError{Op: "read", Path: name, Err: first}
	}
	return buf, fi, nil
}

// MkdirMode creates the directory name with permission perm, as the
// server's umask allows, in one request: pkg/sftp's Mkdir sends no mode,
// and setting one after costs two more round trips (a stat to learn the
// umask, then a chmod). It fails with ErrNoBatch where no session is
// free for it.
func (s *SFTP) MkdirMode(ctx context.Context, name string, perm fs.FileMode) error {
	bs, err := s.getBatch(ctx)
	if err != nil {
		return err
	}
	defer s.batch.put(bs)
	err = bs.s.simple(fxpMkdir, func(b []byte) []byte { return appendMkdir(b, name, perm) })
	if err != nil {
		s.batch.drop(bs, err)
		return &fs.PathError{Op: "mkdir", Path: name, Err: err}
	}
	return nil
}

// Umask learns which permission bits the server takes away from a new
// entry (its umask, or what a default ACL of dir gives): SFTP has no
// request to ask. It creates, stats and removes an empty directory of
// the name probe in dir, the three requests sent at once, so that it
// costs one round trip. It fails with ErrNoBatch where no session is
// free for it.
func (s *SFTP) Umask(ctx context.Context, probe string) (fs.FileMode, error) {
	if mask, ok := s.startUmask(); ok {
		return mask, nil // learnt with the start (PreCreate.Probe)
	}
	name := func(b []byte) []byte { return appendString(b, probe) }
	var mask fs.FileMode
	err := s.inOrder(ctx, probe, []batchRequest{
		{"mkdir", fxpMkdir, fxpStatus, func(b []byte) []byte { return appendMkdir(b, probe, 0o777) }},
		{"stat", fxpStat, fxpAttrs, name},
		{"rmdir", fxpRmdir, fxpStatus, name},
	}, func(calls []*call) error {
		fi, err := statReply(calls[1], probe)
		if err == nil {
			mask = probeMask(fi)
		}
		return err
	})
	return mask, err
}

// batchRequest is one of the requests inOrder sends: what errors call
// it, its type, the type of reply it wants and its fields.
type batchRequest struct {
	op         string
	typ, reply byte
	fields     func([]byte) []byte
}

// inOrder sends reqs, all about path, one after another on a batch
// session, so that they cost one round trip and the server runs them in
// that order, and waits for every reply. The first request that failed
// fails the call, as a PathError of its op; otherwise use reads the
// replies (calls, in the order of reqs) and its error is the call's. A
// lost session is dropped. It fails with ErrNoBatch where no session is
// free.
func (s *SFTP) inOrder(ctx context.Context, path string, reqs []batchRequest, use func(calls []*call) error) error {
	bs, err := s.getBatch(ctx)
	if err != nil {
		return err
	}
	defer s.batch.put(bs)
	rs := bs.s.rawSession
	var calls []*call
	defer func() {
		for _, c := range calls {
			putCall(c)
		}
	}()
	var first error
	for _, r := range reqs {
		c := getCall(nil)
		if err := rs.send(c, r.typ, r.fields, nil); err != nil {
			putCall(c)
			first = err
			break
		}
		calls = append(calls, c)
	}
	// Every request sent is waited for: its reply lands in its call.
	for i, c := range calls {
		if err := wait(c, reqs[i].reply); err != nil && first == nil {
			first = &fs.PathError{Op: reqs[i].op, Path: path, Err: err}
		}
	}
	if first == nil {
		first = use(calls)
	}
	if first != nil {
		s.batch.drop(bs, first)
	}
	return first
}

// statReply is the file name's stat from c, the reply to a STAT.
func statReply(c *call, name string) (fs.FileInfo, error) {
	fi, err := parseAttrs(c.body, name)
	if err != nil {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: fmt.Errorf("%w: sftp: %w in attributes", ErrStreamLost, err)}
	}
	return fi, nil
}

// probeMask is the umask a probe directory made with mode 0777 shows in
// its attributes fi: the permission bits it lacks.
func probeMask(fi fs.FileInfo) fs.FileMode { return 0o777 &^ fi.Mode().Perm() }

// PrepareSmall opens, in the background, the sessions that PutSmall,
// GetSmall and MkdirMode use, and the one of listings, so that the first
// files of a tree need not wait for them.
func (s *SFTP) PrepareSmall(ctx context.Context) {
	s.PrepareList(ctx)
	for range batchSessions {
		go func() {
			if bs, err := s.batch.open(ctx); err == nil {
				s.batch.put(bs)
			}
		}()
	}
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// rename renames oldname to newname on rs, replacing newname: with
// posix-rename where the server has it, else through the main session's
// Rename, which removes the old target first.
func (s *SFTP) rename(rs *rawSession, oldname, newname string) error {
	if !s.atomicRename {
		return s.Rename(oldname, newname)
	}
	return rs.simple(fxpExtended, func(b []byte) []byte {
		b = appendString(b, posixRename)
		b = appendString(b, oldname)
		return appendString(b, newname)
	})
}

// simple sends one request answered by a status and waits for it.
func (s *rawSession) simple(typ byte, fields func([]byte) []byte) error {
	c := getCall(nil)
	defer putCall(c)
	if err := s.send(c, typ, fields, nil); err != nil {
		return err
	}
	return wait(c, fxpStatus)
}

// openAttrs opens name with open flags pflags, creating it with
// permission perm when pflags say so.
func (s *rawSession) openAttrs(name string, pflags uint32, perm fs.FileMode) (*rawFile, error) {
	c := getCall(nil)
	defer putCall(c)
	err := s.send(c, fxpOpen, func(b []byte) []byte { return appendOpen(b, name, pflags, perm) }, nil)
	if err == nil {
		err = wait(c, fxpHandle)
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	h, _, err := readString(c.body)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fmt.Errorf("%w: sftp: %w in handle reply", ErrStreamLost, err)}
	}
	return &rawFile{s: s, handle: h}, nil
}

// appendOpen appends an OPEN's fields after its id: name, the open flags
// pflags, and permission perm where pflags create the file.
func appendOpen(b []byte, name string, pflags uint32, perm fs.FileMode) []byte {
	b = appendString(b, name)
	b = binary.BigEndian.AppendUint32(b, pflags)
	if pflags&fxfCreat == 0 {
		return binary.BigEndian.AppendUint32(b, 0)
	}
	b = binary.BigEndian.AppendUint32(b, attrPermissions)
	return binary.BigEndian.AppendUint32(b, UnixMode(perm.Perm()))
}

// appendMkdir appends a MKDIR's fields after its id: name and permission
// perm.
func appendMkdir(b []byte, name string, perm fs.FileMode) []byte {
	b = appendString(b, name)
	b = binary.BigEndian.AppendUint32(b, attrPermissions)
	return binary.BigEndian.AppendUint32(b, UnixMode(perm))
}

// setAttrs encodes the attributes a sets after the writes, nil for none.
func setAttrs(a PutAttrs) []byte {
	var flags uint32
	if a.SetMode {
		flags |= attrPermissions
	}
	if a.SetTimes {
		flags |= attrACModTime
	}
	if flags == 0 {
		return nil
	}
	b := binary.BigEndian.AppendUint32(nil, flags)
	if a.SetMode {
		b = binary.BigEndian.AppendUint32(b, UnixMode(a.Mode))
	}
	if a.SetTimes {
		b = binary.BigEndian.AppendUint32(b, uint32(a.Atime.Unix()))
		b = binary.BigEndian.AppendUint32(b, uint32(a.Mtime.Unix()))
	}
	return b
}

// UnixMode returns the permission bits of m (with setuid, setgid and
// sticky) as SFTP, scp and tar carry them.
func UnixMode(m fs.FileMode) uint32 {
	u := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		u |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		u |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		u |= 0o1000
	}
	return u
}

// attrInfo is a file's attributes as a STAT or FSTAT reply gives them.
type attrInfo struct {
	name         string
	size         int64
	mode         fs.FileMode
	atime, mtime time.Time
	uid, gid     uint32
	owned        bool // the server sent uid and gid
}

func (a *attrInfo) Name() string       { return a.name }
func (a *attrInfo) Size() int64        { return a.size }
func (a *attrInfo) Mode() fs.FileMode  { return a.mode }
func (a *attrInfo) ModTime() time.Time { return a.mtime }
func (a *attrInfo) IsDir() bool        { return a.mode.IsDir() }
func (a *attrInfo) Sys() any           { return a }

// AccessTime is the file's access time, which transfer's -p carries over.
func (a *attrInfo) AccessTime() time.Time { return a.atime }

// parseAttrs reads the ATTRS of a reply for the file name.
func parseAttrs(b []byte, name string) (*attrInfo, error) {
	a, _, err := readAttrs(b)
	if err != nil {
		return nil, err
	}
	a.name = baseName(name)
	return a, nil
}

func baseName(name string) string {
	for i := len(name) - 1; i >= 0; i-- {
		if name[i] == '/' {
			return name[i+1:]
		}
	}
	return name
}

// statMode turns a POSIX st_mode into an fs.FileMode.
func statMode(m uint32) fs.FileMode {
	mode := FileMode(m)
	switch m & 0o170000 {
	case 0o040000:
		mode |= fs.ModeDir
	case 0o120000:
		mode |= fs.ModeSymlink
	case 0o100000:
	default:
		mode |= fs.ModeIrregular
	}
	return mode
}

// batcher lends the sessions that carry small files: up to batchSessions
// of them, taken from the pool on first use and kept until the SFTP end
// closes, each carrying up to batchPerSess files at once.
type batcher struct {
	p       *pool
	mu      sync.Mutex
	sess    []*batchSession
	gone    bool // the pool gave no more: make do with the sessions held
	opening int  // sessions being taken from the pool
	ready   chan struct{}
}

type batchSession struct {
	s     *session
	inUse int
	dead  bool
}

// ErrNoBatch is returned by PutSmall and GetSmall when a file cannot go
// in one batch: no session is free for them (the server allows none
// beyond the main one), or the server answered a read short. The file
// goes the ordinary way instead.
var ErrNoBatch = errors.New("no sftp session for small files")

// get returns a session with room for one more file, waiting while every
// one is full.
func (b *batcher) get(ctx context.Context) (*batchSession, error) {
	for {
		b.mu.Lock()
		var best *batchSession
		for _, bs := range b.sess {
			if best == nil || bs.inUse < best.inUse {
				best = bs
			}
		}
		// A new session once the ones held are half busy: files spread
		// over several sftp-server processes, and so over the server's
		// cores. While the first is being opened the others wait for it:
		// it may be the idle one the pool has at once, where a second
		// would cost a channel's round trips before the file's first byte.
		first := best == nil && b.opening == 0
		if !b.gone && len(b.sess)+b.opening < batchSessions && (first || best != nil && best.inUse >= batchPerSess/2) {
			b.mu.Unlock()
			bs, err := b.open(ctx)
			if err == nil {
				return bs, nil
			}
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			continue
		}
		if best == nil && b.opening == 0 {
			b.mu.Unlock()
			return nil, ErrNoBatch
		}
		if best != nil && best.inUse < batchPerSess {
			best.inUse++
			b.mu.Unlock()
			return best, nil
		}
		ready := b.ready
		b.mu.Unlock()
		select {
		case <-ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// open takes one more session from the pool, unless batchSessions are
// held or being opened, and returns it with room for one file taken.
// Sessions after the first are spread over two connections: one sshd
// process encrypts all of a connection's channels.
func (b *batcher) open(ctx context.Context) (*batchSession, error) {
	b.mu.Lock()
	if b.gone || len(b.sess)+b.opening >= batchSessions {
		b.mu.Unlock()
		return nil, ErrNoBatch
	}
	// The first session goes on a connection there is: a file waiting
	// for it should not wait for a second connection to be dialed (nine
	// round trips where a channel takes two). The others spread.
	conns := 2
	if len(b.sess)+b.opening == 0 {
		conns = 1
	}
	b.opening++
	b.mu.Unlock()
	s, err := b.p.acquire(ctx, conns)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.opening--
	b.wake()
	if err != nil {
		if ctx.Err() == nil {
			b.gone = true
		}
		return nil, err
	}
	bs := &batchSession{s: s, inUse: 1}
	b.sess = append(b.sess, bs)
	return bs, nil
}

// put gives back the room get took.
func (b *batcher) put(bs *batchSession) {
	b.mu.Lock()
	bs.inUse--
	b.wake()
	b.mu.Unlock()
}

// wake tells the calls of get waiting that something changed; b.mu is
// held.
func (b *batcher) wake() {
	close(b.ready)
	b.ready = make(chan struct{})
}

// drop gives a session back to the pool as broken when err says it is
// lost; the calls still on it fail, and the next files take another.
func (b *batcher) drop(bs *batchSession, err error) {
	if !errors.Is(err, ErrStreamLost) && !bs.s.failed() {
		return
	}
	b.mu.Lock()
	if bs.dead {
		b.mu.Unlock()
		return
	}
	bs.dead = true
	for i, x := range b.sess {
		if x == bs {
			b.sess = append(b.sess[:i], b.sess[i+1:]...)
			break
		}
	}
	b.wake()
	b.mu.Unlock()
	b.p.release(bs.s, true)
}

// close returns the sessions to the pool.
func (b *batcher) close() {
	b.mu.Lock()
	sess := b.sess
	b.sess = nil
	b.mu.Unlock()
	for _, bs := range sess {
		b.p.release(bs.s, false)
	}
}

// SetAttrs gives name the mode and times a says (SetMode, SetTimes) and
// returns its stat taken after them, both in one round trip: a SETSTAT
// and a STAT of the same path, in that order, on one session. A copy
// whose every byte is acknowledged checks its temporary file's size with
// the stat, and the setstat no longer costs a round trip of its own
// before the rename (as PutSmall's). An error of either request fails
// the call; the stat is returned only when both succeeded.
func (s *SFTP) SetAttrs(ctx context.Context, name string, a PutAttrs) (fs.FileInfo, error) {
	withName := func(b []byte) []byte { return appendString(b, name) }
	var reqs []batchRequest
	if attrs := setAttrs(a); attrs != nil {
		reqs = append(reqs, batchRequest{"setstat", fxpSetstat, fxpStatus,
			func(b []byte) []byte { return append(withName(b), attrs...) }})
	}
	reqs = append(reqs, batchRequest{"stat", fxpStat, fxpAttrs, withName})
	var fi fs.FileInfo
	err := s.inOrder(ctx, name, reqs, func(calls []*call) (err error) {
		fi, err = statReply(calls[len(calls)-1], name)
		return err
	})
	if err != nil {
		return nil, err
	}
	return fi, nil
}
