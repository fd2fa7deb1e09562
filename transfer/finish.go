package transfer

import (
	"context"
	"fmt"
	"io/fs"
	"time"

	"github.com/hpncp/hpncp/pipeline"
	"github.com/hpncp/hpncp/protocol"
)

// Every copied file is written under a temporary name beside its target
// (TempName) and takes the target's name only once all of it is there,
// checked, with its mode and times: a reader never sees part of a file
// under the final name, and a failed copy leaves an existing target as it
// was. Whichever way the bytes moved (the pipeline, a small-file batch,
// tar, scp), the same rules decide what the finished file looks like.

// fileAttrs is the mode and times a copied file ends with.
type fileAttrs struct {
	mode  fs.FileMode // of modeBits
	times bool        // set atime and mtime as well
	atime time.Time
	mtime time.Time
}

// put is a as protocol.PutAttrs sets it on a temporary file, created
// owner-only: the mode is set unless it is 0600 already.
func (a fileAttrs) put() protocol.PutAttrs {
	return protocol.PutAttrs{Mode: a.mode, SetMode: a.mode != 0o600,
		SetTimes: a.times, Atime: a.atime, Mtime: a.mtime}
}

// same reports whether a and b set the same mode and times.
func (a fileAttrs) same(b fileAttrs) bool {
	return a.mode == b.mode && a.times == b.times && a.atime.Equal(b.atime) && a.mtime.Equal(b.mtime)
}

// attrsOf is what -p carries over from a source of info si.
func attrsOf(si fs.FileInfo) fileAttrs {
	return fileAttrs{mode: si.Mode() & modeBits, times: true, atime: atimeOf(si), mtime: si.ModTime()}
}

// finalAttrs decides the mode and times of a copied file whose source
// has src (attrsOf, or what a protocol said of it), replacing existing
// (nil for a new file). With -p (preserve) they are the source's. Over an
// existing target the target's mode stays, as scp's truncate-in-place
// keeps it: the rename must not change what the user set. A new file gets
// the source's permissions as the receiving end's umask allows them,
// which newMode works out; it is called only then.
func finalAttrs(preserve bool, src fileAttrs, existing fs.FileInfo, newMode func() fs.FileMode) fileAttrs {
	switch {
	case preserve:
		return src
	case existing != nil:
		return fileAttrs{mode: existing.Mode() & modeBits}
	}
	return fileAttrs{mode: newMode()}
}

// finalAttrs is finalAttrs with the run's options, where Modes and Times
// keep one half of -p each.
func (c *copier) finalAttrs(src fileAttrs, existing fs.FileInfo, newMode func() fs.FileMode) fileAttrs {
	modes := c.opts.Preserve || c.opts.Modes
	a := finalAttrs(modes, src, existing, newMode)
	if c.opts.Preserve || c.opts.Times {
		a.times, a.atime, a.mtime = true, src.atime, src.mtime
	} else {
		a.times = false
	}
	return a
}

// setDirAttrs gives the directory dst the mode and times of a, as -p
// does once every entry below it is in place (each entry renamed into it
// changes its times). A failure is recorded and the copy goes on.
func (c *copier) setDirAttrs(dst Endpoint, a fileAttrs) {
	if err := dst.FS.Chmod(dst.Path, a.mode); err != nil {
		c.fail(&Error{Op: "set mode of", Path: dst.String(), Err: err})
	}
	if a.times {
		if err := dst.FS.Chtimes(dst.Path, a.atime, a.mtime); err != nil {
			c.fail(&Error{Op: "set times of", Path: dst.String(), Err: err})
		}
	}
}

// tempFile is a file being written under a temporary name beside its
// target, or, tmp being the target's own name, over it in place.
type tempFile struct {
	dst Endpoint // the target
	tmp string   // the temporary name, on dst's end
	op  string   // what errors say failed: "copy SRC to"
	// applied, when not nil, are the mode and times the file was given
	// already, with the stat finish is passed (copyParallel).
	applied *fileAttrs
	// setRefused says the end refused a SetAttrs of this file already:
	// finish sets mode and times one at a time.
	setRefused bool
}

// finish gives the temporary file the target's name once it is whole.
// The temporary file must hold size bytes: a writer's count alone is not
// trusted. stat is its stat taken once every byte was written, or nil to
// take one here; a caller that checked the size already passes size -1
// and may pass no stat. check, when not nil, runs once the size is right
// (the comparison of sums of --verify). The file then gets the mode and
// times attrs returns (its mode as created, owner-only, is changed unless
// stat shows it right already) and, unless ctx is done by then, the
// target's name. attrs is called only once the checks passed: working out
// a new file's mode may wait for the umask probe of its end.
func (t tempFile) finish(ctx context.Context, size int64, stat fs.FileInfo, attrs func() fileAttrs, check func() error) error {
	end := t.dst.FS
	if size >= 0 {
		if stat == nil {
			var err error
			if stat, err = end.Stat(t.tmp); err != nil {
				return &Error{Op: t.op, Path: t.dst.String(), Err: err}
			}
		}
		if err := t.checkSize(size, stat); err != nil {
			return err
		}
	}
	if check != nil {
		if err := check(); err != nil {
			return err
		}
	}
	a := attrs()
	if t.applied != nil && t.applied.same(a) {
		a.times = false // set with the stat's setstat
	}
	setMode := stat == nil || stat.Mode()&modeBits != a.mode
	if setMode && a.times && !t.setRefused {
		// Both in one request where the end takes one (a round trip
		// less, at the end of every --verify copy); refused, each alone
		// below, to say which failed.
		if s, ok := end.(attrSetter); ok {
			if _, err := s.SetAttrs(ctx, t.tmp, protocol.PutAttrs{SetMode: true, Mode: a.mode,
				SetTimes: true, Atime: a.atime, Mtime: a.mtime}); err == nil {
				setMode, a.times = false, false
			}
		}
	}
	if setMode {
		if err := end.Chmod(t.tmp, a.mode); err != nil {
			return &Error{Op: "set mode of", Path: t.dst.String(), Err: err}
		}
	}
	if a.times {
		if err := end.Chtimes(t.tmp, a.atime, a.mtime); err != nil {
			return &Error{Op: "set times of", Path: t.dst.String(), Err: err}
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if t.tmp == t.dst.Path {
		return nil // written in place (--inplace)
	}
	if err := end.Rename(t.tmp, t.dst.Path); err != nil {
		return &Error{Op: t.op, Path: t.dst.String(), Err: err}
	}
	return nil
}

// checkSize returns an error unless stat, the temporary file's, shows
// size bytes: what finish checks first, for a caller that checks many
// files from one listing before it finishes any (tar mode).
func (t tempFile) checkSize(size int64, stat fs.FileInfo) error {
	if stat.Size() != size {
		return &Error{Op: t.op, Path: t.dst.String(),
			Err: fmt.Errorf("%w: %d bytes arrived of %d sent", pipeline.ErrShortWrite, stat.Size(), size)}
	}
	return nil
}
