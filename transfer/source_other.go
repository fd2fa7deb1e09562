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
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		_ = f.Close()
		return nil, &fs.PathError{Op: "open", Path: name, Err: errNotRegular}
	}
	return f, nil
}
