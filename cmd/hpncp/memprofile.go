package main

import (
	"context"
	"fmt"
	"os"
	"runtime/metrics"
	"runtime/pprof"
	"time"
)

// heapObjects is the runtime metric of the bytes in live and not yet
// swept heap objects: what grows with a run's per-file state.
const heapObjects = "/memory/classes/heap/objects:bytes"

// startMemProfile writes a heap profile to path each time the heap has
// grown by a tenth past the size at the last profile, sampled every
// quarter second, until the returned function is called: the file ends
// up showing the allocations live near the run's peak, which a profile
// taken at the end, after the run let go of its listings, would not.
func startMemProfile(ctx context.Context, path string) (stop func(), err error) {
	write := func() error {
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		if err := pprof.WriteHeapProfile(f); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	}
	if err := write(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		sample := []metrics.Sample{{Name: heapObjects}}
		var high uint64
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			metrics.Read(sample)
			if v := sample[0].Value.Uint64(); v > high+high/10 {
				high = v
				if err := write(); err != nil {
					fmt.Fprintf(os.Stderr, "hpncp: error: write heap profile %s: %v\n", path, err)
					return
				}
			}
		}
	}()
	return func() { cancel(); <-done }, nil
}
