package protocol

import (
	"io/fs"

	"github.com/hpncp/hpncp/internal/bufpool"
)

// aheadReader reads a file front to back on a session of its own with
// several requests in flight, so that a sequential copy (small files,
// --hpn-disabled, verification) keeps the channel's window full. It asks
// for one request at first and one more for every full reply, up to max:
// a small file costs no more requests than it has packets, plus one.
type aheadReader struct {
	f    *streamFile
	size int // bytes per request
	max  int // requests in flight at most

	next   int64     // offset of the next request
	queue  []pending // requests in flight, oldest first
	window int       // requests to keep in flight now
	cur    []byte    // the unread rest of the oldest reply
	buf    []byte    // the buffer cur is in
	err    error     // io.EOF or the failure that ended reading
}

type pending struct {
	c   *call
	buf []byte
	off int64
	err error // of sending
}

func newAheadReader(f *streamFile, size, max int) *aheadReader {
	return &aheadReader{f: f, size: size, max: max, window: 1}
}

// fill sends requests until window are in flight.
func (r *aheadReader) fill() {
	for len(r.queue) < r.window {
		b := bufpool.Get(r.size)
		p := pending{c: getCall(b), buf: b, off: r.next}
		p.err = r.f.s.send(p.c, fxpRead, rangeFields(r.f.handle, p.off, len(b)), nil)
		r.queue = append(r.queue, p)
		r.next += int64(len(b))
	}
}

// drain waits for every request in flight and drops its reply.
func (r *aheadReader) drain() {
	for _, p := range r.queue {
		if p.err == nil {
			<-p.c.done
		}
		putCall(p.c)
		bufpool.Put(p.buf)
	}
	r.queue = r.queue[:0]
}

func (r *aheadReader) Read(b []byte) (int, error) {
	if err := r.advance(); err != nil {
		return 0, err
	}
	n := copy(b, r.cur)
	r.cur = r.cur[n:]
	return n, nil
}

// advance makes cur hold unread data, unless reading has ended.
func (r *aheadReader) advance() error {
	for len(r.cur) == 0 {
		if r.buf != nil {
			bufpool.Put(r.buf)
			r.buf = nil
		}
		if r.err != nil {
			return r.err
		}
		r.fill()
		p := r.queue[0]
		r.queue = r.queue[1:]
		err := p.err
		if err == nil {
			err = wait(p.c, fxpData)
		}
		n := 0
		if err == nil {
			n = p.c.n
		}
		putCall(p.c)
		r.buf, r.cur = p.buf, p.buf[:n]
		switch {
		case err != nil:
			r.err = err
			r.drain()
		case n < len(p.buf):
			// A short reply, at the end of the file or not: what was asked
			// beyond it is asked again from where it ended.
			r.drain()
			r.next = p.off + int64(n)
		default:
			r.window = min(r.window+1, r.max)
		}
	}
	return nil
}

func (r *aheadReader) Close() error {
	r.drain()
	if r.buf != nil {
		bufpool.Put(r.buf)
		r.buf, r.cur = nil, nil
	}
	if r.err == nil {
		r.err = fs.ErrClosed
	}
	return r.f.Close()
}
