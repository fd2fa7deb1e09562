package pipeline

import (
	"os"
	"runtime/debug"
	"sync"
)

// While parallel copies run, the garbage collector's target (GOGC) is
// lowered so that garbage stays within gcSlack of what is live, rather
// than growing the heap to twice it: x/crypto/ssh allocates every packet
// it receives afresh, a gigabyte of garbage per gigabyte downloaded. With
// the default, 32 streams downloading peaked at 225 to 252 MiB of RSS on
// loopback; with the heap held to the lanes' buffers plus gcSlack, at 170
// to 180 MiB, at no measurable cost in CPU. With fewer than about a dozen
// streams the default stands, and a GOGC set in the environment is left
// alone.
const (
	gcSlack = 48 << 20
	// gcBase is what the rest of the process is assumed to hold.
	gcBase = 16 << 20
	// gcFloor bounds the lowered GOGC: the heap may always grow by a
	// quarter, so that a process holding much more than assumed (the
	// plan of a huge tree) is not collected over and over.
	gcFloor = 25
)

var gcBudget struct {
	sync.Mutex
	held int64 // bytes the lanes of the running copies may hold
	prev int   // GOGC before the first of them started
}

var gcFromEnv = sync.OnceValue(func() bool { return os.Getenv("GOGC") != "" })

// holdMemory adds delta bytes to what the running copies' lanes hold and
// sets GOGC to match; when they hold nothing any more, GOGC is restored.
func holdMemory(delta int64) {
	if gcFromEnv() {
		return
	}
	gcBudget.Lock()
	defer gcBudget.Unlock()
	first := gcBudget.held == 0
	gcBudget.held = max(gcBudget.held+delta, 0)
	if gcBudget.held == 0 {
		if !first {
			debug.SetGCPercent(gcBudget.prev)
		}
		return
	}
	pct := int(min(max(100*gcSlack/(gcBudget.held+gcBase), gcFloor), 100))
	old := debug.SetGCPercent(pct)
	if first {
		gcBudget.prev = old
	}
}
