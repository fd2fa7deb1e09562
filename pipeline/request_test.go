package pipeline

import (
	"bytes"
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hpncp/hpncp/window"
)

// countingReader records the largest read and how many reads were in
// flight at once; each read takes a little while, as a round trip does.
// Reads are held until fill are in flight at once (or the pipeline has
// stopped asking for a while), so how many a pipeline keeps in flight
// does not hang on how fast a loaded machine schedules it.
type countingReader struct {
	src     []byte
	fill    int32
	active  atomic.Int32
	most    atomic.Int32
	largest atomic.Int32

	once, done sync.Once
	full       chan struct{}
}

// held waits until fill reads are in flight. A pipeline that keeps
// fewer in flight never gets there; after a second with no new read the
// reads go on, and the count the test checks shows the shortfall.
func (r *countingReader) held(n int32) {
	r.once.Do(func() { r.full = make(chan struct{}) })
	if n >= r.fill {
		r.release()
		return
	}
	seen := r.most.Load()
	for {
		select {
		case <-r.full:
			return
		case <-time.After(time.Second):
			if now := r.most.Load(); now == seen {
				r.release()
				return
			} else {
				seen = now
			}
		}
	}
}

func (r *countingReader) release() { r.done.Do(func() { close(r.full) }) }

func (r *countingReader) ReadAt(p []byte, off int64) (int, error) {
	n := r.active.Add(1)
	defer r.active.Add(-1)
	for {
		m := r.most.Load()
		if n <= m || r.most.CompareAndSwap(m, n) {
			break
		}
	}
	for {
		l := r.largest.Load()
		if int32(len(p)) <= l || r.largest.CompareAndSwap(l, int32(len(p))) {
			break
		}
	}
	r.held(n)
	time.Sleep(2 * time.Millisecond)
	return copy(p, r.src[off:]), nil
}

func TestParallelRequestSize(t *testing.T) {
	for _, tc := range []struct {
		name             string
		chunk, depth     int
		request          int
		wantLargest      int
		wantMostInFlight int
	}{
		// The bytes in flight stay Depth × Chunk, in requests.
		{"requests below the chunk", 64 << 10, 3, 16 << 10, 16 << 10, 12},
		{"request above the chunk changes nothing", 64 << 10, 3, 1 << 20, 64 << 10, 3},
		// Depth from the plan: its InFlight (a 2 MiB channel window) in
		// requests, and one more.
		{"depth from the plan", 1 << 20, 0, 256 << 10, 256 << 10, 9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := noise(200<<10*16 + 5)
			r := &countingReader{src: src, fill: int32(tc.wantMostInFlight)}
			dst := &memFile{}
			var mu sync.Mutex
			lanes := 0
			open := func(context.Context, int) (*Stream, error) {
				mu.Lock()
				defer mu.Unlock()
				lanes++
				return &Stream{Src: r, Dst: dst, Close: func(bool) error { return nil }}, nil
			}
			res, err := Parallel(context.Background(), open, ParallelOptions{
				Size: int64(len(src)), Chunk: tc.chunk, Depth: tc.depth, Request: tc.request,
				Controller: window.New(window.Config{Fixed: 1}),
			})
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(dst.b, src) || res.Bytes != int64(len(src)) {
				t.Fatal("target differs from source")
			}
			if lanes != 1 {
				t.Fatalf("%d lanes opened, want 1", lanes)
			}
			if got := int(r.largest.Load()); got != tc.wantLargest {
				t.Errorf("largest read %d bytes, want %d", got, tc.wantLargest)
			}
			// Never more in flight than asked: that is the memory bound.
			// And close to it, or the stream's window would starve.
			if got := int(r.most.Load()); got > tc.wantMostInFlight || got < (tc.wantMostInFlight+1)/2 {
				t.Errorf("%d reads in flight at most, want %d", got, tc.wantMostInFlight)
			}
		})
	}
}
