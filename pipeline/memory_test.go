package pipeline

import (
	"runtime/debug"
	"testing"
)

func gcPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

func TestHoldMemoryLowersGOGCAndRestoresIt(t *testing.T) {
	if gcFromEnv() {
		t.Skip("GOGC is set in the environment, which holdMemory leaves alone")
	}
	before := gcPercent()
	// A few lanes: the default stands.
	holdMemory(8 << 20)
	if got := gcPercent(); got != before {
		t.Errorf("GOGC %d with 8 MiB held, want %d", got, before)
	}
	// 32 lanes of 2.5 MiB: the heap may grow by the slack, not double.
	holdMemory(72 << 20)
	if got, want := gcPercent(), 100*gcSlack/(80<<20+gcBase); got != want {
		t.Errorf("GOGC %d with 80 MiB held, want %d", got, want)
	}
	holdMemory(1 << 30)
	if got := gcPercent(); got != gcFloor {
		t.Errorf("GOGC %d with over 1 GiB held, want the floor %d", got, gcFloor)
	}
	holdMemory(-(1<<30 + 80<<20))
	if got := gcPercent(); got != before {
		t.Errorf("GOGC %d once nothing is held, want %d again", got, before)
	}
}
