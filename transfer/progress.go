package transfer

import "sync"

// FilesProgress is a Progress that follows every file of a run apart,
// however many are in flight: a line of the run's totals, or rsync's
// --progress, which tells each file's end. Given one, a run tells it of
// all its files, the ones copied side by side included (scp's sessions,
// tar mode's streams beside its large files), where a plain Progress is
// shown one file at a time; and a tar stream's batch counts as the files
// it carries.
type FilesProgress interface {
	Progress
	// Start begins following files, one file or a tar stream's batch of
	// them, of size bytes in all; the bytes and the end are told to what
	// it returns.
	Start(name string, files int, size int64) FileProgress
}

// FileProgress follows the bytes of what FilesProgress.Start began.
type FileProgress interface {
	Add(n int)
	End()
}

// runProgress lets the jobs of a run share one Progress, whose calls then
// come one at a time, under mu. It serves both ways a run shows its files:
// the copy engine's, where the Progress follows every file in flight, and
// scp's sessions', which show one file at a time (oneFile): the file that
// started first has the Progress until it ends, and the files beside it
// are not shown. A FilesProgress is shown every file (files).
type runProgress struct {
	mu      *sync.Mutex
	p       Progress      // nil: nothing is shown
	files   FilesProgress // p, when it follows files apart
	oneFile bool
	owner   *jobProgress // under mu, with oneFile: the file shown
}

// newRunProgress shares p. mu, when not nil, is a lock the run holds for
// what else its jobs record, so that a Progress and a Report are never
// called at once; nil for a lock of its own. A job of another run (a
// run inside a run: scp's local copies, tar mode's side copies) hands
// its FilesProgress on, with the lock that guards it.
func newRunProgress(p Progress, mu *sync.Mutex, oneFile bool) *runProgress {
	if j, ok := p.(*jobProgress); ok && j.r.files != nil {
		return &runProgress{mu: j.r.mu, p: p, files: j.r.files}
	}
	if mu == nil {
		mu = new(sync.Mutex)
	}
	r := &runProgress{mu: mu, p: p, oneFile: oneFile}
	r.files, _ = p.(FilesProgress)
	return r
}

// job returns the Progress of one job: with oneFile, each job that copies
// files one after another (a session) needs its own.
func (r *runProgress) job() *jobProgress { return &jobProgress{r: r} }

// jobProgress is one job's view of a runProgress.
type jobProgress struct {
	r   *runProgress
	cur FileProgress // under r.mu, with r.files: the job's file in flight
}

// fileProgress returns the Progress for one file of p's job: a job of
// its own when p's run tells a FilesProgress of every file apart, for
// the files of one job (the copy engine's) are copied many at once.
func fileProgress(p Progress) Progress {
	if j, ok := p.(*jobProgress); ok && j.r.files != nil {
		return j.r.job()
	}
	return p
}

// startFiles starts a batch of files on p, which counts them as files
// when it follows files apart, and as one file otherwise.
func startFiles(p Progress, name string, files int, size int64) {
	if j, ok := p.(*jobProgress); ok {
		j.start(name, files, size)
		return
	}
	p.StartFile(name, size)
}

func (j *jobProgress) StartFile(name string, size int64) { j.start(name, 1, size) }

func (j *jobProgress) start(name string, files int, size int64) {
	r := j.r
	if r.p == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.files != nil {
		j.cur = r.files.Start(name, files, size)
		return
	}
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
	switch {
	case r.files != nil:
		if j.cur != nil {
			j.cur.Add(n)
		}
	case !r.oneFile || r.owner == j:
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
	if r.files != nil {
		if j.cur != nil {
			j.cur.End()
			j.cur = nil
		}
		return
	}
	if r.oneFile {
		if r.owner != j {
			return
		}
		r.owner = nil
	}
	r.p.EndFile()
}
