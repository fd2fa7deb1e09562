// Package clone makes a file a clone of another where the file system
// shares blocks between files (Linux's FICLONE: XFS, Btrfs and others):
// the clone holds the other's bytes without one of them being written.
package clone

import (
	"errors"
	"os"
)

// A Clone is a file made a clone of another (Of), with the other's stat
// from just before.
type Clone struct {
	dst, src *os.File
	fi       os.FileInfo
}

// Of makes dst, an empty regular file open for writing, a clone of src,
// a regular file open for reading, where both are files (*os.File) of a
// file system that shares blocks. It returns nil where it made none (a
// file system that shares no blocks, two file systems, another OS, an
// end that is not a file here), and dst is then as it was.
func Of(dst, src any) *Clone {
	d, ok1 := dst.(*os.File)
	s, ok2 := src.(*os.File)
	if !ok1 || !ok2 {
		return nil
	}
	fi, err := s.Stat()
	if err != nil || !into(d, s) {
		return nil
	}
	return &Clone{d, s, fi}
}

// ErrChanged is Finish's error for a source that may no longer hold what
// the clone got from it.
var ErrChanged = errors.New("changed while it was copied")

// Finish cuts the clone to size, once what it holds was read, for what
// it holds, from the source (in the page cache already, where the
// clone's pages are not): it fails with ErrChanged where the source may
// have been written since the clone, its stat saying another size,
// modification or change time or inode, or none. (A write sets the
// change time, which no user can set back; where the kernel keeps it
// fine-grained once it has been looked at, Linux 6.13 and later, a write
// after the stat always moves it.)
func (c *Clone) Finish(size int64) error {
	if fi, err := c.src.Stat(); err != nil || !same(c.fi, fi) {
		return ErrChanged
	}
	return c.dst.Truncate(size)
}
