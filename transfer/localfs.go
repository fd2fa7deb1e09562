package transfer

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"time"
)

// Local is the local file system as an FS. The zero value reaches every
// path the user can, as a source end must; Confine gives one that reaches
// only what lies below the target, links not followed, as every receiving
// end is (confine.go).
type Local struct {
	root *root
	// noFollow refuses a link where a source file is opened: the walk
	// that listed it copies links as links (NoFollow).
	noFollow bool
}

func (Local) Label() string { return "" }

// Stat follows links, except on a confined end: there it is Lstat, for
// below the target no link is followed.
func (l Local) Stat(name string) (fs.FileInfo, error) {
	if l.root != nil {
		return l.root.lstat("stat", name)
	}
	return os.Stat(name)
}

func (l Local) ReadDir(name string) ([]fs.FileInfo, error) {
	if l.root != nil {
		return l.root.readDir(name)
	}
	entries, err := os.ReadDir(name)
	if err != nil {
		return nil, err
	}
	infos := make([]fs.FileInfo, 0, len(entries))
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil {
			if os.IsNotExist(err) {
				continue // removed since the listing: nothing to copy
			}
			return nil, err
		}
		infos = append(infos, fi)
	}
	return infos, nil
}

func (Local) Glob(pattern string) ([]string, error) { return filepath.Glob(pattern) }

func (l Local) Open(name string) (io.ReadCloser, error) {
	if l.root != nil {
		return l.root.open("open", name, os.O_RDONLY)
	}
	return openRegular(name, l.noFollow)
}

// CreateExclusive creates name owner-only: it is a temporary file, which
// the copy gives its final mode before the rename (umask.go).
func (l Local) CreateExclusive(name string) (io.WriteCloser, error) {
	const flags = os.O_WRONLY | os.O_CREATE | os.O_EXCL
	if l.root != nil {
		return l.root.openMode("create", name, flags, 0o600)
	}
	return os.OpenFile(name, flags, 0o600)
}

// OpenUpdate opens the regular file name for reading and writing, to be
// rewritten in place (--inplace); a confined end follows no link to it.
func (l Local) OpenUpdate(name string) (UpdateFile, error) {
	var f *os.File
	var err error
	if l.root != nil {
		f, err = l.root.open("open", name, os.O_RDWR)
	} else if f, err = os.OpenFile(name, os.O_RDWR, 0); err == nil {
		err = regularOnly(f, name)
	}
	if err != nil {
		return nil, err
	}
	return f, nil
}

func (l Local) Mkdir(name string) error { return l.MkdirMode(context.Background(), name, 0o777) }

// MkdirMode makes a directory with perm as the umask allows, in one call.
func (l Local) MkdirMode(_ context.Context, name string, perm fs.FileMode) error {
	if l.root != nil {
		return l.root.mkdir(name, perm)
	}
	return os.Mkdir(name, perm)
}

func (l Local) Rename(oldname, newname string) error {
	if l.root != nil {
		return l.root.rename(oldname, newname)
	}
	return os.Rename(oldname, newname)
}

func (l Local) Remove(name string) error {
	if l.root != nil {
		return l.root.remove(name)
	}
	return os.Remove(name)
}

// Chmod follows a link, except on a confined end, which refuses one.
func (l Local) Chmod(name string, mode fs.FileMode) error {
	if l.root != nil {
		return l.root.chmod(name, mode)
	}
	return os.Chmod(name, mode)
}

// Chtimes follows a link, except on a confined end, where it sets the
// link's own times.
func (l Local) Chtimes(name string, atime, mtime time.Time) error {
	if l.root != nil {
		return l.root.chtimes(name, atime, mtime)
	}
	return os.Chtimes(name, atime, mtime)
}

func (Local) Abs(name string) (string, error) { return filepath.Abs(name) }
func (Local) Join(elem ...string) string      { return filepath.Join(elem...) }
func (Local) Dir(name string) string          { return filepath.Dir(name) }
func (Local) Base(name string) string         { return filepath.Base(name) }

// tempPrefix marks hpncp's temporary files, so that a user who finds one
// after a crash knows where it came from and that it is safe to delete.
const tempPrefix = ".hpncp."

// createTemp creates a fresh temporary file in dir for a file that will be
// renamed to base, and returns it with its path.
func createTemp(fsys FS, dir, base string) (io.WriteCloser, string, error) {
	return createTempNamed(fsys, dir, base, nil)
}

// createTempNamed is createTemp telling named, when not nil, each name
// before it is asked for: a create whose reply is lost with its
// connection may have made the file on the server, and only a name
// recorded first (the resume journal's) lets a later run remove it.
func createTempNamed(fsys FS, dir, base string, named func(string) error) (io.WriteCloser, string, error) {
	for range 10 {
		name := fsys.Join(dir, TempName(base))
		if named != nil {
			if err := named(name); err != nil {
				return nil, "", err
			}
		}
		f, err := fsys.CreateExclusive(name)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		return f, name, err
	}
	return nil, "", &fs.PathError{Op: "create", Path: dir, Err: fs.ErrExist}
}

// TempName returns a fresh temporary name for a file that will be renamed
// to base. It stays within the 255-byte name limit of common file systems.
func TempName(base string) string {
	var r [6]byte
	_, _ = rand.Read(r[:])
	const maxBase = 200
	if len(base) > maxBase {
		base = base[:maxBase]
	}
	return tempPrefix + base + "." + hex.EncodeToString(r[:]) + ".part"
}

// isWindowsLocal is set where a backslash separates local path elements, so
// that a remote name holding one is refused before it reaches the disk.
const isWindowsLocal = runtime.GOOS == "windows"
