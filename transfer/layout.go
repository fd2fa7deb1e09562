package transfer

import (
	"errors"
	"io/fs"
	"strings"
)

// checkTarget stats a copy's target and applies scp's rules to it: with
// several sources it must be an existing directory, and so must a target
// that ends in "/" when anything is copied to it. It reports whether the
// target is an existing directory and, when it is not, what its Stat
// found (nil, or the fs.ErrNotExist error).
func checkTarget(target Endpoint, several, some bool) (bool, *statted, error) {
	ti, err := target.FS.Stat(target.Path)
	switch {
	case err == nil && ti.IsDir():
		return true, nil, nil
	case err == nil:
	case !errors.Is(err, fs.ErrNotExist):
		return false, nil, &Error{Op: "stat target", Path: target.String(), Err: err}
	}
	if several {
		return false, nil, &Error{Op: "copy to", Path: target.String(), Err: ErrNotDirectory,
			Hint: "with several sources the target must be an existing directory"}
	}
	if strings.HasSuffix(target.Path, "/") && some {
		return false, nil, &Error{Op: "copy to", Path: target.String(), Err: ErrNotDirectory,
			Hint: "a target ending in / must be an existing directory; create it first"}
	}
	return false, &statted{target.Path, ti, err}, nil
}

// statted is what a Stat of path returned.
type statted struct {
	path string
	fi   fs.FileInfo
	err  error
}

// statTarget stats dst, or takes what Copy found when dst is the target
// operand itself (a single file copied to a name pays one round trip for
// it, not two), or what CopyFiles was told is there (Listed.Target). Only
// the first copy to that name uses it; any later one (the same source
// twice) looks again.
func (c *copier) statTarget(dst Endpoint) (fs.FileInfo, error) {
	c.mu.Lock()
	t := c.target
	if t != nil && t.path == dst.Path {
		c.target = nil
	}
	fi, listed := c.listed[dst.Path]
	delete(c.listed, dst.Path)
	c.mu.Unlock()
	if listed {
		return fi, nil
	}
	if t != nil && t.path == dst.Path {
		return t.fi, t.err
	}
	return dst.FS.Stat(dst.Path)
}
