package pipeline

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/hpncp/hpncp/window"
)

// TestParallelTracesEveryInterval checks that the trace hook sees the
// first plan and then every interval's sample, with the connections' TCP
// state read for that interval.
func TestParallelTracesEveryInterval(t *testing.T) {
	const size = 1 << 20
	src := noise(size)
	dst := &memFile{}
	var opened, closed atomic.Int32
	type call struct {
		s       window.Sample
		p       window.Plan
		changed bool
	}
	var calls []call
	reads := 0
	start := time.Now()
	// 1 MiB at 512 KiB/s takes about 2 s: several intervals of 250 ms.
	res, err := Parallel(context.Background(), counted(src, dst, &opened, &closed), ParallelOptions{
		Size: size, Chunk: 32 << 10, Controller: fixed(2),
		Limiter: rate.NewLimiter(512<<10, 64<<10),
		Conns: func() []window.ConnSample {
			reads++
			return []window.ConnSample{{Cwnd: reads, LimitedBy: "app"}, {Cwnd: 100 + reads}}
		},
		Trace: func(s window.Sample, p window.Plan, changed bool) { calls = append(calls, call{s, p, changed}) },
	})
	if err != nil || res.Bytes != size {
		t.Fatalf("copied %d bytes: %v", res.Bytes, err)
	}
	took := time.Since(start)
	if len(calls) < 4 {
		t.Fatalf("%d trace calls in %v, want the first plan and at least 3 intervals", len(calls), took)
	}
	if c := calls[0]; !c.changed || c.s.Elapsed != 0 || c.s.Conns != nil || c.p.Streams != 2 {
		t.Errorf("first trace call %+v: want the first plan of 2 streams, marked changed, with no sample", c)
	}
	if reads != len(calls) {
		t.Errorf("connections read %d times for %d trace calls: want one first reading, then one per interval", reads, len(calls))
	}
	var bytes int64
	for i, c := range calls[1:] {
		if c.s.Elapsed <= 0 || len(c.s.Conns) != 2 || c.s.Conns[0].Cwnd != i+2 || c.s.Conns[1].Cwnd != 102+i || c.s.Conns[0].LimitedBy != "app" {
			t.Errorf("interval %d: elapsed %v, conns %+v: want that interval's reading", i, c.s.Elapsed, c.s.Conns)
		}
		if c.changed {
			t.Errorf("interval %d: changed with a fixed stream count", i)
		}
		bytes += c.s.Bytes
	}
	if bytes > size {
		t.Errorf("intervals add up to %d bytes, more than the %d copied", bytes, size)
	}
}

// TestParallelAsksForStandby checks that a plan asking for connections
// on standby (a first loss on a long path) reaches Options.Standby once,
// and that a copy whose connections lose nothing asks for none.
func TestParallelAsksForStandby(t *testing.T) {
	// The first plan's 7 streams take 14 MiB at once: the copy must be
	// larger, or every interval is the tail's, which says nothing.
	const size = 48 << 20
	for _, limitedBy := range []string{"loss", "cwnd"} {
		src := noise(size)
		dst := &memFile{}
		var opened, closed atomic.Int32
		var asked []int
		// 48 MiB at 24 MiB/s: several intervals of 400 ms at 100 ms.
		res, err := Parallel(context.Background(), counted(src, dst, &opened, &closed), ParallelOptions{
			Size: size, Chunk: 32 << 10, Controller: window.New(window.Config{}),
			Limiter: rate.NewLimiter(24<<20, 1<<20),
			RTT:     func() time.Duration { return 100 * time.Millisecond },
			Conns: func() []window.ConnSample {
				return []window.ConnSample{{Bytes: 1, LimitedBy: limitedBy}}
			},
			Standby: func(conns int) { asked = append(asked, conns) },
		})
		if err != nil || res.Bytes != size {
			t.Fatalf("copied %d bytes: %v", res.Bytes, err)
		}
		want := 0
		if limitedBy == "loss" {
			want = 1
		}
		if len(asked) != want || (want > 0 && asked[0] != 24) {
			t.Errorf("connections limited by %s: standby asked %v, want %d call(s) for 24", limitedBy, asked, want)
		}
	}
}

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
