//go:build unix

package transfer

import (
	"time"

	"golang.org/x/sys/unix"
)

// lchtimes sets name's times, a final symbolic link's own (lutimes).
func lchtimes(name string, atime, mtime time.Time) error {
	ts := []unix.Timespec{unix.NsecToTimespec(atime.UnixNano()), unix.NsecToTimespec(mtime.UnixNano())}
	return unix.UtimesNanoAt(unix.AT_FDCWD, name, ts, unix.AT_SYMLINK_NOFOLLOW)
}
