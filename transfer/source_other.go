//go:build !unix

package transfer

import (
	"io/fs"
	"os"
)

// openRegular opens the local source name for reading, refusing what is
// not a regular file (and, with noFollow, a link in its place). Without
// O_NOFOLLOW, the link is looked for before the open; the handle's own
// type decides the rest.
func openRegular(name string, noFollow bool) (*os.File, error) {
	if noFollow {
		fi, err := os.Lstat(name)
		if err != nil {
			return nil, err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return nil, &fs.PathError{Op: "open", Path: name, Err: errSwappedForLink}
		}
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	if err := regularOnly(f, name); err != nil {
		return nil, err
	}
	return f, nil
}
