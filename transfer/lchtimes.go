package transfer

import (
	"time"

	"golang.org/x/sys/unix"
)

// LinkTimer is an end that can set a symbolic link's own times, as
// rsync -t does with lutimes. SFTP has no such request in the draft
// OpenSSH serves, so only the local end is one.
type LinkTimer interface {
	Lchtimes(name string, atime, mtime time.Time) error
}

// Lchtimes sets name's times without following a final symbolic link.
func (Local) Lchtimes(name string, atime, mtime time.Time) error {
	ts := []unix.Timespec{unix.NsecToTimespec(atime.UnixNano()), unix.NsecToTimespec(mtime.UnixNano())}
	return unix.UtimesNanoAt(unix.AT_FDCWD, name, ts, unix.AT_SYMLINK_NOFOLLOW)
}

var _ LinkTimer = Local{}
