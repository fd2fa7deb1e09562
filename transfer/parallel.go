package transfer

import (
	"context"
	"io/fs"
	"os"
	"time"

	"github.com/hpncp/hpncp/pipeline"
	"github.com/hpncp/hpncp/protocol"
	"github.com/hpncp/hpncp/window"
)

// streamReader and streamWriter are ends that can open a file again on a
// stream of its own (for a remote end: a channel, on one of up to conns
// connections), so that one file moves over several streams at once.
type streamReader interface {
	OpenReaderAt(ctx context.Context, name string, conns int) (protocol.ReaderAtCloser, error)
}

type streamWriter interface {
	OpenWriterAt(ctx context.Context, name string, conns int) (protocol.WriterAtCloser, error)
}

// packetSource is an end that moves data in requests of at most Packet
// bytes.
type packetSource interface {
	Packet() int
}

// rttSource is an end that can tell the path's round-trip time.
type rttSource interface {
	RTT() time.Duration
}

// ParallelOptions say when and how files go over several streams.
type ParallelOptions struct {
	// Controller returns a new window controller for one file. nil keeps
	// every file off the parallel pipeline: each goes front to back on one
	// stream, by pipeline.Copy or, when small, in one batch of requests.
	// (--hpn-disabled is not nil but a controller fixed at one stream on
	// one connection, which keeps a large file's requests in flight
	// across chunks.)
	Controller func() *window.Controller
	// MinSize is the smallest file that goes over the parallel pipeline.
	MinSize int64
	Chunk   int // bytes a stream reads or writes at once; pipeline.DefaultChunk when 0
	Depth   int // chunks in flight per stream; when 0, the window plan decides
	// Conns, when not nil, returns for one file's copy a reader of its
	// connections' TCP state (pipeline.ParallelOptions.Conns).
	Conns func() func() []window.ConnSample
	// CPU, when not nil, returns the process's CPU time so far
	// (pipeline.ParallelOptions.CPU).
	CPU func() time.Duration
}

func (l Local) OpenReaderAt(_ context.Context, name string, _ int) (protocol.ReaderAtCloser, error) {
	if l.root != nil {
		return l.root.open("open", name, os.O_RDONLY)
	}
	return openRegular(name, l.noFollow)
}

func (l Local) OpenWriterAt(_ context.Context, name string, _ int) (protocol.WriterAtCloser, error) {
	if l.root != nil {
		return l.root.open("open", name, os.O_WRONLY)
	}
	return os.OpenFile(name, os.O_WRONLY, 0)
}

// parallelOK reports whether a file of size bytes goes over several
// streams from src to dst.
func (c *copier) parallelOK(src, dst FS, size int64) bool {
	p := c.opts.Parallel
	if p.Controller == nil || size < p.MinSize || (src.Label() == "" && dst.Label() == "") {
		return false
	}
	_, r := src.(streamReader)
	_, w := dst.(streamWriter)
	return r && w
}

// copyParallel copies src into the existing temporary file tmp on dst's
// end, over as many streams as the window controller plans, from where
// part was resumed (nil for a file without a journal entry), telling
// prog, when not nil, of its bytes.
//
// The returned stat of tmp, when not nil, was taken once every byte was
// acknowledged, while the lanes closed their handles: the caller's size
// check need not cost a round trip of its own. Where final is not nil and
// dst's end can (attrSetter), the mode and times final gives are set in
// the same round trip, before the stat, and returned as applied: the
// file's bytes are all there, and the rename follows the size check with
// no round trip between: two round trips after the last write's reply
// rather than three.
//
// behind, when not nil, hashes the written file behind the streams: it
// is told of every chunk written and acknowledged, as the resume journal
// is, and of every chunk copied twice at once.
func (c *copier) copyParallel(ctx context.Context, src Endpoint, dstFS FS, tmp string, size int64, part *partial, prog Progress, final func() fileAttrs, behind *follower) (int64, fs.FileInfo, *fileAttrs, error) {
	p := c.opts.Parallel
	r := src.FS.(streamReader)
	w := dstFS.(streamWriter)
	open := pipeline.Lanes(
		func(ctx context.Context, conns int) (pipeline.ReaderAtCloser, error) {
			return r.OpenReaderAt(ctx, src.Path, conns)
		},
		func(ctx context.Context, conns int) (pipeline.WriterAtCloser, error) {
			return w.OpenWriterAt(ctx, tmp, conns)
		})
	po := pipeline.ParallelOptions{
		Size:       size,
		Offset:     part.resumed(),
		Chunk:      p.Chunk,
		Depth:      p.Depth,
		Request:    requestSize(src.FS, dstFS),
		Controller: c.controller(len(c.parallel), size-part.resumed()),
		RTT:        pathRTT(src.FS, dstFS),
		Limiter:    c.opts.Limiter,
		Logf:       c.opts.Logf,
	}
	if p.Conns != nil {
		po.Conns = p.Conns()
	}
	po.CPU = p.CPU
	if t := c.opts.Trace; t != nil {
		po.Trace = func(s window.Sample, p window.Plan, changed bool) { t(src.Path, s, p, changed) }
	}
	po.Standby = func(conns int) {
		for _, e := range []FS{src.FS, dstFS} {
			if s, ok := e.(standbyer); ok {
				s.Standby(conns)
			}
		}
	}
	if prog != nil {
		po.Progress = prog.Add
	}
	var written func(off int64, n int)
	if behind != nil {
		written, po.Twice = behind.written, behind.twice
	}
	switch {
	case part != nil && written != nil:
		po.Done = func(off int64, n int) { part.done(off, n); written(off, n) }
	case part != nil:
		po.Done = part.done
	case written != nil:
		po.Done = written
	}
	if c.opts.Sparse {
		po.Sparse = true
		if !isRemote(src.FS) {
			h := openHoles(src.Path)
			defer h.close()
			if h != nil {
				po.Hole = h.hole
			}
		}
	}
	type sized struct {
		fi      fs.FileInfo
		err     error
		applied *fileAttrs
	}
	var early chan sized
	po.Complete = func() {
		early = make(chan sized, 1)
		go func() {
			if setter, ok := dstFS.(attrSetter); ok && final != nil {
				a := final()
				fi, err := setter.SetAttrs(ctx, tmp, a.put())
				if err == nil {
					early <- sized{fi, nil, &a}
					return
				}
				// finish sets them again, one at a time, and says what failed.
			}
			fi, err := dstFS.Stat(tmp)
			early <- sized{fi, err, nil}
		}()
	}
	if po.Sparse {
		// The file may end in a hole: its size is set first.
		po.Complete = nil
	}
	res, err := pipeline.Parallel(ctx, open, po)
	if err == nil && po.Sparse {
		err = finishSparse(dstFS, tmp, res.DataEnd, size)
	}
	c.record(func(r *Result) {
		r.MaxStreams = max(r.MaxStreams, res.MaxStreams)
		r.Conns = max(r.Conns, res.Conns)
	})
	var fi fs.FileInfo
	var applied *fileAttrs
	if early != nil {
		// A failed early stat is not an error yet: the caller stats again.
		if s := <-early; s.err == nil {
			fi, applied = s.fi, s.applied
		}
	}
	return res.Bytes, fi, applied, err
}

// attrSetter is an end that sets a file's mode and times and stats it in
// one round trip.
type attrSetter interface {
	SetAttrs(ctx context.Context, name string, a protocol.PutAttrs) (fs.FileInfo, error)
}

// pathRTT returns a function giving the larger RTT the two ends report.
func pathRTT(a, b FS) func() time.Duration {
	return func() time.Duration {
		var rtt time.Duration
		for _, e := range []FS{a, b} {
			if s, ok := e.(rttSource); ok {
				rtt = max(rtt, s.RTT())
			}
		}
		return rtt
	}
}

// requestSize is the smallest request size the two ends report, 0 when
// neither does.
func requestSize(a, b FS) int {
	n := 0
	for _, e := range []FS{a, b} {
		if s, ok := e.(packetSource); ok && s.Packet() > 0 && (n == 0 || s.Packet() < n) {
			n = s.Packet()
		}
	}
	return n
}

// streamPreparer is an end that can open streams ahead of need.
type streamPreparer interface {
	PrepareStreams(ctx context.Context, streams, conns int)
}

// controller returns a new window controller for a copy of size bytes
// that shares the parallel pipeline with others, n in all.
func (c *copier) controller(n int, size int64) *window.Controller {
	w := c.opts.Parallel.Controller()
	w.Share(n)
	w.Size(size)
	return w
}

// prepareStreams has the ends of a copy of size bytes from src to dst
// open the streams of the window controller's first plan, when the copy
// will go over several: their set-up then runs while the target is looked
// at and the temporary file created. A copy that will not use them (a
// small file, a local one) opens none.
func (c *copier) prepareStreams(ctx context.Context, src, dst FS, size int64) {
	if !c.parallelOK(src, dst, size) {
		return
	}
	// This file's slot on the pipeline is not taken yet.
	plan := c.controller(len(c.parallel)+1, size).Start(pathRTT(src, dst)())
	for _, e := range []FS{src, dst} {
		if p, ok := e.(streamPreparer); ok {
			p.PrepareStreams(ctx, plan.Streams, plan.Conns)
		}
	}
}

// standbyer is an end that can dial connections ahead of a plan that
// may ask for them (window.Plan.Standby).
type standbyer interface {
	Standby(conns int)
}
