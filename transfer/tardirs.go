package transfer

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/hpncp/hpncp/internal/slots"
	"github.com/hpncp/hpncp/protocol"
)

// The directories of a tar mode tree: its root or temporary tree, the
// new directories the side copies need before the streams, and the
// modes and times -p gives them at the end.

// makeBase creates the tree's root when the target lacks it. A new tree
// on the server is made under a temporary name and renamed into place
// whole: one rename instead of one a file, which over a long path is the
// difference between a round trip and thousands. It reports false when
// the copy cannot go on.
func (run *tarRun) makeBase(ctx context.Context) bool {
	c, root := run.c, run.root
	dst := root.dst()
	// The shards of a job build one tree at once: each writes into it, as
	// a run into an existing tree does, since only one could rename a
	// tree of its own into place.
	run.whole = run.upload && root.existing == nil && !c.opts.Split()
	if run.whole {
		run.base = dst.FS.Join(dst.FS.Dir(dst.Path), TempName(dst.FS.Base(dst.Path)))
	}
	if root.existing != nil {
		return true
	}
	base := Endpoint{dst.FS, run.base}
	var made bool
	var err error
	if run.whole {
		err = c.mkdirPrivate(ctx, base)
		made = err == nil
	} else {
		made, err = c.makeDir(ctx, base, root.info.Mode().Perm())
		if !made && madeByOther(base) {
			return true
		}
	}
	if !made {
		c.fail(&Error{Op: "create directory", Path: dst.String(), Err: err})
		return false
	}
	c.res.Dirs++
	c.logf("created directory %s", base)
	if err != nil {
		c.fail(err)
	}
	return true
}

// mkdirPrivate creates the temporary directory of a new tree owner-only
// (0700): nothing below it can be reached until setRootMode opens it,
// just before it takes its final name. Files then go in under their final
// names and modes.
func (c *copier) mkdirPrivate(ctx context.Context, dir Endpoint) error {
	c.learnUmask(ctx, dir)
	err := protocol.ErrNoBatch
	if m, ok := dir.FS.(modeMkdirer); ok {
		err = m.MkdirMode(ctx, dir.Path, 0o700)
	}
	if errors.Is(err, protocol.ErrNoBatch) {
		err = dir.FS.Mkdir(dir.Path)
	}
	if err != nil {
		return err
	}
	// Set too when the mode went with the mkdir: a server may ignore it
	// (pkg/sftp's does).
	if err := dir.FS.Chmod(dir.Path, 0o700); err != nil {
		_ = dir.FS.Remove(dir.Path)
		return err
	}
	return nil
}

// setRootMode gives the temporary directory of a new tree the mode the
// tree's root gets (-p sets the source's exactly once the files are in).
func (run *tarRun) setRootMode(ctx context.Context) error {
	c, dst := run.c, run.root.dst()
	mode := run.root.info.Mode().Perm() | 0o700
	if !c.opts.Preserve {
		mode = c.newFileMode(ctx, dst, mode)
	}
	if mode == 0o700 {
		return nil
	}
	if err := dst.FS.Chmod(run.base, mode); err != nil {
		e := &Error{Op: "set mode of", Path: dst.String(), Err: err}
		run.fail(e)
		return e
	}
	return nil
}

// makeLocalDirs creates a download's new directories, parents first.
func (run *tarRun) makeLocalDirs(ctx context.Context, newDirs []*tarNode) {
	c := run.c
	for _, d := range newDirs {
		made, err := c.makeDir(ctx, d.dst(), d.info.Mode().Perm())
		if !made && madeByOther(d.dst()) {
			continue
		}
		if !made {
			c.fail(&Error{Op: "create directory", Path: d.dst().String(), Err: err})
			continue
		}
		c.res.Dirs++
		if err != nil {
			c.fail(err)
		}
	}
}

// makeOtherDirs creates over SFTP, parents first, the new directories
// below run.base that the files of other go into, so that those files
// start beside the tar streams rather than after them: in a new tree they
// are directories of the temporary tree, so nothing takes a final name
// early. It returns the new directories left for the archives to make,
// how many it made, the files that can start now and those that wait for
// the streams: the files of a directory it could not make, which a stream
// may yet make (and report on if it cannot).
func (run *tarRun) makeOtherDirs(ctx context.Context, other, newDirs []*tarNode) (rest []*tarNode, made int, early, late []*tarNode) {
	c := run.c
	need := map[*tarNode]bool{}
	for _, f := range other {
		for d := f.parent; d != run.root && d.existing == nil && !need[d]; d = d.parent {
			need[d] = true
		}
	}
	if len(need) == 0 {
		return newDirs, 0, other, nil
	}
	var dirs []*tarNode
	for _, d := range newDirs {
		if need[d] {
			dirs = append(dirs, d)
		}
	}
	made, failed := run.makeRemoteDirs(ctx, dirs, func(d *tarNode, err error) {
		c.logf("tar: %s not created over SFTP (%v): its large files wait for the tar streams", d.dst(), err)
	})
	for _, d := range newDirs {
		if !need[d] || failed[d] {
			rest = append(rest, d)
		}
	}
	for _, f := range other {
		if failed[f.parent] {
			late = append(late, f)
		} else {
			early = append(early, f)
		}
	}
	return rest, made, early, late
}

// makeRemoteDirs creates dirs (new directories of an upload, parents
// before children) below run.base over SFTP, the directories of one level
// at once. It returns how many it made and those it did not, telling
// failed, when not nil, of each, from the calling goroutine.
func (run *tarRun) makeRemoteDirs(ctx context.Context, dirs []*tarNode, failed func(*tarNode, error)) (int, map[*tarNode]bool) {
	c := run.c
	var levels [][]*tarNode
	for _, d := range dirs {
		depth := strings.Count(d.rel, "/")
		for len(levels) <= depth {
			levels = append(levels, nil)
		}
		levels[depth] = append(levels[depth], d)
	}
	made, bad := 0, map[*tarNode]bool{}
	dstFS := run.root.dst().FS
	for _, level := range levels {
		errs := make([]error, len(level))
		slots.ForEach(len(level), metaWorkers, func(i int) {
			d := level[i]
			switch {
			case ctx.Err() != nil:
				errs[i] = ctx.Err()
				return
			case bad[d.parent]:
				errs[i] = errors.New("its parent was not made")
				return
			}
			at := Endpoint{dstFS, dstFS.Join(run.base, d.rel)}
			_, errs[i] = c.makeDir(ctx, at, d.info.Mode().Perm())
		})
		for i, d := range level {
			if errs[i] != nil {
				bad[d] = true
				if failed != nil {
					failed(d, errs[i])
				}
				continue
			}
			made++
			c.logf("created directory %s", Endpoint{dstFS, dstFS.Join(run.base, d.rel)})
		}
	}
	return made, bad
}

// makeDirs creates over SFTP the new directories the tar streams would
// have made, once the server turned out to have no tar for them: their
// files go over SFTP. It returns how many it made and, for each it could
// not, the failure to record; the files below one fail when they are
// copied.
func (run *tarRun) makeDirs(ctx context.Context, newDirs []*tarNode) (int, []*Error) {
	var errs []*Error
	made, _ := run.makeRemoteDirs(ctx, newDirs, func(d *tarNode, err error) {
		errs = append(errs, &Error{Op: "create directory", Path: d.dst().String(), Err: err})
	})
	return made, errs
}

// finishTree gives a new tree, once every stream succeeded, the files
// that waited for the streams, its root's mode and its final name. When
// any of that fails, or ctx is done, the temporary tree is removed and
// every file of it reported failed, those that waited too. The reports
// held meanwhile go out at the end.
func (run *tarRun) finishTree(ctx context.Context, batches [][]*tarFile, errs []error, late []*tarNode) {
	c, src, dst := run.c, run.root.src(), run.root.dst()
	err := errors.Join(errs...)
	if err == nil {
		run.copyOthers(ctx, late, c.opts.Progress, otherWorkers)
		late = nil
	}
	if err == nil && ctx.Err() == nil {
		err = run.setRootMode(ctx)
	}
	if err == nil && ctx.Err() == nil {
		if rerr := dst.FS.Rename(run.base, dst.Path); rerr != nil {
			e := &Error{Op: "copy " + src.String() + " to", Path: dst.String(), Err: rerr}
			run.fail(e)
			err = e
		}
	}
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		// The removal must happen even when ctx was cancelled.
		removeTree(dst.FS, run.base)
		notDone := fmt.Errorf("%s was not complete: %w", dst, err)
		for _, b := range batches {
			for _, f := range b {
				if f.err == nil {
					f.err = notDone
				}
			}
		}
		for i, h := range run.held {
			if h.Status == StatusCopied {
				c.res.Files--
				c.res.Bytes -= h.Bytes
				run.held[i] = FileReport{Path: h.Path, Status: StatusFailed, Error: notDone.Error(), Target: h.Target}
			}
		}
		for _, f := range late {
			run.held = append(run.held, FileReport{Path: f.src().String(), Status: StatusFailed, Error: notDone.Error(), Target: f.dst().String()})
		}
	}
	run.hold = false
	for _, h := range run.held {
		c.report(h)
	}
	run.held = nil
}

// removeTree removes a temporary tree the copy made, files first.
func removeTree(fsys FS, dir string) {
	list, _ := fsys.ReadDir(dir)
	slots.ForEach(len(list), metaWorkers, func(i int) {
		p := fsys.Join(dir, list[i].Name())
		if list[i].IsDir() {
			removeTree(fsys, p)
		} else {
			_ = fsys.Remove(p)
		}
	})
	_ = fsys.Remove(dir)
}
