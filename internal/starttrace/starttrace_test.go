package starttrace

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestNilTraceIsSilent(t *testing.T) {
	var tr *Trace
	tr.Mark(TCP)
	tr.SetRTT(time.Second)
	if From(context.Background()) != nil || tr.Summary() != "" || tr.Steps() != nil {
		t.Error("a nil trace recorded something")
	}
}

func TestSummaryCountsRoundTrips(t *testing.T) {
	tr := New(0)
	// Two round trips of 100 ms: a sleep that overran by half a round
	// trip would count three. At 20 ms, one of 40 ms took 53 under a
	// loaded go test ./....
	tr.SetRTT(100 * time.Millisecond)
	tr.SetRTT(time.Second) // a later connection's connect does not count
	tr.Mark(TCP)
	time.Sleep(200 * time.Millisecond)
	tr.Mark(Auth)
	tr.Mark(TCP) // a second connection: the first mark stands
	tr.Mark(FirstByte)
	tr.Mark(SFTP) // after the first byte: not part of the start
	got := tr.Summary()
	for _, want := range []string{"2 round trips before the first byte (tcp 0, auth 2, first-byte 0;", "RTT of 100.0ms"} {
		if !strings.Contains(got, want) {
			t.Errorf("summary %q, want it to contain %q", got, want)
		}
	}
	if n := len(tr.Steps()); n != 3 {
		t.Errorf("%d steps, want 3: %v", n, tr.Steps())
	}
}

func TestSummaryWithoutRTTGivesTimes(t *testing.T) {
	tr := New(0)
	tr.Mark(TCP)
	if got := tr.Summary(); !strings.Contains(got, "up to the end of tcp (tcp at ") {
		t.Errorf("summary %q, want the steps' times", got)
	}
}
