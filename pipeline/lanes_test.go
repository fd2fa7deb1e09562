package pipeline

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/hpncp/hpncp/window"
)

type closeRecorder struct {
	*bytes.Reader
	memFile
	name   string
	err    error
	closed *[]string
}

func (c *closeRecorder) Close() error {
	*c.closed = append(*c.closed, c.name)
	return c.err
}

func TestLanesOpenBothAndCloseBoth(t *testing.T) {
	var closed []string
	srcErr, dstErr := errors.New("source close"), errors.New("target close")
	src := &closeRecorder{Reader: bytes.NewReader([]byte("abc")), name: "src", err: srcErr, closed: &closed}
	dst := &closeRecorder{name: "dst", err: dstErr, closed: &closed}
	var conns []int
	open := Lanes(
		func(_ context.Context, n int) (ReaderAtCloser, error) { conns = append(conns, n); return src, nil },
		func(_ context.Context, n int) (WriterAtCloser, error) { conns = append(conns, n); return dst, nil })
	st, err := open(context.Background(), 3)
	if err != nil {
		t.Fatal(err)
	}
	if st.Src != src || st.Dst != dst || len(conns) != 2 || conns[0] != 3 || conns[1] != 3 {
		t.Fatalf("lane of %v and %v opened on %v connections", st.Src, st.Dst, conns)
	}
	if err := st.Close(false); !errors.Is(err, dstErr) {
		t.Errorf("Close: %v, want the target's failure first", err)
	}
	if len(closed) != 2 {
		t.Errorf("closed %v, want both ends", closed)
	}
	dst.err = nil
	if err := st.Close(false); !errors.Is(err, srcErr) {
		t.Errorf("Close with the target closed fine: %v, want the source's failure", err)
	}
}

func TestLanesTargetFailsSourceClosed(t *testing.T) {
	var closed []string
	src := &closeRecorder{Reader: bytes.NewReader(nil), name: "src", closed: &closed}
	refused := errors.New("refused")
	open := Lanes(
		func(context.Context, int) (ReaderAtCloser, error) { return src, nil },
		func(context.Context, int) (WriterAtCloser, error) { return nil, refused })
	if st, err := open(context.Background(), 1); !errors.Is(err, refused) || st != nil {
		t.Fatalf("open with the target refused: %v, %v", st, err)
	}
	if len(closed) != 1 || closed[0] != "src" {
		t.Errorf("closed %v, want the source closed", closed)
	}
	opened := false
	open = Lanes(
		func(context.Context, int) (ReaderAtCloser, error) { return nil, refused },
		func(context.Context, int) (WriterAtCloser, error) { opened = true; return nil, nil })
	if _, err := open(context.Background(), 1); !errors.Is(err, refused) || opened {
		t.Errorf("open with the source refused: %v, target opened %v", err, opened)
	}
}

// TestStopSpreadsOverConnections: a plan that stops streams stops them
// where they crowd, so that the streams left stay on every connection
// the plan holds; lanes opened last are not all on the last connection.
func TestStopSpreadsOverConnections(t *testing.T) {
	// Eight lanes as a 100 ms copy grows them: four on connections 0
	// and 1, then four on connections 2 to 5.
	conns := []int{0, 1, 0, 1, 2, 3, 4, 5}
	p := stopped()
	for _, c := range conns {
		p.lanes = append(p.lanes, &lane{st: &Stream{Conn: c}})
	}
	p.live = len(p.lanes)
	p.apply(window.Plan{Streams: 6, Conns: 6})
	left := map[int]int{}
	for _, l := range p.lanes {
		if !l.stop {
			left[l.st.Conn]++
		}
	}
	for c := range 6 {
		if left[c] != 1 {
			t.Errorf("after trimming 8 lanes to 6: %v lanes per connection, want one on each of 0 to 5", left)
			break
		}
	}
	// A plan that gives up a probe's connections stops their lanes
	// first: two lanes on each of connections 0 to 7, down to 8 streams
	// on 5 connections, leaves none on 5 to 7.
	p = stopped()
	for c := range 16 {
		p.lanes = append(p.lanes, &lane{st: &Stream{Conn: c % 8}})
	}
	p.live = 16
	p.apply(window.Plan{Streams: 8, Conns: 5})
	left = map[int]int{}
	for _, l := range p.lanes {
		if !l.stop {
			left[l.st.Conn]++
		}
	}
	if left[5]+left[6]+left[7] != 0 || left[0]+left[1]+left[2]+left[3]+left[4] != 8 {
		t.Errorf("16 lanes on 8 connections cut to 8 streams on 5: %v lanes per connection, want all on 0 to 4", left)
	}

	// Lanes that do not tell their connection stop newest first.
	p = stopped()
	for range 3 {
		p.lanes = append(p.lanes, &lane{st: &Stream{Conn: -1}})
	}
	p.live = 3
	p.apply(window.Plan{Streams: 2, Conns: 1})
	if !p.lanes[2].stop || p.lanes[0].stop || p.lanes[1].stop {
		t.Errorf("without connections, the stopped lanes are %v %v %v, want only the newest", p.lanes[0].stop, p.lanes[1].stop, p.lanes[2].stop)
	}
}

// stopped is a copy whose lanes are set up by hand and never opened: its
// open time is far ahead.
func stopped() *parallel {
	p := &parallel{openAfter: time.Now().Add(time.Hour)}
	p.cond = sync.NewCond(&p.mu)
	return p
}

// TestStoppedLanesChunksGoAtOnce: the chunks a plan's trim left on its
// stopped lanes are handed to a waiting lane at once, young as they are
// and however many chunks fly twice already; a running lane's young
// chunk is not.
func TestStoppedLanesChunksGoAtOnce(t *testing.T) {
	p := stopped()
	kept, gone := &lane{st: &Stream{Conn: 0}}, &lane{st: &Stream{Conn: 5}}
	p.lanes = []*lane{kept, gone}
	p.live = 2
	p.chunkTime = time.Second
	p.fly(0, kept)
	p.fly(1<<20, kept)
	p.flying[1<<20].copies = 2 // the one second copy the bound allows
	p.fly(2<<20, gone)
	if off, ok := p.straggler(&lane{st: &Stream{Conn: 1}}); ok {
		t.Fatalf("chunk %d handed out again while its lane runs and it is young", off)
	}
	p.apply(window.Plan{Streams: 1, Conns: 1})
	if !gone.stop || kept.stop {
		t.Fatalf("the trim stopped %v, want the lane on connection 5", map[bool]bool{kept.stop: true})
	}
	off, ok := p.straggler(&lane{st: &Stream{Conn: 1}})
	if !ok || off != 2<<20 {
		t.Fatalf("straggler() = %d, %v; want the stopped lane's chunk at %d", off, ok, 2<<20)
	}
	if _, ok := p.straggler(&lane{st: &Stream{Conn: 1}}); ok {
		t.Error("the stopped lane's chunk was handed out a third time")
	}
}

// TestStragglerGoesToAnotherConnection: a straggler is copied again only
// by a lane on another connection. At 100 ms with a quarter-BDP queue, a
// connection left at a cwnd of 20 segments held the watermark; its other
// lane took the second copy, both crawled there, and every lane of the
// copy stood idle behind them for 3 s.
func TestStragglerGoesToAnotherConnection(t *testing.T) {
	p := stopped()
	slow, beside, other := &lane{st: &Stream{Conn: 7}}, &lane{st: &Stream{Conn: 7}}, &lane{st: &Stream{Conn: 2}}
	p.lanes = []*lane{slow, beside, other}
	p.live = 3
	p.chunkTime = time.Millisecond
	p.fly(0, slow)
	p.flying[0].since = time.Now().Add(-time.Second)
	if off, ok := p.straggler(beside); ok {
		t.Fatalf("chunk %d handed again to a lane on the straggler's own connection", off)
	}
	if off, ok := p.straggler(other); !ok || off != 0 {
		t.Fatalf("straggler(other) = %d, %v; want chunk 0 on connection 2", off, ok)
	}
	// Lanes that do not tell their connection take it.
	p = stopped()
	a, b := &lane{st: &Stream{Conn: -1}}, &lane{st: &Stream{Conn: -1}}
	p.lanes, p.live, p.chunkTime = []*lane{a, b}, 2, time.Millisecond
	p.fly(0, a)
	p.flying[0].since = time.Now().Add(-time.Second)
	if _, ok := p.straggler(b); !ok {
		t.Error("a straggler was not handed out between lanes of unknown connections")
	}
}

// TestTailCopyPicksTheFurthestFromDone: at the tail, a lane with little
// of its own left copies again the chunk handed out last on another
// connection (the last in that lane's queue), never one of its own
// connection's, and none while it has tailDepth chunks of its own.
func TestTailCopyPicksTheFurthestFromDone(t *testing.T) {
	p := stopped()
	idle := &lane{st: &Stream{Conn: 0}}
	sibling := &lane{st: &Stream{Conn: 0}}
	slow := &lane{st: &Stream{Conn: 1}}
	p.lanes = []*lane{idle, sibling, slow}
	p.live = 3
	p.fly(0, slow)
	p.fly(1<<20, slow)
	time.Sleep(time.Millisecond)
	p.fly(2<<20, sibling) // newest, but on the idle lane's connection
	idle.busy = tailDepth
	if off, ok := p.tailCopy(idle); ok {
		t.Fatalf("a lane with %d chunks of its own took chunk %d again", tailDepth, off)
	}
	idle.busy = 0
	off, ok := p.tailCopy(idle)
	if !ok || off != 1<<20 {
		t.Fatalf("tailCopy() = %d, %v; want the slow lane's last chunk at %d", off, ok, 1<<20)
	}
	off, ok = p.tailCopy(idle)
	if !ok || off != 0 {
		t.Fatalf("tailCopy() = %d, %v; want the slow lane's other chunk at 0", off, ok)
	}
	if off, ok := p.tailCopy(idle); ok {
		t.Fatalf("chunk %d handed out a third time, or one of the lane's own connection", off)
	}
}

// TestPlanDepthHoldsOlderLanes: a plan that keeps less in flight per
// stream than the lanes opened before it (a lossy path's) holds their
// workers: each lane takes no more chunks at once than the plan's depth,
// and takes again as one comes back.
func TestPlanDepthHoldsOlderLanes(t *testing.T) {
	p := stopped()
	p.o = ParallelOptions{Size: 64 << 20, Chunk: 256 << 10}
	p.ctx = context.Background()
	p.total = p.o.Size
	l := &lane{st: &Stream{Conn: 0}, workers: 9}
	p.lanes, p.live = []*lane{l}, 1
	plan := window.Plan{Streams: 1, Conns: 1, InFlight: 512 << 10}
	p.apply(plan)
	depth := p.depth(plan)
	if depth >= l.workers {
		t.Fatalf("a depth of %d proves nothing beside %d workers", depth, l.workers)
	}
	take := func() chan bool {
		took := make(chan bool, 1)
		go func() {
			_, ok := p.take(l)
			took <- ok
		}()
		return took
	}
	for range depth {
		select {
		case ok := <-take():
			if !ok {
				t.Fatal("the lane was told to end")
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the lane took fewer chunks than the plan's depth")
		}
	}
	held := take()
	select {
	case <-held:
		t.Fatalf("the lane took a chunk past the plan's depth of %d", depth)
	case <-time.After(100 * time.Millisecond):
	}
	p.mu.Lock()
	l.busy-- // one came back
	p.cond.Broadcast()
	p.mu.Unlock()
	select {
	case ok := <-held:
		if !ok {
			t.Fatal("the lane was told to end")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the lane took nothing once a chunk came back")
	}
}
