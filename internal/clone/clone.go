// Package clone makes a file a clone of another where the file system
// shares blocks between files (Linux's FICLONE: XFS, Btrfs and others):
// the clone holds the other's bytes without one of them being written.
package clone

import "os"

// Into makes dst, an empty regular file open for writing, a clone of
// src, a regular file open for reading, and says whether it did. Where
// it did not (a file system that shares no blocks, two file systems,
// another OS), dst is as it was.
//
// Mark, when Into made a clone, is src as its stat said just before:
// Changed says later whether src may no longer hold what the clone got
// from it, so that a caller may read src's bytes (in the page cache
// already, where the clone's are not) for what the clone holds.
func Into(dst, src *os.File) (Mark, bool) {
	fi, err := src.Stat()
	if err != nil || !into(dst, src) {
		return Mark{}, false
	}
	return Mark{fi}, true
}

// A Mark is a cloned file as its stat said just before the clone.
type Mark struct{ fi os.FileInfo }

// Changed says whether f, the file cloned, may have been written since
// it was: its stat says another size, modification or change time or
// inode, or cannot be had. (A write sets the change time, which no user
// can set back; where the kernel keeps it fine-grained once it has been
// looked at, Linux 6.13 and later, a write after the stat always moves
// it.)
func (m Mark) Changed(f *os.File) bool {
	fi, err := f.Stat()
	return m.fi == nil || err != nil || !same(m.fi, fi)
}
