package transfer

import "io/fs"

// statted is what a Stat of path returned.
type statted struct {
	path string
	fi   fs.FileInfo
	err  error
}

// statTarget stats dst, or takes what Copy found when dst is the target
// operand itself: a single file copied to a name pays one round trip for
// it, not two. Only the first copy to that name uses it; any later one
// (the same source twice) looks again.
func (c *copier) statTarget(dst Endpoint) (fs.FileInfo, error) {
	c.mu.Lock()
	t := c.target
	if t != nil && t.path == dst.Path {
		c.target = nil
	}
	c.mu.Unlock()
	if t != nil && t.path == dst.Path {
		return t.fi, t.err
	}
	return dst.FS.Stat(dst.Path)
}
