package transfer

import "sync"

// runProgress lets the jobs of a run share one Progress, whose calls then
// come one at a time, under mu. It serves both ways a run shows its files:
// the copy engine's, where the Progress follows every file in flight, and
// scp's sessions', which show one file at a time (oneFile): the file that
// started first has the Progress until it ends, and the files beside it
// are not shown.
type runProgress struct {
	mu      *sync.Mutex
	p       Progress // nil: nothing is shown
	oneFile bool
	owner   *jobProgress // under mu, with oneFile: the file shown
}

// newRunProgress shares p. mu, when not nil, is a lock the run holds for
// what else its jobs record, so that a Progress and a Report are never
// called at once; nil for a lock of its own.
func newRunProgress(p Progress, mu *sync.Mutex, oneFile bool) *runProgress {
	if mu == nil {
		mu = new(sync.Mutex)
	}
	return &runProgress{mu: mu, p: p, oneFile: oneFile}
}

// job returns the Progress of one job: with oneFile, each job that copies
// files one after another (a session) needs its own.
func (r *runProgress) job() *jobProgress { return &jobProgress{r: r} }

// jobProgress is one job's view of a runProgress.
type jobProgress struct{ r *runProgress }

func (j *jobProgress) StartFile(name string, size int64) {
	r := j.r
	if r.p == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.oneFile {
		if r.owner != nil {
			return
		}
		r.owner = j
	}
	r.p.StartFile(name, size)
}

func (j *jobProgress) Add(n int) {
	r := j.r
	if r.p == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.oneFile || r.owner == j {
		r.p.Add(n)
	}
}

func (j *jobProgress) EndFile() {
	r := j.r
	if r.p == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.oneFile {
		if r.owner != j {
			return
		}
		r.owner = nil
	}
	r.p.EndFile()
}
