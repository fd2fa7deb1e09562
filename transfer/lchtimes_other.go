//go:build !unix

package transfer

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"
)

// lchtimes sets name's times; a symbolic link's own times are not set
// here (errors.ErrUnsupported), and a link's target's are never set in
// their place.
func lchtimes(name string, atime, mtime time.Time) error {
	fi, err := os.Lstat(name)
	if err != nil {
		return err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return &fs.PathError{Op: "lchtimes", Path: name, Err: fmt.Errorf("a link's own times: %w", errors.ErrUnsupported)}
	}
	return os.Chtimes(name, atime, mtime)
}
