package main

import (
	"fmt"
	"testing"
	"time"

	"github.com/hpncp/hpncp/bench"
)

// TestBenchConfigsAreCopyFlags checks that each bench configuration copies
// with the settings a user's copy gets from the flags the configuration
// names (Config.Meaning), so that the table measures what users run.
func TestBenchConfigsAreCopyFlags(t *testing.T) {
	for _, c := range bench.Configs {
		t.Run(c.Name, func(t *testing.T) {
			var o copyOptions
			o.flags()
			o.Streams, o.Connections, o.Chunk, o.Window, o.CC = "auto", "auto", "1MiB", "auto", "auto"
			o.HPNDisabled, o.Legacy, o.Force = c.HPNDisabled, c.Legacy, true
			if c.Streams > 0 {
				o.Streams = fmt.Sprint(c.Streams)
			}
			tune, err := o.tuning(false)
			if err != nil {
				t.Fatal(err)
			}
			got, want := c.CopyOptions(), tune.parallel
			if got.Parallel.Chunk != want.Chunk || got.Parallel.MinSize != want.MinSize || got.Parallel.Depth != want.Depth {
				t.Errorf("chunk %d, min size %d, depth %d; the flags give %d, %d, %d",
					got.Parallel.Chunk, got.Parallel.MinSize, got.Parallel.Depth, want.Chunk, want.MinSize, want.Depth)
			}
			if got.Skip != o.skipMode() {
				t.Errorf("skip mode %v, --force gives %v", got.Skip, o.skipMode())
			}
			if tar := o.tarOptions(c.Legacy); got.Tar != tar {
				t.Errorf("tar options %+v, the flags give %+v", got.Tar, tar)
			}
			// The same controller: the same first plans on any path.
			for _, rtt := range []time.Duration{0, time.Millisecond, 50 * time.Millisecond, 300 * time.Millisecond} {
				g, w := got.Parallel.Controller().Start(rtt), want.Controller().Start(rtt)
				if g != w {
					t.Errorf("rtt %v: first plan %v; the flags give %v", rtt, g, w)
				}
			}
		})
	}
}
