package transfer

import (
	"errors"
	"io/fs"
	"os"
	"strings"
	"syscall"

	"github.com/hpncp/hpncp/protocol"
)

// Error is a failure of one operation on one path. Its text reads
// "<op> <path>: <cause>", with the cause stripped of the path it repeats.
type Error struct {
	Op   string // what was being done: "read", "create directory", "copy a to"
	Path string // the path, with "host:" for a remote one
	Err  error
	Hint string // what the user can do about it, or ""
}

func (e *Error) Error() string { return e.Op + " " + e.Path + ": " + Cause(e.Err) }

func (e *Error) Unwrap() error { return e.Err }

// Cause returns the text of err without the operation and path that os
// errors repeat, since Error already names both.
func Cause(err error) string {
	var pe *fs.PathError
	var le *os.LinkError
	switch {
	case errors.As(err, &pe):
		return strings.Replace(err.Error(), pe.Error(), Cause(pe.Err), 1)
	case errors.As(err, &le):
		return strings.Replace(err.Error(), le.Error(), Cause(le.Err), 1)
	case err == fs.ErrNotExist:
		return "no such file or directory"
	case err == fs.ErrPermission:
		return "permission denied"
	}
	return err.Error()
}

// hintFor suggests what to do about a write failure, where there is a
// known reason behind it.
func hintFor(err error) string {
	switch {
	case errors.Is(err, syscall.ENOSPC):
		return "the target's file system is full; free space and run the copy again"
	case errors.Is(err, syscall.EDQUOT):
		return "the target's disk quota is exceeded"
	case errors.Is(err, fs.ErrPermission):
		return "check the target directory's owner and permissions"
	case protocol.ServerFailure(err):
		return "the server gave no reason; a full disk or a quota on the remote side are the usual causes"
	}
	return ""
}
