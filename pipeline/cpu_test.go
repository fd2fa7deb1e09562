package pipeline

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/hpncp/hpncp/window"
)

// TestParallelSamplesCPU checks that each interval's sample carries the
// CPU time spent since the last one: the difference of two readings of
// ParallelOptions.CPU, the first taken at the start.
func TestParallelSamplesCPU(t *testing.T) {
	const size = 1 << 20
	src := noise(size)
	dst := &memFile{}
	var opened, closed atomic.Int32
	var samples []window.Sample
	reads := 0
	// A process clock that runs 10 ms per reading, and once stands still.
	_, err := Parallel(context.Background(), counted(src, dst, &opened, &closed), ParallelOptions{
		Size: size, Chunk: 32 << 10, Controller: fixed(2),
		Limiter: rate.NewLimiter(512<<10, 64<<10),
		CPU: func() time.Duration {
			reads++
			if reads > 3 {
				return time.Duration(reads-1) * 10 * time.Millisecond
			}
			return time.Duration(reads) * 10 * time.Millisecond
		},
		Trace: func(s window.Sample, _ window.Plan, _ bool) { samples = append(samples, s) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(samples) < 4 {
		t.Fatalf("%d trace calls, want the first plan and at least 3 intervals", len(samples))
	}
	if reads != len(samples) {
		t.Errorf("CPU read %d times for %d trace calls: want one first reading, then one per interval", reads, len(samples))
	}
	for i, s := range samples[1:] {
		want := 10 * time.Millisecond
		if i == 2 {
			want = 0
		}
		if s.CPU != want {
			t.Errorf("interval %d: CPU %v, want %v", i, s.CPU, want)
		}
	}
}
