package transfer

import (
	"errors"
	"io/fs"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// extentAt returns whether off in the local file f is in data or in a
// hole, and where that data or hole ends: for a hole up to the end of the
// file, the file's size, which is off or less past the end. Where the
// file system cannot tell (an error other than "no data after off"),
// everything is data: it is read, which is never wrong.
func extentAt(f *os.File, off int64) (data bool, end int64) {
	fd := int(f.Fd())
	start, err := unix.Seek(fd, off, unix.SEEK_DATA)
	switch {
	case errors.Is(err, unix.ENXIO):
		fi, err := f.Stat()
		if err != nil {
			return true, everything
		}
		return false, fi.Size()
	case err != nil:
		return true, everything
	case start > off:
		return false, start
	}
	hole, err := unix.Seek(fd, off, unix.SEEK_HOLE)
	if err != nil {
		return true, everything
	}
	return true, hole
}

// allocated returns the bytes of disk a local file's fi says it takes.
func allocated(fi fs.FileInfo) (int64, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return st.Blocks * 512, true
}
