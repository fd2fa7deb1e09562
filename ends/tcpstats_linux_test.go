package ends

import (
	"sync"
	"testing"

	"github.com/hpncp/hpncp/internal/sshtest"
	"github.com/hpncp/hpncp/pipeline"
	"github.com/hpncp/hpncp/transfer"
	"github.com/hpncp/hpncp/window"
)

// TestConnSamplerInTrace checks that a copy's window samples carry its
// connections' TCP state, and that a copy held back by a rate limit
// reads as limited by the application.
func TestConnSamplerInTrace(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	srv := sshtest.Start(t, sshtest.Options{})
	src, _ := scratch(t, 3<<20)
	var mu sync.Mutex
	var samples []window.Sample
	h := New(Options{SSH: connOptions(srv)})
	defer h.Close()
	run, err := h.Open(t.Context(), []transfer.Location{{Path: src}, remote("up.bin")}, transfer.Options{
		Parallel: transfer.ParallelOptions{MinSize: 1 << 20, Chunk: 64 << 10,
			Controller: func() *window.Controller { return window.New(window.Config{Fixed: 2}) }},
		// 3 MiB at 2 MiB/s: several intervals of 250 ms.
		Limiter: pipeline.NewLimiter(2 << 20),
		Trace: func(_ string, s window.Sample, _ window.Plan, _ bool) {
			mu.Lock()
			samples = append(samples, s)
			mu.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := run.Copy(t.Context()); err != nil || len(res.Errors) > 0 {
		t.Fatalf("copy: %v, %+v", err, res)
	}
	if len(samples) < 3 {
		t.Fatalf("%d samples traced, want the first plan and at least 2 intervals", len(samples))
	}
	app := false
	var moved int64
	for i, s := range samples[1:] {
		if len(s.Conns) == 0 {
			t.Errorf("interval %d: no connection sampled", i)
		}
		for _, c := range s.Conns {
			if c.SRTT <= 0 || c.Cwnd <= 0 || c.SndBuf <= 0 || c.Conn < 0 {
				t.Errorf("interval %d: connection %+v: want srtt, cwnd and send buffer told", i, c)
			}
			app = app || c.LimitedBy == "app"
			moved += c.Bytes
		}
	}
	// The last bytes may go after the last interval, not the first half.
	if moved < 3<<20/2 {
		t.Errorf("the connections moved %d bytes in the intervals, want at least half the 3 MiB file", moved)
	}
	if !app {
		t.Errorf("a rate-limited copy: no connection read as limited by the application in %+v", samples)
	}
}
