// Package clone makes a file a clone of another where the file system
// shares blocks between files (Linux's FICLONE: XFS, Btrfs and others):
// the clone holds the other's bytes without one of them being written.
package clone

import "os"

// Into makes dst, an empty regular file open for writing, a clone of
// src, a regular file open for reading, and says whether it did. Where
// it did not (a file system that shares no blocks, two file systems,
// another OS), dst is as it was.
func Into(dst, src *os.File) bool {
	return into(dst, src)
}
