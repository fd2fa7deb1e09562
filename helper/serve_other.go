//go:build !unix

package helper

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"time"
)

// Protocol is the helper protocol's version: a client and a helper speak
// only the same one.
const Protocol = 1

// LeadOptions are the first channel's (serve.go); the helper runs on
// Unix servers only.
type LeadOptions struct {
	Job      string
	Channels int
	Shell    string
	In       io.ReadCloser
	Out      io.Writer
	Budget   int
	Frame    int
	JoinWait time.Duration
}

var errUnix = errors.New("helper: hpncp serve runs on Unix servers only")

// Lead is the helper's first channel, on Unix only.
func Lead(context.Context, LeadOptions) error { return errUnix }

// Join is a further channel of the helper, on Unix only.
func Join(context.Context, string, *os.File, *os.File) error { return errUnix }

// ServeDelta is the delta service over this host's files, on Unix only
// (ServeDeltaFiles serves other files anywhere).
func ServeDelta(context.Context, io.Reader, io.Writer) error { return errUnix }

func ServeDeltaWarmed(context.Context, io.Reader, io.Writer, func() func()) error { return errUnix }

func fileOwner(fi fs.FileInfo) (uid, gid int, atime int64) { return 0, 0, fi.ModTime().Unix() }
