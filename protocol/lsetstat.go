package protocol

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"time"
)

// A symbolic link's own times and owner over SFTP. SFTP v3's SETSTAT
// follows a final link (OpenSSH's calls utimes and chown), so it would
// change the link's target; OpenSSH's sftp-server offers, since 8.0,
// lsetstat@openssh.com, the same request without following, which is how
// rsync -t's lutimes and -o's lchown are done here. pkg/sftp's client
// cannot send it, so it goes on one of the sessions of small files,
// which speak SFTP directly (batch.go).

// lsetstatExt is OpenSSH's SETSTAT that does not follow a final link.
const lsetstatExt = "lsetstat@openssh.com"

// CanLchtimes reports whether the server offers lsetstat@openssh.com,
// without which Lchtimes cannot set a link's times: an end that has the
// method can still not do what it is for, and a planner that asks it
// first leaves links' times out rather than failing on each.
func (s *SFTP) CanLchtimes() bool {
	_, ok := s.mc.current().HasExtension(lsetstatExt)
	return ok
}

// Lchtimes sets name's access and modification times without following
// a final symbolic link, to the second (SFTP v3 carries whole seconds,
// from 1970 to 2106; a time outside is refused rather than sent wrong).
// A server without lsetstat@openssh.com gets no request: the error wraps
// errors.ErrUnsupported and names the extension.
func (s *SFTP) Lchtimes(name string, atime, mtime time.Time) error {
	for _, t := range []time.Time{atime, mtime} {
		if t.Unix() < 0 || t.Unix() > math.MaxUint32 {
			return &fs.PathError{Op: "lchtimes", Path: name,
				Err: fmt.Errorf("time %s is outside what SFTP carries (1970 to 2106)", t.UTC().Format(time.RFC3339))}
		}
	}
	return s.lsetstat(context.Background(), "lchtimes", name, func(b []byte) []byte {
		b = binary.BigEndian.AppendUint32(b, attrACModTime)
		b = binary.BigEndian.AppendUint32(b, uint32(atime.Unix()))
		return binary.BigEndian.AppendUint32(b, uint32(mtime.Unix()))
	})
}

// errNoLsetstatSession says the server offers lsetstat@openssh.com but
// allows no session to send it on beside the main one, whose pkg/sftp
// client cannot.
var errNoLsetstatSession = fmt.Errorf("%w: %s goes on an sftp session of its own, and the server allows none beside the main one",
	errors.ErrUnsupported, lsetstatExt)

// lsetstat sends an lsetstat@openssh.com request for name with the
// ATTRS attrs appends, and waits for its status; op names it in errors.
func (s *SFTP) lsetstat(ctx context.Context, op, name string, attrs func([]byte) []byte) error {
	if !s.CanLchtimes() {
		return &fs.PathError{Op: op, Path: name,
			Err: fmt.Errorf("%w: the server does not offer %s", errors.ErrUnsupported, lsetstatExt)}
	}
	bs, err := s.getBatch(ctx)
	if errors.Is(err, ErrNoBatch) {
		err = errNoLsetstatSession
	}
	if err != nil {
		return &fs.PathError{Op: op, Path: name, Err: err}
	}
	defer s.batch.put(bs)
	err = bs.s.simple(fxpExtended, func(b []byte) []byte {
		b = appendString(b, lsetstatExt)
		b = appendString(b, name)
		return attrs(b)
	})
	if err != nil {
		s.batch.drop(bs, err)
		return &fs.PathError{Op: op, Path: name, Err: err}
	}
	return nil
}

// lchownAttrs appends the ATTRS of an owner and group. -1 leaves that
// one as it is, as with chown(2): it goes as 0xffffffff, which a POSIX
// server's chown reads as -1 again.
func lchownAttrs(uid, gid int) func([]byte) []byte {
	return func(b []byte) []byte {
		b = binary.BigEndian.AppendUint32(b, attrUIDGID)
		b = binary.BigEndian.AppendUint32(b, uint32(uid))
		return binary.BigEndian.AppendUint32(b, uint32(gid))
	}
}
