package transfer

import (
	"os"
	"runtime/debug"
	"sync"
)

// A tar plan is live for the whole copy of its tree: at a million files
// it is most of the heap (about 250 bytes a file), and Go's default
// GOGC of 100 lets the heap grow to twice what is live before each
// collection. From bigPlanFiles files on, a plan has the collector run at
// bigPlanGC instead, so that the heap stays within half as much again as
// the plan; what that costs is collections twice as often while the tree
// is copied. A GOGC the user set is left as it is.
const (
	bigPlanFiles = 50_000
	bigPlanGC    = 50
)

// planGC counts the plans that asked for the lower setting, which holds
// while any of them runs.
var planGC struct {
	sync.Mutex
	n    int
	prev int
}

// lowerGC sets the collector to bigPlanGC, unless GOGC says otherwise,
// until the returned function is called.
func lowerGC() (restore func()) {
	if os.Getenv("GOGC") != "" {
		return func() {}
	}
	planGC.Lock()
	defer planGC.Unlock()
	if planGC.n == 0 {
		planGC.prev = debug.SetGCPercent(bigPlanGC)
	}
	planGC.n++
	var once sync.Once
	return func() {
		once.Do(func() {
			planGC.Lock()
			defer planGC.Unlock()
			if planGC.n--; planGC.n == 0 {
				debug.SetGCPercent(planGC.prev)
			}
		})
	}
}
