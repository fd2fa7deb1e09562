package transfer

import (
	"time"
)

// LinkTimer is an end that can set a symbolic link's own times, as
// rsync -t does with lutimes. SFTP's SETSTAT follows links: over SFTP it
// takes OpenSSH's lsetstat@openssh.com, and without it Lchtimes fails
// with an error wrapping errors.ErrUnsupported.
type LinkTimer interface {
	Lchtimes(name string, atime, mtime time.Time) error
}

// CanLchtimes reports whether end sets a symbolic link's own times: it
// is a LinkTimer and, where it can tell (an SFTP end asks whether its
// server offers the extension), one that can do so. A planner asks it
// before counting a link's time as something to change.
func CanLchtimes(end FS) bool {
	if _, ok := end.(LinkTimer); !ok {
		return false
	}
	if p, ok := end.(interface{ CanLchtimes() bool }); ok {
		return p.CanLchtimes()
	}
	return true
}

// Lchtimes sets name's times without following a final symbolic link.
func (l Local) Lchtimes(name string, atime, mtime time.Time) error {
	if l.root != nil {
		return l.root.chtimes(name, atime, mtime)
	}
	return lchtimes(name, atime, mtime)
}
