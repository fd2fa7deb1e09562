//go:build unix

package helper

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ServeDelta is the delta service on in and out over this host's files
// (ServeDeltaFiles).
func ServeDelta(ctx context.Context, in io.Reader, out io.Writer) error {
	return ServeDeltaFiles(ctx, in, out, osFiles{})
}

// ServeDeltaWarmed is ServeDelta with warm started once the hello is out
// and stopped (the function it returns) when the service ends or reads a
// request whose answer is small: a share of a push, sums. warm grows the
// window of the connection toward the client, so that a pull's delta, a
// push's signature or a walk, which come some round trips after the
// helper's start, do not start from the window TCP starts with.
func ServeDeltaWarmed(ctx context.Context, in io.Reader, out io.Writer, warm func() (stop func())) error {
	return serveDelta(ctx, in, out, osFiles{}, warm)
}

// osFiles are this host's files, as the logged-in user may open them.
type osFiles struct{}

// Open opens path for reading: a regular file (not a link to one) of
// size bytes, or of any size where size is -1.
func (osFiles) Open(path string, size int64) (ReadAtCloser, error) {
	f, err := openSized(path, os.O_RDONLY, size)
	if err != nil {
		return nil, err
	}
	return f, nil
}

// openSized opens path with flags: a regular file (not a link to one) of
// size bytes, or of any size where size is -1.
func openSized(path string, flags int, size int64) (*os.File, error) {
	f, err := os.OpenFile(path, flags|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	switch {
	case err != nil:
	case !fi.Mode().IsRegular():
		err = fmt.Errorf("%s: not a regular file", path)
	case size >= 0 && fi.Size() != size:
		err = fmt.Errorf("%s: %d bytes, not the %d listed: it changed", path, fi.Size(), size)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// CreateTemp makes the temporary file at path, for writing: 0600
// whatever the umask (the client counts on it, and sets the file's own
// mode once it is whole). A file or link there already is not written.
func (osFiles) CreateTemp(path string) (WriteAtCloser, error) {
	t, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0o600)
	if err != nil {
		return nil, err
	}
	if err := t.Chmod(0o600); err != nil {
		t.Close()
		os.Remove(path)
		return nil, err
	}
	return t, nil
}

func (osFiles) Remove(path string) error { return os.Remove(path) }

func (osFiles) Rename(oldpath, newpath string) error { return os.Rename(oldpath, newpath) }

func (osFiles) Chtimes(path string, atime, mtime time.Time) error {
	a, err := unix.TimeToTimespec(atime)
	if err != nil {
		return &fs.PathError{Op: "chtimes", Path: path, Err: err}
	}
	m, err := unix.TimeToTimespec(mtime)
	if err != nil {
		return &fs.PathError{Op: "chtimes", Path: path, Err: err}
	}
	if err := unix.UtimesNanoAt(unix.AT_FDCWD, path, []unix.Timespec{a, m}, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return &fs.PathError{Op: "chtimes", Path: path, Err: err}
	}
	return nil
}

// OpenUpdate opens path to be rewritten in place: a regular file (not a
// link to one) of size bytes.
func (osFiles) OpenUpdate(path string, size int64) (UpdateFile, error) {
	f, err := openSized(path, os.O_RDWR, size)
	if err != nil {
		return nil, err
	}
	return f, nil
}

// OpenWritten opens path for reading: a regular file (not a link to
// one), whatever its size so far.
func (osFiles) OpenWritten(path string) (ReadAtCloser, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	return f, nil
}

func (osFiles) ReadDir(path string) ([]fs.FileInfo, error) {
	des, err := os.ReadDir(path)
	if err != nil {
		return nil, err
	}
	out := make([]fs.FileInfo, 0, len(des))
	for _, de := range des {
		fi, err := de.Info()
		if err != nil {
			continue // gone since listed
		}
		out = append(out, fi)
	}
	return out, nil
}

func (osFiles) Readlink(path string) (string, error) { return os.Readlink(path) }

// fileOwner is fi's owner, group and access time (Unix seconds).
func fileOwner(fi fs.FileInfo) (uid, gid int, atime int64) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, fi.ModTime().Unix()
	}
	return int(st.Uid), int(st.Gid), statAtime(st)
}
