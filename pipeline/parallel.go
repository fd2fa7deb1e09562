package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/hpncp/hpncp/internal/bufpool"
	"github.com/hpncp/hpncp/protocol"
	"github.com/hpncp/hpncp/window"
)

// DefaultChunk is the bytes one ReadAt or WriteAt moves: large enough for
// the SFTP client to pipeline many requests inside it, small enough that a
// few per stream keep its window full in bounded memory.
const DefaultChunk = 1 << 20

// DefaultDepth is how many chunks each stream keeps in flight when
// neither the options nor the plan say how many bytes should be.
const DefaultDepth = 3

// Stream is one lane of a parallel copy: the source and the target opened
// on a channel of their own.
type Stream struct {
	Src io.ReaderAt
	Dst io.WriterAt
	// Close releases both handles; broken says the lane failed, so its
	// channel should not be reused.
	Close func(broken bool) error
	// Conn numbers the connection the lane's channel is on; lanes on the
	// same connection share its socket buffers. -1 when unknown (a
	// local end, an end that does not tell).
	Conn int
	// Abort, when not nil, makes the reads of Src in flight fail at once
	// and every later one fail: the lane is given up, and its buffers
	// are not written into once they fail. Where every lane has it, the
	// chunks slow lanes hold at the end of the copy are copied again by
	// idle ones, and the slow copies abandoned (tailCopy).
	Abort func()
}

// OpenStream opens one more lane, spread over up to conns connections.
type OpenStream func(ctx context.Context, conns int) (*Stream, error)

// ParallelOptions tune a parallel copy.
type ParallelOptions struct {
	Size int64 // the file's size: bytes are copied from Offset to Size
	// Offset is where the copy starts: a resumed file's bytes before it
	// are in place already. Chunks are cut from Offset on.
	Offset int64
	Chunk  int // bytes per read and write; DefaultChunk when zero
	// Depth is how many chunks each stream keeps in flight. When zero,
	// each stream keeps the plan's InFlight bytes in flight, plus one
	// chunk so that the window never waits for the next one: more would
	// only queue behind the channel's flow-control window, in memory.
	Depth int
	// Request, when above zero and below Chunk, is the most one request
	// of the ends carries (the SFTP packet size). Each stream then keeps
	// the same bytes in flight, but as reads and writes of Request bytes,
	// each written out as soon as it has arrived. A chunk assembled from
	// several replies has left the CPU cache by the time it is written,
	// and copying it into the page cache from memory doubled the system
	// time of a loopback download.
	Request int
	// Controller decides how many streams and connections to use.
	Controller *window.Controller
	// RTT returns the path's current round-trip time, or 0 when unknown.
	RTT func() time.Duration
	// Conns, when not nil, reads the TCP state of the copy's connections
	// for each interval's Sample; each call covers the interval since the
	// one before.
	Conns func() []window.ConnSample
	// CPU, when not nil, returns the CPU time the process has spent so
	// far: each interval's Sample.CPU is the difference of two calls.
	CPU func() time.Duration
	// Trace, when not nil, is told of the first plan (with a zero Sample)
	// and then of every interval's Sample and the plan decided on it;
	// changed says the streams or connections changed (--trace).
	Trace func(s window.Sample, p window.Plan, changed bool)
	// Standby, when not nil, is asked to have conns connections dialed,
	// live or on standby, whenever a plan's Standby rises.
	Standby  func(conns int)
	Limiter  *rate.Limiter
	Progress func(n int)
	// Done, when not nil, is told of every chunk written and acknowledged,
	// at offset off, in the order they complete (not the file's order).
	// It is called with the copy's lock held: it must be quick.
	Done func(off int64, n int)
	// Complete, when not nil, is called once, with the copy's lock held,
	// as soon as every byte is written and acknowledged and no second
	// copy of a chunk is still being copied: before the lanes close their
	// handles, which costs a round trip of its own. What it starts (the
	// size check of the target, with its mode and times) then overlaps
	// with that. A second copy's write that landed after it would change
	// the times it set, and clear a setuid bit.
	Complete func()
	// Twice, when not nil, is told (with the copy's lock held) whenever
	// a chunk is handed out while another copy of it flies: that copy
	// may land after the first was acknowledged, its bytes read from the
	// source again.
	Twice func()
	Logf  func(format string, args ...any)
	// Sparse leaves the blocks of zeros unwritten (sparse.go): every
	// target must hold no bytes from Offset on. ParallelResult.DataEnd
	// then says how many bytes the file holds.
	Sparse bool
	// Hole, when not nil, reports whether the n bytes at off are a hole
	// of the source, known to read as zeros: with Sparse, such chunks are
	// neither read nor written. A false answer costs only a read.
	Hole func(off int64, n int) bool
}

// ParallelResult says what a parallel copy used.
type ParallelResult struct {
	Bytes      int64 // bytes copied, from Offset on
	MaxStreams int   // the most streams that ran at once
	Conns      int   // connections of the last plan
	Plan       window.Plan
	// DataEnd is, with Sparse, where the last bytes written end (Offset
	// when none were): short of Size when the file ends in a hole.
	// Without Sparse it is Size.
	DataEnd int64
}

// Parallel copies the bytes from o.Offset to o.Size from the lanes'
// sources to their targets, chunk by chunk at the same offsets, over as
// many lanes as the controller plans. A lane that fails with protocol.ErrStreamLost gives its chunk back
// to the others and is replaced; any other failure ends the copy. Every
// chunk's byte count is checked on both sides.
func Parallel(ctx context.Context, open OpenStream, o ParallelOptions) (ParallelResult, error) {
	if o.Chunk <= 0 {
		o.Chunk = DefaultChunk
	}
	if o.Request > 0 && o.Request < o.Chunk {
		if o.Depth > 0 {
			o.Depth = ceilDiv(o.Depth*o.Chunk, o.Request)
		}
		o.Chunk = o.Request
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if o.Offset < 0 || o.Offset > o.Size {
		return ParallelResult{}, fmt.Errorf("offset %d outside a file of %d bytes", o.Offset, o.Size)
	}
	p := &parallel{o: o, open: open, ctx: ctx, events: make(chan struct{}, 1), began: time.Now(),
		next: o.Offset, contig: o.Offset, total: o.Size - o.Offset, dataEnd: o.Size}
	if o.Sparse {
		p.dataEnd = o.Offset
	}
	p.meter = Meter{Limiter: o.Limiter, Progress: o.Progress}
	p.cond = sync.NewCond(&p.mu)
	stop := context.AfterFunc(ctx, func() {
		p.mu.Lock()
		p.cond.Broadcast()
		p.mu.Unlock()
	})
	defer stop()

	rtt := time.Duration(0)
	if o.RTT != nil {
		rtt = o.RTT()
	}
	if o.Conns != nil {
		o.Conns() // the first reading: intervals are measured from it
	}
	var cpu time.Duration
	if o.CPU != nil {
		cpu = o.CPU()
	}
	plan := o.Controller.Start(rtt)
	o.Logf("window: %s", plan)
	if o.Trace != nil {
		o.Trace(window.Sample{RTT: rtt}, plan, true)
	}
	p.apply(plan)

	timer := time.NewTimer(plan.Interval)
	defer timer.Stop()
	last, lastAt := int64(0), time.Now()
	for {
		select {
		case <-ctx.Done():
		case <-p.events:
		case <-timer.C:
			now := time.Now()
			p.mu.Lock()
			s := window.Sample{
				Elapsed:    now.Sub(lastAt),
				Bytes:      p.done - last,
				Errors:     p.errors,
				AppLimited: p.starved || p.opening > 0,
				Opening:    p.opening,
				Remaining:  p.total - p.done,
			}
			last, lastAt = p.done, now
			p.errors, p.starved = 0, false
			p.mu.Unlock()
			if o.RTT != nil {
				s.RTT = o.RTT()
			}
			if o.Conns != nil {
				s.Conns = o.Conns()
			}
			if o.CPU != nil {
				now := o.CPU()
				s.CPU, cpu = max(now-cpu, 0), now
			}
			next := o.Controller.Observe(s)
			changed := next.Streams != plan.Streams || next.Conns != plan.Conns
			if changed {
				o.Logf("window: %s", next)
			}
			if o.Trace != nil {
				o.Trace(s, next, changed)
			}
			if o.Standby != nil && next.Standby > plan.Standby {
				o.Standby(next.Standby)
			}
			plan = next
			timer.Reset(plan.Interval)
			// Lanes held by the spread bound look for stragglers again:
			// a chunk becomes one by time alone.
			p.mu.Lock()
			p.cond.Broadcast()
			p.mu.Unlock()
		}
		p.mu.Lock()
		finished := p.done == p.total || p.fatal != nil || ctx.Err() != nil
		stuck := p.live == 0 && p.opening == 0 && p.openErr != nil
		if p.failures > maxLaneFailures && p.fatal == nil {
			p.fatal = fmt.Errorf("%d streams failed; giving up: %w", p.failures, p.lastLost)
			finished = true
		}
		p.mu.Unlock()
		if finished || stuck {
			break
		}
		p.apply(plan)
	}

	p.mu.Lock()
	p.closing = true
	p.cond.Broadcast()
	var abandon []*lane
	if p.done == p.total {
		// Every chunk is in: what a lane still reads is a second copy
		// that lost. It is abandoned rather than waited for.
		for _, l := range p.lanes {
			if l.busy > 0 && l.st.Abort != nil {
				abandon = append(abandon, l)
			}
		}
	}
	p.mu.Unlock()
	for _, l := range abandon {
		l.st.Abort()
	}
	p.wg.Wait()
	if p.hedged > 0 {
		o.Logf("window: %s copied again past a slow stream", plural(p.hedged, "chunk"))
	}

	res := ParallelResult{Bytes: p.done, MaxStreams: p.maxLive, Conns: plan.Conns, Plan: plan, DataEnd: p.dataEnd}
	switch {
	case p.done == p.total:
		return res, nil
	case ctx.Err() != nil:
		return res, ctx.Err()
	case p.fatal != nil:
		return res, p.fatal
	}
	return res, fmt.Errorf("no stream left to copy on: %w", p.openErr)
}

// The spread of a copy is how far past the first chunk not yet copied
// (the contiguous watermark) others are handed out. A lane that stalls
// (its connection slow, or dying) then holds the others back once they
// are that far ahead: what a resumed copy must send again, the chunks
// past the journal's contiguous watermark, stays bounded, and so does
// the spread of a file's writes. The bound follows the lanes' bytes in
// flight: at 32 streams of 2 MiB a fixed 64 MiB held every lane as soon
// as one chunk trailed by a single round, so the slowest stream set the
// pace of all. spreadLanes times what the lanes hold lets a stream run
// that many times slower than the rest before it holds them; minAhead
// keeps small plans as they were, and maxAhead caps what a resume may
// send again. The bound follows the most the lanes held in the copy, not
// what they hold now: when a plan stops lanes, the chunks handed out
// under the larger bound are still out, and a bound that shrank under
// them held every lane at once until the slowest connection's chunks
// came in, and the copy all but stopped.
//
// The bound also follows time: what the copy moves in spreadTime at its
// rate so far. On a long path one connection of several can run far
// slower than the rest for a whole copy (its slow start cut short by
// the others filling the queue, a congestion control recovering from a
// loss): at 100 ms and 1 Gbit/s 15 lanes of 2 MiB ran 120 MiB, one
// second, ahead of such a connection's chunks and then all stood idle
// behind them for most of a second, the connections' windows decaying
// meanwhile, several times a copy.
var (
	minAhead   int64 = 64 << 20        // a variable for the tests
	maxAhead   int64 = 512 << 20       // a variable for the tests
	spreadTime       = 3 * time.Second // a variable for the tests
)

const spreadLanes = 4

// spread is how far past contig chunks may be handed out now; p.mu is
// held.
func (p *parallel) spread() int64 {
	ahead := max(spreadLanes*p.peakHeld, int64(p.rate()*spreadTime.Seconds()))
	return min(max(ahead, minAhead), maxAhead)
}

// rate is the copy's goodput so far, bytes per second; p.mu is held.
func (p *parallel) rate() float64 {
	el := time.Since(p.began).Seconds()
	if p.done <= 0 || el <= 0 {
		return 0
	}
	return float64(p.done) / el
}

// advance records the chunk of n bytes at off as copied; p.mu is held.
func (p *parallel) advance(off int64, n int) {
	if off != p.contig {
		if p.ahead == nil {
			p.ahead = map[int64]int{}
		}
		p.ahead[off] = n
		return
	}
	p.contig += int64(n)
	for {
		m, ok := p.ahead[p.contig]
		if !ok {
			break
		}
		delete(p.ahead, p.contig)
		p.contig += int64(m)
	}
	// Lanes may be waiting for the window to move.
	p.cond.Broadcast()
}

// maxLaneFailures bounds how often lanes may fail in one copy before it
// is given up: a path that keeps dropping connections will not recover by
// reopening them forever.
const maxLaneFailures = 32

// openPause is how long after a failed open no new lane is tried, so that
// a refusing server is not asked again at once in a loop.
const openPause = time.Second

type parallel struct {
	o    ParallelOptions
	open OpenStream
	ctx  context.Context
	wg   sync.WaitGroup
	// events wakes the coordinator when a lane ends.
	events chan struct{}
	// meter holds chunks to the run's limit and counts those checked.
	meter Meter

	mu        sync.Mutex
	cond      *sync.Cond
	next      int64         // first offset never handed out
	total     int64         // bytes to copy: Size - Offset
	retry     []int64       // offsets of chunks a failed lane gave back
	done      int64         // bytes copied and checked
	contig    int64         // every byte before it is copied and checked
	dataEnd   int64         // the end of the last bytes written (Sparse)
	ahead     map[int64]int // chunks copied past contig: offset → length
	fatal     error
	closing   bool
	lanes     []*lane
	live      int // lanes running, not told to stop
	maxLive   int
	opening   int
	openErr   error // the last failure to open a lane
	errors    int   // lane failures since the last sample
	failures  int   // lane failures in all
	lastLost  error // the last ErrStreamLost
	openAfter time.Time
	// starved says a lane found no chunk to take since the last sample
	// while the copy had some left: the source gave out, not the path.
	// A lane held back by the spread is not starved: the slowest stream,
	// the path, holds it.
	starved bool
	held    int64 // bytes the live lanes' buffers hold: the plan in flight
	// depthCap is the most chunks a lane has taken at once under the
	// plan (0: its workers): a plan that keeps less in flight per
	// stream holds the workers of lanes opened before it.
	depthCap int
	// flying holds the chunks handed out and not yet finished, by
	// offset: a chunk left behind on a slow connection is handed to a
	// second lane (straggler).
	flying map[int64]*flight
	// chunkTime is a moving average of how long a chunk takes, from
	// hand-out to its check.
	chunkTime time.Duration
	hedged    int  // chunks handed to a second lane
	completed bool // Complete was called
	began     time.Time
	// peakHeld is the most held has been in this copy.
	peakHeld int64
}

type lane struct {
	st        *Stream
	busy      int           // workers with a chunk taken, under parallel.mu
	bytes     int64         // the most its buffers hold
	chunkTime time.Duration // moving average of its chunks' times, under parallel.mu
	stop      bool          // under parallel.mu
	workers   int           // under parallel.mu
	broken    bool          // under parallel.mu
}

// apply opens or stops lanes to match the plan.
func (p *parallel) apply(plan window.Plan) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.o.Depth <= 0 && p.o.Chunk > 0 {
		// Lanes opened before keep their workers but take no more
		// chunks at once than the plan's depth (take).
		p.depthCap = p.depth(plan)
	}
	if !time.Now().Before(p.openAfter) {
		for want := plan.Streams - p.live - p.opening; want > 0; want-- {
			p.opening++
			p.wg.Add(1)
			go p.openLane(plan.Conns, p.depth(plan))
		}
	}
	for extra := p.live - plan.Streams; extra > 0; extra-- {
		if l := p.crowded(plan.Conns); l != nil {
			l.stop = true
			p.live--
		}
	}
	p.cond.Broadcast()
}

// crowded picks the lane to stop under a plan of conns connections:
// the newest on a connection past the plan's (a probe's connections,
// which the plan gave up), else the newest on the connection with the
// most running lanes. Stopping the newest lanes of all would stop those
// on the connections opened last, leaving the plan's streams on fewer
// connections than it says, whose buffers then bind while the others
// stand idle; p.mu is held.
func (p *parallel) crowded(conns int) *lane {
	count := map[int]int{}
	for _, l := range p.lanes {
		if !l.stop {
			count[l.st.Conn]++
		}
	}
	beyond := func(l *lane) bool { return l.st.Conn >= conns }
	var pick *lane
	for i := len(p.lanes) - 1; i >= 0; i-- {
		l := p.lanes[i]
		switch {
		case l.stop:
		case pick == nil:
			pick = l
		case beyond(l) != beyond(pick):
			if beyond(l) {
				pick = l
			}
		case count[l.st.Conn] > count[pick.st.Conn]:
			pick = l
		}
	}
	return pick
}

// depth is how many chunks a new lane keeps in flight under plan.
func (p *parallel) depth(plan window.Plan) int {
	switch {
	case p.o.Depth > 0:
		return p.o.Depth
	case plan.InFlight > 0:
		return int(ceilDiv(plan.InFlight, int64(p.o.Chunk))) + 1
	}
	return ceilDiv(DefaultDepth*DefaultChunk, p.o.Chunk)
}

func ceilDiv[T int | int64](a, b T) T { return (a + b - 1) / b }

func (p *parallel) openLane(conns, depth int) {
	defer p.wg.Done()
	st, err := p.open(p.ctx, conns)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.opening--
	if err != nil {
		p.openErr = err
		p.errors++
		p.openAfter = time.Now().Add(openPause)
		p.o.Logf("window: could not open a stream: %v", err)
		p.notify()
		return
	}
	if p.closing || p.ctx.Err() != nil {
		_ = st.Close(false)
		return
	}
	l := &lane{st: st, workers: depth, bytes: int64(depth) * int64(p.o.Chunk)}
	holdMemory(l.bytes)
	p.held += l.bytes
	p.peakHeld = max(p.peakHeld, p.held)
	p.lanes = append(p.lanes, l)
	p.live++
	p.maxLive = max(p.maxLive, p.live)
	for range depth {
		p.wg.Add(1)
		go p.work(l)
	}
}

func (p *parallel) notify() {
	select {
	case p.events <- struct{}{}:
	default:
	}
}

// A flight is a chunk handed out: when, to how many lanes, and the lane
// that took it first.
type flight struct {
	since  time.Time
	copies int
	by     *lane
}

// Stragglers: while a lane has nothing else to do (the spread bound holds
// it), a chunk in flight for longer than hedgeFactor times the usual chunk
// time, and at least hedgeMin, is handed to that lane too, lowest first:
// the chunks holding the watermark. One loss on a long path halves a
// connection's window and slows its lanes tenfold; the chunk the spread
// waits for is then on it, and every other lane stands idle behind it
// for seconds; a straggler's time much longer than twice the usual
// leaves them idle as long. Both copies move the same bytes to the same
// offset; the first to be checked counts, the other is dropped. Second
// copies are bytes the link carries twice: at most one chunk per four
// live lanes flies twice at a time, since with one per live lane and no
// wait a lossless copy sent a good share of its file twice (figures in
// bench/results-design.md).
const (
	hedgeFactor = 2
	hedgeMin    = 50 * time.Millisecond
	hedgeLanes  = 4 // live lanes per chunk flying twice
)

// take hands out the next chunk's offset, or false when the lane should
// end. Lanes wait while every chunk is taken but some may yet come back.
func (p *parallel) take(l *lane) (int64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	off, ok := p.choose(l)
	if ok {
		l.busy++
	}
	return off, ok
}

// choose is take's choice, waiting until there is one; p.mu is held.
func (p *parallel) choose(l *lane) (int64, bool) {
	for {
		switch {
		case l.stop, p.closing, p.fatal != nil, p.ctx.Err() != nil:
			return 0, false
		case p.depthCap > 0 && l.busy >= p.depthCap:
			// The plan keeps fewer in flight than this lane's workers.
			p.cond.Wait()
			continue
		case len(p.retry) > 0:
			off := p.retry[len(p.retry)-1]
			p.retry = p.retry[:len(p.retry)-1]
			p.fly(off, l)
			return off, true
		case p.next < p.o.Size && p.next-p.contig < p.spread() && !p.slowAtTail(l):
			off := p.next
			p.next += int64(p.o.Chunk)
			p.fly(off, l)
			return off, true
		case p.done == p.total:
			return 0, false
		}
		if p.next < p.o.Size {
			// Held by the spread bound: the path's doing.
			if off, ok := p.straggler(l); ok {
				return off, true
			}
		} else {
			// Every chunk is out: the tail, or a file too small for the
			// lanes. Where the slow copies can be abandoned, idle lanes
			// copy the chunks left behind again; elsewhere a second
			// copy would save nothing, as the copy ends only when every
			// lane's requests are in, the slow copy's too.
			if p.abandonable() {
				if off, ok := p.tailCopy(l); ok {
					return off, true
				}
			}
			p.starved = true
		}
		p.cond.Wait()
	}
}

// slowAtTail reports whether l should leave the chunks still to hand out
// to faster lanes: l takes slowFactor times the usual chunk time or more,
// longer than the copy at its rate so far needs for the chunks not yet
// handed out, and a lane at most twice as slow as usual is running. A
// chunk it took would be the last in and would set the end of the copy,
// at the pace of a connection recovering from losses; p.mu is held.
func (p *parallel) slowAtTail(l *lane) bool {
	if p.chunkTime == 0 || l.chunkTime < slowFactor*p.chunkTime || p.done <= 0 {
		return false
	}
	if left := time.Duration(float64(p.o.Size-p.next) / p.rate() * float64(time.Second)); l.chunkTime <= left {
		return false
	}
	for _, o := range p.lanes {
		if !o.stop && o.chunkTime > 0 && o.chunkTime <= 2*p.chunkTime {
			return true
		}
	}
	return false
}

const slowFactor = 3

// fly records the chunk at off as handed out to l; p.mu is held.
func (p *parallel) fly(off int64, l *lane) {
	if p.flying == nil {
		p.flying = map[int64]*flight{}
	}
	if f := p.flying[off]; f != nil {
		f.copies++ // a chunk given back while its other copy flies
		p.twice()
		return
	}
	p.flying[off] = &flight{since: time.Now(), copies: 1, by: l}
}

// twice tells Options.Twice of a chunk handed out again while its other
// copy flies; p.mu is held.
func (p *parallel) twice() {
	if p.o.Twice != nil {
		p.o.Twice()
	}
}

// straggler picks the lowest chunk in flight on one lane only, for
// longer than a straggler's time, and hands it out again to l; p.mu is
// held. Where the lanes run on several connections, only a chunk on
// another connection than l's: a second copy on the same one waits behind
// the same congestion window as the first.
// A chunk whose lane a plan stopped is handed out again at once, and
// not counted against the bound on second copies: the lane finishes it
// on a connection the plan gave up, as slowly as that goes, and the
// lanes kept wait behind it at the spread bound; under the bound on
// second copies only a few of those chunks would be copied again at a
// time after a large trim.
func (p *parallel) straggler(l *lane) (int64, bool) {
	if p.chunkTime == 0 {
		return 0, false // no chunk has finished: nothing to judge by
	}
	age := max(hedgeFactor*p.chunkTime, hedgeMin)
	now := time.Now()
	several := false // the lanes run on several connections
	for _, o := range p.lanes {
		several = several || (!o.stop && o.st.Conn >= 0 && l.st.Conn >= 0 && o.st.Conn != l.st.Conn)
	}
	best, found, twice := int64(0), false, 0
	orphan, orphaned := int64(0), false
	for off, f := range p.flying {
		if f.copies > 1 {
			twice++
		}
		if several && f.by != nil && sameConn(f.by, l) {
			continue
		}
		if f.copies == 1 && f.by != nil && f.by.stop && !f.by.broken && (!orphaned || off < orphan) {
			orphan, orphaned = off, true
		}
		if f.copies == 1 && now.Sub(f.since) >= age && (!found || off < best) {
			best, found = off, true
		}
	}
	switch {
	case orphaned:
		best, found = orphan, true
	case twice >= max(p.live/hedgeLanes, 1):
		return 0, false
	}
	if found {
		p.flying[best].copies++
		p.hedged++
		p.twice()
	}
	return best, found
}

// Tail second copies: once every chunk is handed out, the copy ends when
// the slowest lane has read the chunks queued on it. Each lane keeps its
// depth of requests in flight, served in order; on a long path with loss
// the lanes of a connection recovering from one held the last seconds,
// the fast lanes idle. Where the slow copies can be abandoned
// (Stream.Abort), a lane with fewer than tailDepth chunks of its own left
// copies again the chunk handed out last on another connection, the
// furthest from done of those in flight there: the link is otherwise idle
// for it. The first copy checked counts; a copy still reading when the
// last chunk is in is abandoned (Parallel).
const tailDepth = 2

// tailCopy picks the chunk l should copy again at the tail, as above;
// p.mu is held.
func (p *parallel) tailCopy(l *lane) (int64, bool) {
	if l.busy >= tailDepth {
		return 0, false
	}
	var (
		best  int64
		since time.Time
		found bool
	)
	for off, f := range p.flying {
		if f.copies != 1 || f.by == nil || f.by == l || sameConn(f.by, l) {
			continue
		}
		if !found || f.since.After(since) {
			best, since, found = off, f.since, true
		}
	}
	if found {
		p.flying[best].copies++
		p.hedged++
		p.twice()
	}
	return best, found
}

// sameConn reports whether lanes a and b run on the same connection, as
// far as b tells (Stream.Conn -1: unknown).
func sameConn(a, b *lane) bool {
	return b.st.Conn >= 0 && a.st.Conn == b.st.Conn
}

// abandonable reports whether every running lane's reads can be
// abandoned (Stream.Abort); p.mu is held.
func (p *parallel) abandonable() bool {
	for _, l := range p.lanes {
		if !l.stop && l.st.Abort == nil {
			return false
		}
	}
	return len(p.lanes) > 0
}

// copied reports whether the chunk at off is copied and checked already;
// p.mu is held.
func (p *parallel) copied(off int64) bool {
	if off < p.contig {
		return true
	}
	_, ok := p.ahead[off]
	return ok
}

// land records that one copy of the chunk at off, moved by l, finished
// (ok: checked), and returns whether it is the chunk's first to be
// checked; p.mu is held.
func (p *parallel) land(l *lane, off int64, ok bool, took time.Duration) (first bool) {
	if ok {
		l.chunkTime = average(l.chunkTime, took)
	}
	f := p.flying[off]
	first = !p.copied(off)
	if f == nil {
		return first
	}
	f.copies--
	if ok && first {
		p.chunkTime = average(p.chunkTime, time.Since(f.since))
		// A copy still flying lands as not the first.
		delete(p.flying, off)
	}
	return first
}

// average moves a chunk time's moving average avg (0: none yet) by d.
func average(avg, d time.Duration) time.Duration {
	if avg == 0 {
		return d
	}
	return (7*avg + d) / 8
}

// lose marks l failed for a lost stream, counting the failure once, and
// stops it; p.mu is held.
func (p *parallel) lose(l *lane, err error) {
	if !l.broken {
		l.broken = true
		p.errors++
		p.failures++
		p.lastLost = err
	}
	if !l.stop {
		l.stop = true
		p.live--
	}
	p.cond.Broadcast()
}

func (p *parallel) work(l *lane) {
	defer p.wg.Done()
	defer p.leave(l)
	var buf []byte
	defer func() {
		if buf != nil {
			bufpool.Put(buf)
		}
	}()
	for {
		off, ok := p.take(l)
		if !ok {
			return
		}
		if buf == nil {
			// Only now: a lane opened for the tail of a file may never
			// get a chunk.
			buf = bufpool.Get(p.o.Chunk)
		}
		n := int(min(int64(p.o.Chunk), p.o.Size-off))
		began := time.Now()
		end, err := p.copyChunk(l.st, buf[:n], off)
		p.mu.Lock()
		l.busy--
		first := p.land(l, off, err == nil, time.Since(began))
		switch {
		case !first:
			// The chunk's other copy was checked first: this one moved
			// the same bytes. Its lane may still have failed.
			if errors.Is(err, protocol.ErrStreamLost) && !l.broken {
				p.lose(l, err)
			}
		case err == nil:
			p.dataEnd = max(p.dataEnd, end)
			p.done += int64(n)
			p.advance(off, n)
			p.meter.Count(n)
			if p.o.Done != nil {
				p.o.Done(off, n)
			}
			if p.done == p.total {
				p.cond.Broadcast()
				p.notify()
			}
		case errors.Is(err, protocol.ErrStreamLost) && p.ctx.Err() == nil:
			if f := p.flying[off]; f == nil || f.copies == 0 {
				// No other copy flies: the chunk goes to another lane.
				delete(p.flying, off)
				p.retry = append(p.retry, off)
			}
			if !l.broken {
				p.o.Logf("window: a stream failed, its chunk goes to another: %v", err)
			}
			p.lose(l, err)
		default:
			if p.fatal == nil {
				p.fatal = err
			}
			p.cond.Broadcast()
		}
		p.complete()
		p.mu.Unlock()
		if err != nil && (first || errors.Is(err, protocol.ErrStreamLost)) {
			p.notify()
			return
		}
	}
}

// complete calls Complete once every chunk is copied and no lane is
// still copying one (a second copy, whose write would land after what
// Complete starts, section 4 of docs/DESIGN.md); p.mu is held.
func (p *parallel) complete() {
	if p.completed || p.o.Complete == nil || p.done != p.total {
		return
	}
	for _, l := range p.lanes {
		if l.busy > 0 {
			return
		}
	}
	p.completed = true
	p.o.Complete()
}

// leave closes a lane's stream once its last worker is gone.
func (p *parallel) leave(l *lane) {
	p.mu.Lock()
	l.workers--
	last := l.workers == 0
	if last && !l.stop {
		l.stop = true
		p.live--
	}
	broken := l.broken
	if last {
		p.held -= l.bytes
	}
	p.mu.Unlock()
	if last {
		holdMemory(-l.bytes)
		_ = l.st.Close(broken)
		p.notify()
	}
}

// copyChunk moves one chunk, insisting on every byte: a short read before
// the expected size is an error, never a smaller file. It returns where
// the bytes it wrote end, 0 when it wrote none.
func (p *parallel) copyChunk(st *Stream, b []byte, off int64) (int64, error) {
	if p.o.Sparse && p.o.Hole != nil && p.o.Hole(off, len(b)) {
		return 0, nil
	}
	n, err := st.Src.ReadAt(b, off)
	switch {
	case err != nil && !(err == io.EOF && n == len(b)):
		// io.ReaderAt may return a full count beside an error; the bytes
		// of a read that failed are not the file's, whatever the count.
		if err == io.EOF {
			err = fmt.Errorf("file shrank: %d bytes at offset %d, expected %d", n, off, len(b))
		}
		return 0, fmt.Errorf("read: %w", err)
	case n < len(b):
		return 0, fmt.Errorf("read: file shrank: %d bytes at offset %d, expected %d", n, off, len(b))
	}
	if p.o.Sparse {
		// A lane's workers write its target at once already.
		return writeSparse(p.ctx, st.Dst, b, off, Meter{Limiter: p.meter.Limiter}, true)
	}
	if err := p.meter.Wait(p.ctx, len(b)); err != nil {
		return 0, err
	}
	n, err = st.Dst.WriteAt(b, off)
	if err != nil {
		return 0, fmt.Errorf("write: %w", err)
	}
	if n != len(b) {
		return 0, fmt.Errorf("write: %w: %d of %d bytes at offset %d", ErrShortWrite, n, len(b), off)
	}
	return off + int64(len(b)), nil
}

func plural(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}
