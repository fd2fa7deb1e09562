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

	"github.com/hpncp/hpncp/internal/slots"
)

// pkg/sftp lists a directory one request after another: OPENDIR, then
// READDIR until EOF (OpenSSH answers at most 100 names each), then CLOSE,
// four or more round trips a directory. Here the READDIRs go out several
// at once as soon as the handle is known, more as full answers come, and
// the CLOSE is waited for in the background, so that a directory costs
// two round trips however many names it holds: the server answers a
// handle's READDIRs in order, and those after the end get an EOF status.

// Bounds of one listing's READDIRs in flight: a few at first, which
// cover most directories in one round trip, then two more for each
// answer that held names, so that those in flight double each round
// trip of a large directory.
const (
	readdirFirst = 4
	readdirMax   = 64
)

// maxNameReply bounds a NAME reply: OpenSSH's 100 names of up to 255
// bytes, each with its ls -l line, can pass maxSmallReply; 256 KiB is
// OpenSSH's own bound on any SFTP message.
const maxNameReply = 256 << 10

// MaxDirEntries bounds the entries of one listing: a server that never
// ends a listing, broken or hostile, would otherwise have it grow until
// memory runs out (names arrive at tens of megabytes a second). A million
// entries hold about 150 MB; real directories rarely come near.
const MaxDirEntries = 1 << 20

// ErrTooManyEntries is the error of a listing longer than MaxDirEntries.
var ErrTooManyEntries = fmt.Errorf("more than %d entries", MaxDirEntries)

// listerMax bounds the listings in flight at once on the listing
// session, each of which holds a directory open on the server.
const listerMax = 128

// lister holds the session that carries listings. It is one of the
// pool's, taken on a connection already open rather than from the batch
// sessions: those wait for a second connection, whose dial takes longer
// than a whole tree's listings.
type lister struct {
	mu   sync.Mutex
	s    *session
	gone bool // no session could be had: pkg/sftp lists instead
	sem  slots.Slots
}

// errNoLister says the listing session is unavailable and the listing
// goes through pkg/sftp instead.
var errNoLister = errors.New("no sftp session for listings")

// get returns the listing session, opening it on first use, and takes
// one of its slots for a listing.
func (l *lister) get(ctx context.Context, p *pool) (*session, error) {
	l.mu.Lock()
	if l.sem == nil {
		l.sem = slots.New(listerMax)
	}
	sem := l.sem
	l.mu.Unlock()
	if err := sem.Acquire(ctx); err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.s == nil && !l.gone {
		s, err := p.acquire(ctx, 1)
		if err != nil {
			l.gone = ctx.Err() == nil
			sem.Release()
			return nil, fmt.Errorf("%w: %w", errNoLister, err)
		}
		l.s = s
	}
	if l.s == nil {
		sem.Release()
		return nil, errNoLister
	}
	return l.s, nil
}

// put gives back a slot get took; a session that broke goes back to the
// pool as broken, and the next listing opens another.
func (l *lister) put(p *pool, s *session) {
	if s.failed() {
		l.mu.Lock()
		if l.s == s {
			l.s = nil
			p.release(s, true)
		}
		l.mu.Unlock()
	}
	l.sem.Release()
}

// PrepareList opens, in the background, the session that listings use,
// so that the first listing need not wait for it.
func (s *SFTP) PrepareList(ctx context.Context) {
	go func() {
		if ls, err := s.lister.get(ctx, s.pool); err == nil {
			s.lister.put(s.pool, ls)
		}
	}()
}

// close returns the listing session to the pool.
func (l *lister) close(p *pool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.s != nil {
		p.release(l.s, false)
		l.s = nil
	}
	l.gone = true
}

// ReadDirContext lists the directory name without following links,
// leaving out "." and "..", with each entry's attributes as the server
// gave them (Sys holds the access time). Names are the server's, not
// checked here: callers validate them before they touch a disk.
func (s *SFTP) ReadDirContext(ctx context.Context, name string) ([]fs.FileInfo, error) {
	ls, err := s.lister.get(ctx, s.pool)
	if errors.Is(err, errNoLister) {
		return s.mc.current().ReadDirContext(ctx, name)
	}
	if err != nil {
		return nil, err
	}
	list, rest, err := ls.readDir(ctx, name)
	// The listing is complete before the server has answered the last
	// requests on the directory and closed it: the slot waits for that,
	// the caller does not.
	go func() {
		for _, c := range rest {
			<-c.done
			putCall(c)
		}
		s.lister.put(s.pool, ls)
	}()
	if errors.Is(err, ErrStreamLost) {
		// A listing changes nothing: another session can start it over.
		return s.mc.current().ReadDirContext(ctx, name)
	}
	return list, err
}

// readDir lists name. It returns as soon as the server has said the
// listing is complete, or ctx is done, with the requests still in flight
// then, which end with the CLOSE of the directory; the caller must wait
// for each. A listing of more than MaxDirEntries fails.
func (s *rawSession) readDir(ctx context.Context, name string) ([]fs.FileInfo, []*call, error) {
	c := getCall(nil)
	err := s.send(c, fxpOpendir, func(b []byte) []byte { return appendString(b, name) }, nil)
	if err != nil {
		putCall(c)
		return nil, nil, &fs.PathError{Op: "opendir", Path: name, Err: err}
	}
	if err := waitContext(ctx, c); err != nil {
		// The handle, should it come, stays open: the session is
		// abandoned with the run.
		return nil, []*call{c}, err
	}
	err = wait(c, fxpHandle)
	body := c.body
	putCall(c)
	if err != nil {
		return nil, nil, &fs.PathError{Op: "opendir", Path: name, Err: err}
	}
	handle, _, err := readString(body)
	if err != nil {
		return nil, nil, &fs.PathError{Op: "opendir", Path: name, Err: fmt.Errorf("%w: sftp: %w in handle reply", ErrStreamLost, err)}
	}
	withHandle := func(b []byte) []byte { return appendString(b, handle) }

	var (
		list     []fs.FileInfo
		inFlight []*call
		first    error
	)
	more := func(n int) {
		for range min(n, readdirMax-len(inFlight)) {
			c := getCall(nil)
			if err := s.send(c, fxpReaddir, withHandle, nil); err != nil {
				putCall(c)
				first = cmpOr(first, err)
				return
			}
			inFlight = append(inFlight, c)
		}
	}
	more(readdirFirst)
	for first == nil && len(inFlight) > 0 {
		c := inFlight[0]
		if err := waitContext(ctx, c); err != nil {
			first = err
			break
		}
		inFlight = inFlight[1:]
		err := wait(c, fxpName)
		body := c.body
		putCall(c)
		if errors.Is(err, io.EOF) {
			// The answers still to come are EOF statuses too.
			break
		}
		if err != nil {
			first = err
			break
		}
		var n int
		if list, n, err = appendNames(list, body); err != nil {
			first = fmt.Errorf("%w: sftp: %w in directory entries", ErrStreamLost, err)
		} else if len(list) > MaxDirEntries {
			first = ErrTooManyEntries
		} else if n > 0 {
			more(2)
		} else {
			// An empty answer that is not EOF must not end the listing,
			// nor leave it waiting for nothing.
			more(1)
		}
	}
	closing := getCall(nil)
	if err := s.send(closing, fxpClose, withHandle, nil); err != nil {
		putCall(closing)
		first = cmpOr(first, err)
	} else {
		inFlight = append(inFlight, closing)
	}
	switch {
	case first != nil && ctx.Err() != nil:
		return nil, inFlight, ctx.Err()
	case first != nil:
		return nil, inFlight, &fs.PathError{Op: "readdir", Path: name, Err: first}
	}
	return list, inFlight, nil
}

// waitContext waits for c's reply or for ctx to be done, whichever comes
// first; the reply is left for wait.
func waitContext(ctx context.Context, c *call) error {
	select {
	case <-c.done:
		// wait reads it again.
		c.done <- struct{}{}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// appendNames appends the entries of a NAME reply other than "." and ".."
// to list and returns how many the reply held.
func appendNames(list []fs.FileInfo, b []byte) ([]fs.FileInfo, int, error) {
	if len(b) < 4 {
		return list, 0, errors.New("short name count")
	}
	n := int(binary.BigEndian.Uint32(b))
	b = b[4:]
	for range n {
		var name string
		var err error
		if name, b, err = readString(b); err != nil {
			return list, 0, err
		}
		if _, b, err = readString(b); err != nil { // the ls -l line
			return list, 0, err
		}
		var a *attrInfo
		if a, b, err = readAttrs(b); err != nil {
			return list, 0, err
		}
		if name == "." || name == ".." {
			continue
		}
		a.name = name
		list = append(list, a)
	}
	return list, n, nil
}

// readAttrs reads an ATTRS structure from b and returns what follows it.
func readAttrs(b []byte) (*attrInfo, []byte, error) {
	short := errors.New("short attributes")
	u32 := func() (uint32, error) {
		if len(b) < 4 {
			return 0, short
		}
		v := binary.BigEndian.Uint32(b)
		b = b[4:]
		return v, nil
	}
	flags, err := u32()
	if err != nil {
		return nil, nil, err
	}
	a := &attrInfo{}
	if flags&attrSize != 0 {
		if len(b) < 8 {
			return nil, nil, short
		}
		a.size = int64(binary.BigEndian.Uint64(b))
		b = b[8:]
	}
	if flags&attrUIDGID != 0 {
		if len(b) < 8 {
			return nil, nil, short
		}
		a.uid = binary.BigEndian.Uint32(b)
		a.gid = binary.BigEndian.Uint32(b[4:])
		a.owned = true
		b = b[8:]
	}
	if flags&attrPermissions != 0 {
		m, err := u32()
		if err != nil {
			return nil, nil, err
		}
		a.mode = statMode(m)
	}
	if flags&attrACModTime != 0 {
		if len(b) < 8 {
			return nil, nil, short
		}
		a.atime = time.Unix(int64(binary.BigEndian.Uint32(b)), 0)
		a.mtime = time.Unix(int64(binary.BigEndian.Uint32(b[4:])), 0)
		b = b[8:]
	}
	if flags&attrExtended != 0 {
		n, err := u32()
		if err != nil {
			return nil, nil, err
		}
		for range n {
			for range 2 { // type and data
				if _, b, err = readString(b); err != nil {
					return nil, nil, err
				}
			}
		}
	}
	return a, b, nil
}
