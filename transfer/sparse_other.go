//go:build !linux

package transfer

import (
	"io/fs"
	"os"
)

// extentAt is, where hpncp does not ask the file system for holes,
// everything data: a sparse copy reads the holes, and leaves their zeros
// unwritten all the same.
func extentAt(*os.File, int64) (data bool, end int64) { return true, everything }

func allocated(fs.FileInfo) (int64, bool) { return 0, false }
