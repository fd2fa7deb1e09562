package main

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/hpncp/hpncp/bench"
	"github.com/hpncp/hpncp/transfer"
)

// TestBenchConfigsAreCopyFlags checks that each bench configuration is the
// copy job a user's command line with the flags the configuration names
// (Config.Meaning) makes, so that the table measures what users run.
func TestBenchConfigsAreCopyFlags(t *testing.T) {
	for _, c := range bench.Configs {
		t.Run(c.Name, func(t *testing.T) {
			o := defaultCopyOptions()
			o.HPNDisabled, o.Legacy, o.Force = c.HPNDisabled, c.Legacy, true
			if c.Streams > 0 {
				o.Streams = fmt.Sprint(c.Streams)
			}
			tune, err := o.tuning()
			if err != nil {
				t.Fatal(err)
			}
			got := c.Job(transfer.Location{Path: "a"}, transfer.Location{Host: "h", Path: "b"})
			if got.Tuning != tune {
				t.Errorf("tuning %+v; the flags give %+v", got.Tuning, tune)
			}
			if got.Legacy != o.Legacy {
				t.Errorf("legacy %v; the flags give %v", got.Legacy, o.Legacy)
			}
			want := transfer.Options{Skip: o.skipMode(), Tar: o.tarOptions()}
			if !reflect.DeepEqual(got.Options, want) {
				t.Errorf("options %+v; the flags give %+v", got.Options, want)
			}
		})
	}
}
