package pipeline

import (
	"bytes"
	"context"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hpncp/hpncp/window"
)

// slowWriter writes to dst after a pause per chunk: a lane whose path is
// slow.
type slowWriter struct {
	dst   *memFile
	pause time.Duration
}

func (w slowWriter) WriteAt(p []byte, off int64) (int, error) {
	time.Sleep(w.pause)
	return w.dst.WriteAt(p, off)
}

// samplesOf copies src over lanes whose targets target makes (i counts the
// lanes opened from 0) and returns every interval's sample.
func samplesOf(t *testing.T, src []byte, chunk, depth, streams int, target func(i int, dst *memFile) io.WriterAt) []window.Sample {
	t.Helper()
	dst := &memFile{}
	var opened atomic.Int32
	open := func(context.Context, int) (*Stream, error) {
		i := int(opened.Add(1)) - 1
		return &Stream{Src: bytes.NewReader(src), Dst: target(i, dst), Close: func(bool) error { return nil }}, nil
	}
	var mu sync.Mutex
	var samples []window.Sample
	res, err := Parallel(context.Background(), open, ParallelOptions{
		Size: int64(len(src)), Chunk: chunk, Depth: depth, Controller: fixed(streams),
		Trace: func(s window.Sample, _ window.Plan, _ bool) {
			mu.Lock()
			defer mu.Unlock()
			if s.Elapsed > 0 {
				samples = append(samples, s)
			}
		},
	})
	if err != nil || res.Bytes != int64(len(src)) {
		t.Fatalf("copied %d of %d bytes: %v", res.Bytes, len(src), err)
	}
	if !bytes.Equal(dst.b, src) {
		t.Fatal("the target differs from the source")
	}
	mu.Lock()
	defer mu.Unlock()
	return samples
}

// midCopy returns the samples after the first (lanes opening) that end
// with more than tail bytes left: every chunk was not yet handed out.
func midCopy(samples []window.Sample, tail int64) []window.Sample {
	var mid []window.Sample
	for i, s := range samples {
		if i > 0 && s.Remaining > tail {
			mid = append(mid, s)
		}
	}
	return mid
}

// TestParallelSpreadWaitIsNotAppLimited: one lane's path is slow, so the
// fast lanes run up to the spread bound and wait for its chunk. The
// slowest stream, the path, limits the copy then: the intervals must
// reach the controller, not be skipped as app-limited. The fast lanes
// take 5 ms a chunk, not nothing: at memory speed the rate so far once
// told the slow lane that the rest would take less than its chunk
// (slowAtTail), it took no more, and the copy ended within the first
// interval, with nothing to judge. 32 MiB at that pace are about eight
// intervals: 16 MiB once gave CI (-race, loaded) four, two of them
// before the tail.
func TestParallelSpreadWaitIsNotAppLimited(t *testing.T) {
	const chunk = 32 << 10
	defer func(m int64) { maxAhead = m }(maxAhead)
	maxAhead = 1 << 20
	src := noise(32 << 20)
	samples := samplesOf(t, src, chunk, 2, 4, func(i int, dst *memFile) io.WriterAt {
		if i == 0 {
			return slowWriter{dst, 100 * time.Millisecond}
		}
		return slowWriter{dst, 5 * time.Millisecond}
	})
	mid := midCopy(samples, 2*maxAhead)
	if len(mid) < 3 {
		t.Fatalf("%d intervals before the tail (%+v): want at least 3 to judge", len(mid), samples)
	}
	for i, s := range mid {
		if s.AppLimited {
			t.Errorf("interval %d (%d bytes, %d left) marked app-limited while the fast lanes waited for the slow one", i+1, s.Bytes, s.Remaining)
		}
	}
}

// TestParallelBusyLanesAreNotAppLimited: every lane is busy with a slow
// path; no interval before the tail is app-limited.
func TestParallelBusyLanesAreNotAppLimited(t *testing.T) {
	const chunk = 32 << 10
	src := noise(12 << 20)
	samples := samplesOf(t, src, chunk, 2, 4, func(_ int, dst *memFile) io.WriterAt {
		return slowWriter{dst, 20 * time.Millisecond}
	})
	mid := midCopy(samples, 2<<20)
	if len(mid) < 2 {
		t.Fatalf("%d intervals before the tail (%+v): want at least 2 to judge", len(mid), samples)
	}
	for i, s := range mid {
		if s.AppLimited {
			t.Errorf("interval %d (%d bytes, %d left) marked app-limited with every lane busy", i+1, s.Bytes, s.Remaining)
		}
	}
}

// TestParallelTooLittleToTakeIsAppLimited: a file of fewer chunks than
// the lanes could carry leaves lanes with nothing to take; the source,
// not the path, limits every interval.
func TestParallelTooLittleToTakeIsAppLimited(t *testing.T) {
	const chunk = 32 << 10
	src := noise(4 * chunk)
	samples := samplesOf(t, src, chunk, 2, 8, func(_ int, dst *memFile) io.WriterAt {
		return slowWriter{dst, 700 * time.Millisecond}
	})
	if len(samples) < 2 {
		t.Fatalf("%d intervals: want at least 2", len(samples))
	}
	for i, s := range samples {
		if !s.AppLimited {
			t.Errorf("interval %d (%d bytes, %d left) not app-limited: 16 workers had 4 chunks", i+1, s.Bytes, s.Remaining)
		}
	}
}

// TestParallelSpreadFollowsTheLanes: above minAhead, the spread is
// spreadLanes times the lanes' bytes in flight, and no more: more lanes
// may run further ahead of a held chunk, still within a bound a resumed
// copy can afford to send again.
func TestParallelSpreadFollowsTheLanes(t *testing.T) {
	const chunk = 64 << 10
	defer func(lo, hi int64, d time.Duration) { minAhead, maxAhead, spreadTime = lo, hi, d }(minAhead, maxAhead, spreadTime)
	minAhead, maxAhead, spreadTime = 4*chunk, 1<<30, 0
	for _, streams := range []int{2, 6} {
		held := int64(streams * 2 * chunk) // Depth 2
		want := spreadLanes * held
		src := noise(int(want) + 32*chunk)
		// The last chunk handed out starts below the bound; one chunk
		// short of it, the lanes could have taken one more.
		if h := highestWhileFirstHeld(t, src, chunk, streams, want-chunk); h >= want || h < want-chunk {
			t.Errorf("%d streams: with the first chunk held, chunks were read up to %d: want the last below %d, from %d", streams, h, want, want-chunk)
		}
	}
}

// TestSpreadFollowsTheRate: the spread is at least what the copy moves
// in spreadTime at its rate so far, within minAhead and maxAhead, and at
// least spreadLanes times what the lanes held.
func TestSpreadFollowsTheRate(t *testing.T) {
	defer func(lo, hi int64, d time.Duration) { minAhead, maxAhead, spreadTime = lo, hi, d }(minAhead, maxAhead, spreadTime)
	minAhead, maxAhead, spreadTime = 1<<20, 1<<30, 2*time.Second
	const mib = 1 << 20
	for _, tc := range []struct {
		done, held  int64
		lo, hi      int64
		description string
	}{
		{400 * mib, 8 * mib, 195 * mib, 200 * mib, "100 MiB/s for 2 s"},
		{4 * mib, 8 * mib, 32 * mib, 32 * mib, "the lanes' four times 8 MiB"},
		{0, 0, 1 * mib, 1 * mib, "nothing copied: minAhead"},
		{8000 * mib, 8 * mib, 1 << 30, 1 << 30, "maxAhead"},
	} {
		p := &parallel{began: time.Now().Add(-4 * time.Second), done: tc.done, peakHeld: tc.held}
		if got := p.spread(); got < tc.lo || got > tc.hi {
			t.Errorf("%s: spread %d MiB, want %d to %d", tc.description, got/mib, tc.lo/mib, tc.hi/mib)
		}
	}
}

// stallLane reads like src, but waits for release before every read.
type stallLane struct {
	src     []byte
	release chan struct{}
}

func (r stallLane) ReadAt(p []byte, off int64) (int, error) {
	<-r.release
	return bytes.NewReader(r.src).ReadAt(p, off)
}

// TestParallelHedgesAStraggler: a lane that stops moving (its connection
// hit by loss) holds a chunk the spread bound waits for; the other lanes
// copy it again and finish the file without it, every chunk checked
// once. Without the second copy they stood at the bound until the slow
// lane moved.
func TestParallelHedgesAStraggler(t *testing.T) {
	const chunk = 64 << 10
	defer func(lo, hi int64) { minAhead, maxAhead = lo, hi }(minAhead, maxAhead)
	minAhead, maxAhead = 4*chunk, 4*chunk
	src := noise(64 * chunk)
	dst := &memFile{}
	release := make(chan struct{})
	var opened atomic.Int32
	open := func(context.Context, int) (*Stream, error) {
		var r io.ReaderAt = bytes.NewReader(src)
		if opened.Add(1) == 1 {
			r = stallLane{src, release}
		}
		return &Stream{Src: r, Dst: dst, Close: func(bool) error { return nil }}, nil
	}
	var mu sync.Mutex
	seen := map[int64]int{}
	all := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := Parallel(context.Background(), open, ParallelOptions{
			Size: int64(len(src)), Chunk: chunk, Depth: 1, Controller: fixed(4),
			Done: func(off int64, n int) {
				mu.Lock()
				defer mu.Unlock()
				seen[off]++
				if len(seen) == 64 {
					close(all)
				}
			},
		})
		done <- err
	}()
	select {
	case <-all:
	case <-time.After(20 * time.Second):
		mu.Lock()
		n := len(seen)
		mu.Unlock()
		close(release)
		<-done
		t.Fatalf("with one lane stalled, %d of 64 chunks were copied: the others waited for it", n)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for off, n := range seen {
		if n != 1 {
			t.Errorf("chunk at %d reported copied %d times, want once", off, n)
		}
	}
	if !bytes.Equal(dst.b, src) {
		t.Fatal("the target differs from the source")
	}
}
