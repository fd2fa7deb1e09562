package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hpncp/hpncp/protocol"
	"github.com/hpncp/hpncp/window"
)

// memFile is a target that many lanes write at once.
type memFile struct {
	mu sync.Mutex
	b  []byte
}

func (m *memFile) WriteAt(p []byte, off int64) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if end := off + int64(len(p)); end > int64(len(m.b)) {
		m.b = append(m.b, make([]byte, end-int64(len(m.b)))...)
	}
	return copy(m.b[off:], p), nil
}

// faultyWriter fails with err once it has written failAfter chunks.
type faultyWriter struct {
	dst       *memFile
	failAfter int32
	err       error
	n         atomic.Int32
}

func (f *faultyWriter) WriteAt(p []byte, off int64) (int, error) {
	if f.n.Add(1) > f.failAfter {
		return 0, f.err
	}
	return f.dst.WriteAt(p, off)
}

// gatedWriter writes to dst once gate is closed, and fails after ten
// seconds of waiting.
type gatedWriter struct {
	dst  *memFile
	gate chan struct{}
}

func (g *gatedWriter) WriteAt(p []byte, off int64) (int, error) {
	select {
	case <-g.gate:
		return g.dst.WriteAt(p, off)
	case <-time.After(10 * time.Second):
		return 0, errors.New("gatedWriter: the gate never opened")
	}
}

func noise(n int) []byte {
	b := make([]byte, n)
	rand.New(rand.NewSource(int64(n))).Read(b)
	return b
}

// counted opens streams from src to dst, counting those opened and closed.
func counted(src []byte, dst *memFile, opened, closed *atomic.Int32) OpenStream {
	return func(context.Context, int) (*Stream, error) {
		opened.Add(1)
		return &Stream{Src: bytes.NewReader(src), Dst: dst, Close: func(bool) error { closed.Add(1); return nil }}, nil
	}
}

func fixed(streams int) *window.Controller { return window.New(window.Config{Fixed: streams}) }

func TestParallelChunkBoundaries(t *testing.T) {
	const chunk = 64 << 10
	for _, size := range []int{0, 1, chunk - 1, chunk, chunk + 1, 10*chunk + 7} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			src := noise(size)
			dst := &memFile{}
			var opened, closed atomic.Int32
			open := counted(src, dst, &opened, &closed)
			var progress atomic.Int64
			res, err := Parallel(context.Background(), open, ParallelOptions{
				Size: int64(size), Chunk: chunk, Depth: 2, Controller: fixed(4),
				Progress: func(n int) { progress.Add(int64(n)) },
			})
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(dst.b, src) || res.Bytes != int64(size) || progress.Load() != int64(size) {
				t.Fatalf("copied %d bytes (progress %d), equal=%v", res.Bytes, progress.Load(), bytes.Equal(dst.b, src))
			}
			if opened.Load() != closed.Load() {
				t.Errorf("opened %d streams, closed %d", opened.Load(), closed.Load())
			}
		})
	}
}

func TestParallelLostStreamGivesChunkToOthers(t *testing.T) {
	const chunk = 32 << 10
	src := noise(40*chunk + 3)
	dst := &memFile{}
	var opens atomic.Int32
	var broken atomic.Int32
	// The healthy lanes write only once both faulty ones broke: on a busy
	// machine a healthy lane could otherwise take every chunk before a
	// faulty one wrote its fourth.
	bothBroken := make(chan struct{})
	open := func(context.Context, int) (*Stream, error) {
		var w interface {
			WriteAt([]byte, int64) (int, error)
		} = &gatedWriter{dst: dst, gate: bothBroken}
		if opens.Add(1) <= 2 {
			// The first two lanes lose their connection after a few chunks.
			w = &faultyWriter{dst: dst, failAfter: 3, err: fmt.Errorf("%w: connection lost", protocol.ErrStreamLost)}
		}
		return &Stream{Src: bytes.NewReader(src), Dst: w, Close: func(b bool) error {
			if b && broken.Add(1) == 2 {
				close(bothBroken)
			}
			return nil
		}}, nil
	}
	res, err := Parallel(context.Background(), open, ParallelOptions{
		Size: int64(len(src)), Chunk: chunk, Depth: 2, Controller: fixed(3),
	})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(dst.b, src) || res.Bytes != int64(len(src)) {
		t.Fatal("target differs from source after lanes were lost")
	}
	if broken.Load() != 2 {
		t.Errorf("%d lanes closed as broken, want 2", broken.Load())
	}
}

func TestParallelFileErrorEndsCopy(t *testing.T) {
	src := noise(1 << 20)
	dst := &memFile{}
	open := func(context.Context, int) (*Stream, error) {
		return &Stream{Src: bytes.NewReader(src), Dst: &faultyWriter{dst: dst, failAfter: 2, err: errors.New("no space left on device")},
			Close: func(bool) error { return nil }}, nil
	}
	_, err := Parallel(context.Background(), open, ParallelOptions{Size: int64(len(src)), Chunk: 32 << 10, Controller: fixed(4)})
	if err == nil || !strings.Contains(err.Error(), "no space left on device") {
		t.Fatalf("err = %v, want the write error", err)
	}
}

func TestParallelShortSourceIsAnError(t *testing.T) {
	src := noise(100 << 10)
	open := func(context.Context, int) (*Stream, error) {
		return &Stream{Src: bytes.NewReader(src), Dst: &memFile{}, Close: func(bool) error { return nil }}, nil
	}
	// The source is shorter than the size it was said to have.
	_, err := Parallel(context.Background(), open, ParallelOptions{Size: 200 << 10, Chunk: 32 << 10, Controller: fixed(2)})
	if err == nil || !strings.Contains(err.Error(), "file shrank") {
		t.Fatalf("err = %v, want a short-read error", err)
	}
}

func TestParallelNoStreamAtAll(t *testing.T) {
	open := func(context.Context, int) (*Stream, error) { return nil, errors.New("connection refused") }
	_, err := Parallel(context.Background(), open, ParallelOptions{Size: 1 << 20, Controller: fixed(2)})
	if err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("err = %v, want the open error", err)
	}
}

func TestParallelEveryStreamLostGivesUp(t *testing.T) {
	src := noise(4 << 20)
	open := func(context.Context, int) (*Stream, error) {
		return &Stream{Src: bytes.NewReader(src),
			Dst:   &faultyWriter{dst: &memFile{}, failAfter: 0, err: fmt.Errorf("%w: EOF", protocol.ErrStreamLost)},
			Close: func(bool) error { return nil }}, nil
	}
	_, err := Parallel(context.Background(), open, ParallelOptions{Size: int64(len(src)), Chunk: 32 << 10, Controller: fixed(2)})
	if !errors.Is(err, protocol.ErrStreamLost) {
		t.Fatalf("err = %v, want the copy to give up with the lost-stream error", err)
	}
}

func TestParallelCancel(t *testing.T) {
	src := noise(8 << 20)
	ctx, cancel := context.WithCancel(context.Background())
	var n atomic.Int64
	open := func(context.Context, int) (*Stream, error) {
		return &Stream{Src: bytes.NewReader(src), Dst: &memFile{}, Close: func(bool) error { return nil }}, nil
	}
	_, err := Parallel(ctx, open, ParallelOptions{Size: int64(len(src)), Chunk: 32 << 10, Controller: fixed(2),
		Progress: func(k int) {
			if n.Add(int64(k)) > 1<<20 {
				cancel()
			}
		}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

func TestParallelFromOffset(t *testing.T) {
	const chunk = 32 << 10
	src := noise(20*chunk + 5)
	for _, off := range []int64{0, 1, chunk, 7*chunk + 3, int64(len(src)) - 1, int64(len(src))} {
		t.Run(fmt.Sprint(off), func(t *testing.T) {
			// The bytes before off are a resumed file's: Parallel must not
			// touch them.
			dst := &memFile{b: bytes.Repeat([]byte{0xee}, int(off))}
			open := func(context.Context, int) (*Stream, error) {
				return &Stream{Src: bytes.NewReader(src), Dst: dst, Close: func(bool) error { return nil }}, nil
			}
			var mu sync.Mutex
			done := map[int64]int{}
			res, err := Parallel(context.Background(), open, ParallelOptions{
				Size: int64(len(src)), Offset: off, Chunk: chunk, Depth: 2, Controller: fixed(3),
				Done: func(o int64, n int) { mu.Lock(); done[o] += n; mu.Unlock() },
			})
			if err != nil {
				t.Fatal(err)
			}
			if res.Bytes != int64(len(src))-off {
				t.Errorf("copied %d bytes, want %d", res.Bytes, int64(len(src))-off)
			}
			if !bytes.Equal(dst.b[:off], bytes.Repeat([]byte{0xee}, int(off))) || !bytes.Equal(dst.b[off:], src[off:]) {
				t.Fatal("target is not the old prefix followed by the source's tail")
			}
			var sum int64
			for o, n := range done {
				if o < off || (o-off)%chunk != 0 || n > chunk {
					t.Errorf("chunk done at %d (%d bytes): not a chunk boundary after %d", o, n, off)
				}
				sum += int64(n)
			}
			if sum != res.Bytes {
				t.Errorf("Done told of %d bytes, copied %d", sum, res.Bytes)
			}
		})
	}
	if _, err := Parallel(context.Background(), nil, ParallelOptions{Size: 10, Offset: 11, Controller: fixed(1)}); err == nil {
		t.Error("an offset past the end was accepted")
	}
}

// Complete comes once, when every byte is in, before the last lane closes:
// what it starts overlaps with the handles' closing.
func TestParallelCompleteBeforeClose(t *testing.T) {
	const chunk, size = 64 << 10, 20*64<<10 + 3
	src := noise(size)
	dst := &memFile{}
	var opened, closed atomic.Int32
	open := counted(src, dst, &opened, &closed)
	calls, closedThen := 0, int32(-1)
	var held int
	_, err := Parallel(context.Background(), open, ParallelOptions{
		Size: size, Chunk: chunk, Depth: 2, Controller: fixed(3),
		Complete: func() {
			calls++
			closedThen = closed.Load()
			dst.mu.Lock()
			held = len(dst.b)
			dst.mu.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if calls != 1 || held != size {
		t.Fatalf("Complete called %d times, with %d of %d bytes in place", calls, held, size)
	}
	if closedThen >= opened.Load() {
		t.Errorf("Complete came after all %d lanes closed", opened.Load())
	}
}

// fullCountReader reads like src, except that its read number failAt
// garbles the buffer and returns a full count beside a lost stream, as
// io.ReaderAt allows.
type fullCountReader struct {
	src    []byte
	failAt int32
	n      *atomic.Int32
}

func (r fullCountReader) ReadAt(p []byte, off int64) (int, error) {
	if r.n.Add(1) == r.failAt {
		for i := range p {
			p[i] = 0xee
		}
		return len(p), fmt.Errorf("%w: reply cut short", protocol.ErrStreamLost)
	}
	return bytes.NewReader(r.src).ReadAt(p, off)
}

// TestParallelFullCountWithErrorIsNotCopied: a read that failed is not
// the file's bytes however many it counts; its chunk goes to another
// lane and the target ends equal to the source.
func TestParallelFullCountWithErrorIsNotCopied(t *testing.T) {
	const chunk = 64 << 10
	src := noise(20 * chunk)
	dst := &memFile{}
	var reads atomic.Int32
	open := func(context.Context, int) (*Stream, error) {
		return &Stream{Src: fullCountReader{src, 5, &reads}, Dst: dst, Close: func(bool) error { return nil }}, nil
	}
	if _, err := Parallel(context.Background(), open, ParallelOptions{
		Size: int64(len(src)), Chunk: chunk, Depth: 2, Controller: fixed(2),
	}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(dst.b, src) {
		t.Fatal("a chunk whose read failed with a full count was written as copied")
	}
}

// stallFirst reads like src, but its read at offset 0 waits for release.
type stallFirst struct {
	src     []byte
	release chan struct{}
	highest *atomic.Int64
}

func (r stallFirst) ReadAt(p []byte, off int64) (int, error) {
	if off == 0 {
		<-r.release
	}
	for {
		h := r.highest.Load()
		if off <= h || r.highest.CompareAndSwap(h, off) {
			break
		}
	}
	return bytes.NewReader(r.src).ReadAt(p, off)
}

// TestParallelBoundsTheSpread: while the first chunk is held up, the
// other lanes go no further than maxAhead past it, so that a journal's
// contiguous watermark never trails the written bytes by more.
func TestParallelBoundsTheSpread(t *testing.T) {
	const chunk = 64 << 10
	defer func(m int64) { maxAhead = m }(maxAhead)
	maxAhead = 16 * chunk
	src := noise(int(maxAhead) + 32*chunk)
	if h := highestWhileFirstHeld(t, src, chunk, 4, maxAhead-chunk); h >= maxAhead {
		t.Errorf("with the first chunk held, a chunk at %d was read: more than %d ahead", h, maxAhead)
	}
}

// highestWhileFirstHeld copies src over streams lanes of Depth 2 while
// the read of its first chunk is held up, and returns the highest offset
// read once the other lanes have run as far as they are allowed; then it
// lets the first chunk go and checks the copy. The lanes have run as far
// as they go once a chunk at or beyond atLeast was read (what the test
// expects of them) and no further one for a while after; a pipeline that
// stops short shows as no chunk read for seconds. So a loaded machine
// that schedules the lanes late makes the test wait, not fail.
func highestWhileFirstHeld(t *testing.T, src []byte, chunk, streams int, atLeast int64) int64 {
	t.Helper()
	dst := &memFile{}
	release := make(chan struct{})
	var highest atomic.Int64
	open := func(context.Context, int) (*Stream, error) {
		return &Stream{Src: stallFirst{src, release, &highest}, Dst: dst, Close: func(bool) error { return nil }}, nil
	}
	done := make(chan error, 1)
	go func() {
		_, err := Parallel(context.Background(), open, ParallelOptions{
			Size: int64(len(src)), Chunk: chunk, Depth: 2, Controller: fixed(streams),
		})
		done <- err
	}()
	prev, moved := int64(-1), time.Now()
	for {
		time.Sleep(10 * time.Millisecond)
		h := highest.Load()
		if h != prev {
			prev, moved = h, time.Now()
			continue
		}
		quiet := time.Since(moved)
		if (h >= atLeast && quiet > 200*time.Millisecond) || quiet > 5*time.Second {
			break
		}
	}
	h := highest.Load()
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(dst.b, src) {
		t.Fatalf("%d streams: the target differs from the source", streams)
	}
	return h
}

// stuckReader reads like src, except on a lane stuck for good: its reads
// wait until the lane is abandoned (Abort) and then fail as a lost
// stream, or, if it never is, return the bytes after wait.
type stuckReader struct {
	src      []byte
	wait     time.Duration
	aborted  chan struct{}
	reads    *atomic.Int32
	returned *atomic.Int32 // stuck reads that came back with bytes
}

func (r stuckReader) ReadAt(p []byte, off int64) (int, error) {
	r.reads.Add(1)
	select {
	case <-r.aborted:
		return 0, fmt.Errorf("%w: abandoned", protocol.ErrStreamLost)
	case <-time.After(r.wait):
		r.returned.Add(1)
		return bytes.NewReader(r.src).ReadAt(p, off)
	}
}

// TestParallelTailCopiesAbandonSlowLane: where lanes can be abandoned,
// the chunks a stuck lane holds when every chunk is handed out are
// copied again by the others, the copy ends without waiting for it, and
// the stuck lane is abandoned, its reads failing without a byte
// written. Where they cannot, the copy waits for the stuck lane.
func TestParallelTailCopiesAbandonSlowLane(t *testing.T) {
	const chunk = 64 << 10
	src := noise(40*chunk + 5)
	for _, abandon := range []bool{true, false} {
		dst := &memFile{}
		var opened atomic.Int32
		var stuckReads, returned atomic.Int32
		aborted := make(chan struct{})
		wait := time.Second
		if abandon {
			wait = 10 * time.Second
		}
		open := func(context.Context, int) (*Stream, error) {
			n := opened.Add(1)
			st := &Stream{Src: bytes.NewReader(src), Dst: dst, Conn: int(n), Close: func(bool) error { return nil }}
			if n == 1 {
				st.Src = stuckReader{src, wait, aborted, &stuckReads, &returned}
			}
			if abandon {
				var once sync.Once
				st.Abort = func() {
					if n == 1 {
						once.Do(func() { close(aborted) })
					}
				}
			}
			return st, nil
		}
		start := time.Now()
		_, err := Parallel(context.Background(), open, ParallelOptions{
			Size: int64(len(src)), Chunk: chunk, Depth: 2, Controller: fixed(4),
		})
		took := time.Since(start)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(dst.b, src) {
			t.Fatalf("abandon %v: the target differs from the source", abandon)
		}
		switch {
		case abandon && took > 5*time.Second:
			t.Errorf("the copy waited %s for the stuck lane", took)
		case abandon && returned.Load() != 0:
			t.Errorf("%d reads of the abandoned lane came back with bytes", returned.Load())
		case abandon && stuckReads.Load() == 0:
			t.Error("the stuck lane read nothing: the test proves nothing")
		case !abandon && took < wait:
			t.Errorf("without Abort the copy ended after %s, before the stuck lane's reads", took)
		}
	}
}

// trackedWriter writes to dst after delay, counting the writes under way.
type trackedWriter struct {
	dst     *memFile
	delay   time.Duration
	writing *atomic.Int32
}

func (w trackedWriter) WriteAt(p []byte, off int64) (int, error) {
	w.writing.Add(1)
	defer w.writing.Add(-1)
	time.Sleep(w.delay)
	return w.dst.WriteAt(p, off)
}

// TestParallelCompleteWaitsForSecondCopies: where a slow lane's chunks
// were copied again by others (an upload's lanes cannot be abandoned),
// Complete waits until the slow lane's own copies are written: a write
// landing after it would change the times it sets.
func TestParallelCompleteWaitsForSecondCopies(t *testing.T) {
	const chunk = 64 << 10
	defer func(a, m int64) { minAhead, maxAhead = a, m }(minAhead, maxAhead)
	minAhead, maxAhead = 4*chunk, 4*chunk
	src := noise(24 * chunk)
	dst := &memFile{}
	var writing, opened atomic.Int32
	open := func(context.Context, int) (*Stream, error) {
		n := opened.Add(1)
		w := trackedWriter{dst: dst, writing: &writing}
		if n == 1 {
			w.delay = 400 * time.Millisecond
		}
		return &Stream{Src: bytes.NewReader(src), Dst: w, Conn: int(n), Close: func(bool) error { return nil }}, nil
	}
	var hedged atomic.Bool
	during := int32(-1)
	_, err := Parallel(context.Background(), open, ParallelOptions{
		Size: int64(len(src)), Chunk: chunk, Depth: 2, Controller: fixed(4),
		Complete: func() { during = writing.Load() },
		Logf: func(format string, args ...any) {
			if strings.Contains(fmt.Sprintf(format, args...), "copied again") {
				hedged.Store(true)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(dst.b, src) {
		t.Fatal("the target differs from the source")
	}
	if !hedged.Load() {
		t.Fatal("no chunk was copied again: the test proves nothing")
	}
	if during != 0 {
		t.Errorf("Complete came with %d writes under way", during)
	}
}
