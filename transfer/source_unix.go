//go:build unix

package transfer

import (
	"errors"
	"io/fs"
	"os"
	"syscall"
)

// openRegular opens the local source name for reading. It was listed as
// a regular file, but may have been swapped since for a FIFO, whose open
// would wait for a writer that never comes, or a device: O_NONBLOCK lets
// the open return, and the handle's own type decides. noFollow refuses a
// link in name's place too, for a walk that copies links as links.
func openRegular(name string, noFollow bool) (*os.File, error) {
	flags := os.O_RDONLY | syscall.O_NONBLOCK | syscall.O_CLOEXEC
	if noFollow {
		flags |= syscall.O_NOFOLLOW
	}
	f, err := os.OpenFile(name, flags, 0)
	if err != nil {
		if noFollow && errors.Is(err, syscall.ELOOP) {
			err = &fs.PathError{Op: "open", Path: name, Err: errSwappedForLink}
		}
		return nil, err
	}
	if err := regularOnly(f, name); err != nil {
		return nil, err
	}
	// A regular file reads the same either way; os.File reads it
	// without the poller.
	_ = syscall.SetNonblock(int(f.Fd()), false)
	return f, nil
}
