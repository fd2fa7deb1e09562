package transfer

import (
	"context"
	"fmt"
	"io/fs"
	"iter"
)

// The steps of the engine the legacy scp movers (scp.go) share with
// Copy's files and directories, written as functions of their own so that
// both can call them.

// enterDir checks that the walk may go into the directory src, of info
// si, depth levels below its source operand: within maxDepth and not a
// loop of links back to a directory above it (loop.go). It returns src's
// place on the walk's path; at is that place as its parent found it, nil
// for a source operand.
func enterDir(src Endpoint, si fs.FileInfo, depth int, at *walkDir) (*walkDir, error) {
	if depth >= maxDepth {
		return nil, &Error{Op: "copy", Path: src.String(),
			Err:  fmt.Errorf("more than %d levels of directories", maxDepth),
			Hint: "a symbolic link may point to one of its own parent directories"}
	}
	if at == nil {
		return newWalkRoot(src, si), nil
	}
	if err := at.loop(); err != nil {
		return nil, err
	}
	return at, nil
}

// dirEntry is an entry of a directory on a walk, links followed.
type dirEntry struct {
	src  Endpoint
	name string
	info fs.FileInfo // of what a link points to, as scp follows links; of the link with --links
	at   *walkDir    // a directory's place on the walk's path; nil for a file
}

// dirEntries yields the entries of the directory src, as listed, whose
// place on the walk is at, in the walk's order: sorted by name, a name
// listed twice or that is not one path element refused (SortListing,
// ValidName), links followed unless --links keeps them, those
// --safe-links leaves out reported. An entry that cannot be looked at is
// told to c.fail and left out. Links are followed as the entries are
// taken, so that the first are on their way while the others are looked
// at; none is once ctx is done.
func (c *copier) dirEntries(ctx context.Context, src Endpoint, listed []fs.FileInfo, at *walkDir) iter.Seq[dirEntry] {
	dups := SortListing(listed)
	return func(yield func(dirEntry) bool) {
		var lastDup string
		for _, e := range listed {
			if ctx.Err() != nil {
				return
			}
			name := e.Name()
			if dups[name] {
				if name != lastDup {
					c.fail(DuplicateError(src.String(), name))
				}
				lastDup = name
				continue
			}
			if err := ValidName(name); err != nil {
				c.fail(&Error{Op: "read directory", Path: src.String(), Err: err,
					Hint: "the server sent a name that could escape the target; it was skipped"})
				continue
			}
			child := Endpoint{src.FS, src.FS.Join(src.Path, name)}
			info := e
			link := e.Mode()&fs.ModeSymlink != 0
			if link {
				if skip, err := c.unsafeLink(child, at.levels()); err != nil || skip {
					if err != nil {
						c.fail(err)
					}
					continue
				}
			}
			// --links keeps the link itself, which copyAny copies as one.
			if link && !c.opts.Links.Symlinks {
				var err error
				if info, err = src.FS.Stat(child.Path); err != nil {
					c.fail(&Error{Op: "read", Path: child.String(), Err: err})
					continue
				}
			}
			var below *walkDir
			if info.IsDir() {
				below = at.child(child, info, link)
			}
			if !yield(dirEntry{src: child, name: name, info: info, at: below}) {
				return
			}
		}
	}
}
