package transfer

import (
	"io/fs"
	"os"
)

// regularOnly closes f, opened as the source name, and says why, unless
// the handle is a regular file's: what was listed as one may have been
// swapped since.
func regularOnly(f *os.File, name string) error {
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return err
	}
	if !fi.Mode().IsRegular() {
		_ = f.Close()
		return &fs.PathError{Op: "open", Path: name, Err: errNotRegular}
	}
	return nil
}
