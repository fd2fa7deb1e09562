package transfer

import (
	"context"

	"github.com/hpncp/hpncp/internal/slots"
)

// Side copies: the files of a tar mode tree that tar leaves out (large,
// or with a target to look at) go over the SFTP pipeline, copyFile,
// beside the streams.

// streamBeside runs the tar streams of small, and on upload of newDirs,
// while the files of early go over SFTP. The streams and the side copies
// share the run's Progress, which shows one of them at a time. With
// probeLater the streams first wait for the probe of the server's tar;
// where it has none that tar mode can use, an upload's newDirs are made
// over SFTP instead (a download's are made already) and small goes over
// SFTP beside early, as a tree's files would, as many at once (their
// bytes in batches: small.go).
func (run *tarRun) streamBeside(ctx context.Context, small, newDirs, early []*tarNode, probeLater bool) ([][]*tarFile, []error) {
	var streams, side Progress
	if p := run.c.opts.Progress; p != nil {
		shared := newRunProgress(p, nil, true)
		streams, side = shared.job(), shared.job()
	}
	var batches [][]*tarFile
	var errs []error
	var made int
	var dirErrs []*Error
	done := make(chan struct{})
	go func() {
		defer close(done)
		if probeLater {
			support, err := run.probed()
			if err != nil {
				run.c.logf("tar mode not used: %v; the small files go over SFTP", err)
				if run.upload {
					made, dirErrs = run.makeDirs(ctx, newDirs)
				}
				run.copyOthers(ctx, small, streams, remoteFiles)
				return
			}
			run.compress(support)
		}
		batches, errs = run.stream(ctx, small, newDirs, streams)
	}()
	run.copyOthers(ctx, early, side, otherWorkers)
	<-done
	// Recorded here: the side copies record and report from this
	// goroutine.
	run.c.res.Dirs += made
	for _, e := range dirErrs {
		run.fail(e)
	}
	return batches, errs
}

// copyOthers copies the files tar streams do not carry over SFTP, width
// at once (into the temporary tree when the whole tree is new), telling
// progress, when not nil, of their bytes: each costs round trips of its
// own before and after its bytes, and a large file's first stream alone
// fills no long path.
func (run *tarRun) copyOthers(ctx context.Context, files []*tarNode, progress Progress, width int) {
	c := run.c
	var todo []*tarNode
	for _, f := range files {
		if f.existing != nil && !f.existing.IsDir() && run.skipListed(ctx, f) {
			continue
		}
		todo = append(todo, f)
	}
	type outcome struct {
		res     Result
		reports []FileReport
	}
	outs := make([]outcome, len(todo))
	shared := newRunProgress(progress, nil, true)
	slots.ForEach(len(todo), width, func(i int) {
		if ctx.Err() != nil {
			return
		}
		// A copier of its own for each file: copyFile records into it,
		// and the outcomes are merged in order below. Its large files
		// take the run's slots on the parallel pipeline.
		sub := &copier{opts: c.opts, res: &Result{}, sched: c.sched, parallel: run.parallel}
		sub.opts.Report = func(f FileReport) { outs[i].reports = append(outs[i].reports, f) }
		sub.opts.Progress = nil
		if progress != nil {
			sub.opts.Progress = shared.job()
		}
		f := todo[i]
		dst := f.dst()
		if run.whole {
			dst.Path = dst.FS.Join(run.base, f.rel)
		}
		// A file of the temporary tree or of a directory this run made
		// cannot exist yet: copyFile need not look.
		fresh := run.whole || f.parent != run.root && f.parent.existing == nil
		if err := sub.copyFile(ctx, f.src(), dst, f.info, fresh); err != nil {
			sub.failFile(f.src(), err)
		}
		outs[i].res = *sub.res
	})
	// Two of these may merge at once (streamBeside's side copies and the
	// small files left to SFTP).
	run.mu.Lock()
	defer run.mu.Unlock()
	for _, o := range outs {
		c.res.Files += o.res.Files
		c.res.Bytes += o.res.Bytes
		c.res.Skipped += o.res.Skipped
		c.res.Errors = append(c.res.Errors, o.res.Errors...)
		c.res.MaxStreams = max(c.res.MaxStreams, o.res.MaxStreams)
		c.res.Conns = max(c.res.Conns, o.res.Conns)
		for _, f := range o.reports {
			run.report(f)
		}
	}
}

// skipListed takes, from the target's listing alone, the decisions of
// skip.go that need nothing more (the quick check, --ignore-existing),
// and records a skipped file as copyFile does: it saves the round trip
// of copyFile's own look at the target. --checksum is left to copyFile.
func (run *tarRun) skipListed(ctx context.Context, f *tarNode) bool {
	c := run.c
	if c.opts.Skip != SkipQuick && c.opts.Skip != SkipExisting {
		return false
	}
	why, _, err := c.skip(ctx, f.src(), f.dst(), f.info, f.existing)
	if err != nil || why == "" {
		return false
	}
	c.forgetTarget(f.dst())
	c.res.Skipped++
	run.report(FileReport{Path: f.src().String(), Status: StatusSkipped, Target: f.dst().String(), Reason: why})
	c.logf("skipped %s: %s has it already", f.src(), f.dst())
	return true
}
