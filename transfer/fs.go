package transfer

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"time"

	"github.com/hpncp/hpncp/protocol"
)

// FS is one end of a copy: the local file system or a remote one reached
// over SFTP. Paths are in the FS's own syntax; Join, Dir and Base know it.
type FS interface {
	// Label names the end in messages: "" for local, "host:" for a remote.
	Label() string

	// Stat follows symbolic links, as scp does for sources and targets.
	Stat(name string) (fs.FileInfo, error)
	// ReadDir lists a directory without following links.
	ReadDir(name string) ([]fs.FileInfo, error)
	// Glob expands shell patterns; only remote ends need it, since the local
	// shell has already expanded local operands.
	Glob(pattern string) ([]string, error)

	Open(name string) (io.ReadCloser, error)
	// CreateExclusive creates a new file, failing with fs.ErrExist when
	// name exists.
	CreateExclusive(name string) (io.WriteCloser, error)
	Mkdir(name string) error
	// Rename replaces newname atomically where the end allows it.
	Rename(oldname, newname string) error
	Remove(name string) error
	Chmod(name string, mode fs.FileMode) error
	Chtimes(name string, atime, mtime time.Time) error

	// Abs returns an absolute form of name: for a remote end, the server's.
	Abs(name string) (string, error)
	Join(elem ...string) string
	Dir(name string) string
	Base(name string) string
}

// contextDirReader is an end whose listings end when their context is
// done (protocol.SFTP).
type contextDirReader interface {
	ReadDirContext(ctx context.Context, name string) ([]fs.FileInfo, error)
}

// readDir lists name on fsys, without following links, and gives up once
// ctx is done where fsys allows it.
func readDir(ctx context.Context, fsys FS, name string) ([]fs.FileInfo, error) {
	if r, ok := fsys.(contextDirReader); ok {
		return r.ReadDirContext(ctx, name)
	}
	return fsys.ReadDir(name)
}

// ReadDir is readDir for a caller outside the engine that lists a tree
// itself (hpncp sync's mirror).
func ReadDir(ctx context.Context, fsys FS, name string) ([]fs.FileInfo, error) {
	return readDir(ctx, fsys, name)
}

// listingHint says what to make of a listing that failed, where there is
// something to say.
func listingHint(err error) string {
	if errors.Is(err, protocol.ErrTooManyEntries) {
		return "the server kept sending names, as a broken or hostile server does; the directory's entries were not copied"
	}
	return ""
}

// accessTimer is the Sys of a FileInfo that carries the file's access
// time (protocol's listings and stats).
type accessTimer interface {
	AccessTime() time.Time
}

// atimeOf returns the access time an FS put in a FileInfo's Sys, or the
// modification time when the FS has none.
func atimeOf(fi fs.FileInfo) time.Time {
	if a, ok := fi.Sys().(accessTimer); ok {
		return a.AccessTime()
	}
	if t, ok := accessTime(fi); ok {
		return t
	}
	return fi.ModTime()
}
