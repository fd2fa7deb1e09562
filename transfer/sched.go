package transfer

import (
	"context"
	"errors"
	"io/fs"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/hpncp/hpncp/internal/slots"
	"github.com/hpncp/hpncp/protocol"
)

// A tree is copied as a pipeline: directories are listed and created
// several at once, and every file found becomes a job run beside the
// others. Over a path of 50 ms a small file costs a few round trips and
// next to no bandwidth, so only many files in flight keep the path busy;
// one file after another, 10,000 of them take minutes.

// Bounds of the work in flight at once, with a remote end and with two
// local ones.
const (
	remoteFiles = 1024 // files being copied: what hides the round trips
	// remoteDirs bounds directories being listed or created: a listing
	// takes two round trips on a session of its own (protocol/readdir.go),
	// and a wide tree's level should list in about that time.
	remoteDirs = 64
	// remoteStreams bounds files that each take a session of their own:
	// those too large for one batch and too small for several streams.
	// With the batch sessions, the listing one and the main one it stays
	// within OpenSSH's MaxSessions of 10.
	remoteStreams = 4
	// parallelFiles bounds files on the parallel pipeline, each of which
	// takes as many streams as its window controller plans: several keep
	// the path busy while another sets up or finishes. Three: with a
	// tree's connections dialed at its start, two leave the path idle
	// while one of them starts or ends, and more than three only split
	// the same streams (bench/results-design.md).
	parallelFiles = 3
	// uploadParallelFiles is parallelFiles for uploads. Each file costs
	// about a dozen round trips around its bytes (create, open the
	// streams, close, stat, chmod, rename), and a lone file's plan runs
	// on what the window guessed: side by side, the files hide one
	// another's round trips, their first plans split between them
	// (window's Share), which costs less than a whole plan each two at a
	// time.
	uploadParallelFiles = 5

	localFiles = 4
	localDirs  = 4

	// smallMemory bounds the bytes of the small files held whole in
	// memory at once, moving in one batch each.
	smallMemory = 64 << 20
)

// sched runs a copy's jobs and serialises what they record.
type sched struct {
	// mu guards the Result and the calls of Report, Logf and Progress,
	// which may come from any job.
	mu sync.Mutex
	wg sync.WaitGroup

	files   slots.Slots
	dirs    slots.Slots
	ahead   slots.Slots
	dirJobs slots.Slots // directory jobs started and not done
	memory  *budget
	streams slots.Slots

	fixes   []dirFix // directories whose mode and times -p sets at the end
	retries []retry  // files to try again alone
	// known holds the target directories seen to exist, so that the
	// files of a list (FilesFrom) in one directory stat it once, not
	// once each.
	known map[string]bool
	umask umasks // each end's umask, for new files (umask.go)
	links linkState
}

// dirFix is a directory whose mode and times -p sets once every file
// below it is in place: each file renamed into it changes its times.
type dirFix struct {
	dst   Endpoint
	si    fs.FileInfo
	depth int
}

func newSched(remote bool) *sched {
	files, dirs := localFiles, localDirs
	if remote {
		files, dirs = remoteFiles, remoteDirs
	}
	return &sched{
		files:   slots.New(files),
		dirs:    slots.New(dirs),
		ahead:   slots.New(4 * dirs),
		dirJobs: slots.New(64 * dirs),
		memory:  newBudget(smallMemory),
		streams: slots.New(remoteStreams),
	}
}

// newCopier returns a copier for a run from srcs to target.
func newCopier(o Options, srcs []Endpoint, target Endpoint) *copier {
	remote := target.FS.Label() != ""
	for _, s := range srcs {
		remote = remote || s.FS.Label() != ""
	}
	files := parallelFiles
	if target.FS.Label() != "" {
		files = uploadParallelFiles
	}
	c := &copier{opts: o, res: &Result{MaxStreams: 1}, sched: newSched(remote),
		parallel: slots.New(files)}
	if o.Progress != nil {
		c.opts.Progress = newRunProgress(o.Progress, &c.mu, false).job()
	}
	return c
}

// goDir copies a directory in a job of its own. The job holds one of the
// slots for directories listed ahead until it has handed out every
// entry, and one of the slots for directories while it creates and lists
// it: the next directories are ready by the time the files of this one
// are on their way, and the listings held in memory stay bounded.
//
// When the jobs already started, most of them waiting for a slot, reach
// the bound of dirJobs, the directory is copied at once by the caller,
// depth first, in the slot the caller holds: a job for every directory
// found and not yet listed held memory without bound on a tree wide or
// endless enough (a link loop the walk does not catch, a hostile server).
func (c *copier) goDir(ctx context.Context, src, dst Endpoint, si fs.FileInfo, rel string, depth int, fresh bool, at *walkDir) {
	run := func() {
		if c.dirs.Acquire(ctx) != nil {
			return
		}
		listed := sync.OnceFunc(c.dirs.Release)
		defer listed()
		c.copyDir(ctx, src, dst, si, rel, depth, fresh, listed, at)
	}
	if !c.dirJobs.TryAcquire() {
		run()
		return
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer c.dirJobs.Release()
		if c.ahead.Acquire(ctx) != nil {
			return
		}
		defer c.ahead.Release()
		run()
	}()
}

// goFileJob runs job in a goroutine of its own once one of the slots
// for files is free, holding the slot until job returns; the error job
// returns fails the file src. Regular files and symbolic links share
// these slots.
func (c *copier) goFileJob(ctx context.Context, src Endpoint, job func() error) {
	if c.files.Acquire(ctx) != nil {
		return
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer c.files.Release()
		if err := job(); err != nil {
			c.failFile(src, err)
		}
	}()
}

// goFile copies a regular file in a job of its own. fresh says dst's
// directory was created by this run, so dst cannot exist. A file that
// failed for want of space is kept to be tried again alone (retryAlone).
func (c *copier) goFile(ctx context.Context, src, dst Endpoint, si fs.FileInfo, fresh bool) {
	c.goFileJob(ctx, src, func() error {
		err := c.copyFile(ctx, src, dst, si, fresh)
		if err != nil && noSpace(err) && ctx.Err() == nil {
			c.mu.Lock()
			c.retries = append(c.retries, retry{src, dst, si, err})
			c.mu.Unlock()
			return nil
		}
		return err
	})
}

// retry is a file that failed for want of space while others were in
// flight: it is tried again alone once every other file is done.
type retry struct {
	src, dst Endpoint
	si       fs.FileInfo
	err      error
}

// noSpace reports whether err says the target's disk or quota is full;
// an SFTP server gives no reason (OpenSSH answers SSH_FX_FAILURE).
func noSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) || protocol.ServerFailure(err)
}

// retryAlone copies the files that failed for want of space again, one
// at a time, smallest first: the space the files beside them held is
// free again (failed temporary files are removed), and a file that fits
// alone goes, as it would have one file after another. Once one fails
// for space again, the larger ones are not tried.
func (c *copier) retryAlone(ctx context.Context) {
	rs := c.retries
	c.retries = nil
	sort.SliceStable(rs, func(i, j int) bool { return rs[i].si.Size() < rs[j].si.Size() })
	full := false
	for _, r := range rs {
		err := r.err
		if ctx.Err() == nil && !full {
			err = c.copyFile(ctx, r.src, r.dst, r.si, false)
			full = err != nil && noSpace(err)
		}
		if err != nil {
			c.failFile(r.src, err)
		}
	}
}

// finish waits for every job, then gives the directories -p copied
// their modes and times, deepest first: a directory made read-only or
// unsearchable first would refuse the change to those below it.
func (c *copier) finish(ctx context.Context) {
	c.wg.Wait()
	c.retryAlone(ctx)
	c.linkLater(ctx)
	if ctx.Err() != nil || len(c.fixes) == 0 {
		return
	}
	sort.SliceStable(c.fixes, func(i, j int) bool { return c.fixes[i].depth > c.fixes[j].depth })
	for i := 0; i < len(c.fixes); {
		j := i
		for j < len(c.fixes) && c.fixes[j].depth == c.fixes[i].depth {
			j++
		}
		// The directories of one depth are independent: set them all at
		// once, round trips overlapping.
		for _, f := range c.fixes[i:j] {
			if c.dirs.Acquire(ctx) != nil {
				break
			}
			c.wg.Add(1)
			go func() {
				defer c.wg.Done()
				defer c.dirs.Release()
				c.fixDir(f)
			}()
		}
		c.wg.Wait()
		i = j
	}
	c.fixes = nil
}

func (c *copier) fixDir(f dirFix) { c.setDirAttrs(f.dst, attrsOf(f.si)) }

// addFix records a directory for finish.
func (c *copier) addFix(dst Endpoint, si fs.FileInfo, depth int) {
	c.mu.Lock()
	c.fixes = append(c.fixes, dirFix{dst, si, depth})
	c.mu.Unlock()
}

func (c *copier) knownDir(d Endpoint) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.known[d.String()]
}

func (c *copier) addKnownDir(d Endpoint) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.known == nil {
		c.known = map[string]bool{}
	}
	c.known[d.String()] = true
}

// record counts a file done.
func (c *copier) record(fn func(r *Result)) {
	c.mu.Lock()
	fn(c.res)
	c.mu.Unlock()
}

// isRemote reports whether an end is reached over the network.
func isRemote(f FS) bool { return f.Label() != "" }

// reserve waits for what copying src to dst the ordinary way holds: a
// slot on the parallel pipeline for a big file; else, with a remote end, a
// slot of the files that take a session of their own (a download) or a
// share of the main one (an upload), and buffers; and the memory of a
// small file that arrives whole. The function it returns gives it all
// back.
func (c *copier) reserve(ctx context.Context, src, dst Endpoint, si fs.FileInfo, big bool) (func(), error) {
	var gives []func()
	release := func() {
		for _, g := range gives {
			g()
		}
	}
	_, whole := src.FS.(smallGetter)
	whole = whole && si.Size() <= protocol.SmallMax
	sem := c.streams
	switch {
	case big:
		sem = c.parallel
	case whole || !(isRemote(src.FS) || isRemote(dst.FS)):
		sem = nil
	}
	if sem != nil {
		if err := sem.Acquire(ctx); err != nil {
			return nil, err
		}
		gives = append(gives, sem.Release)
	}
	if whole {
		give, err := c.memory.take(ctx, si.Size())
		if err != nil {
			release()
			return nil, err
		}
		gives = append(gives, give)
	}
	return release, nil
}

// sameTarget waits, when dst is the target of an earlier source operand
// too, until that one is done: as with scp, the later one wins.
func (c *copier) sameTarget(seen map[string]bool, dst string) {
	if seen[dst] {
		c.wg.Wait()
	}
	seen[dst] = true
}

// since formats the time a file took for the -v log.
func since(start time.Time) time.Duration { return time.Since(start).Round(time.Millisecond) }
