package sshtest

import (
	"encoding/binary"
	"errors"
	"io/fs"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// OpenSSH's sftp-server (since 8.0) offers lsetstat@openssh.com, a
// SETSTAT that does not follow a final symbolic link; pkg/sftp's server
// does not, so the proxy in front of it adds the extension to the
// server's VERSION and answers the requests itself, as sftp-server does.
const lsetstatExt = "lsetstat@openssh.com"

const (
	fxpVersion  = 2
	fxpExtended = 200

	fxBadMessage = 5

	attrSize        = 0x1
	attrUIDGID      = 0x2
	attrPermissions = 0x4
	attrACModTime   = 0x8
	attrExtended    = 0x80000000
)

// offerLsetstat returns the server's VERSION packet pkt with
// lsetstat@openssh.com added to the extensions it names; any other
// packet comes back as it was.
func offerLsetstat(pkt []byte) []byte {
	if len(pkt) < 5 || pkt[4] != fxpVersion {
		return pkt
	}
	b := appendString(append([]byte(nil), pkt...), lsetstatExt)
	b = appendString(b, "1")
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// lsetstat answers an EXTENDED request for lsetstat@openssh.com, whose
// body (past the extension's name) is a path and ATTRS, and reports
// whether it did. Like sftp-server it refuses a size, which means
// nothing for a link, and applies mode, times and owner in that order
// without following a final link, answering with the last failure.
// Linux has no mode for a link: that part fails as it does there.
func (p *listingProxy) lsetstat(id, body []byte) bool {
	name, rest, ok := cutString(body)
	if !ok {
		return false
	}
	a, ok := parseSetAttrs(rest)
	if !ok {
		_ = p.write(status(id, fxBadMessage, "malformed attributes"))
		return true
	}
	if a.flags&attrSize != 0 {
		_ = p.write(status(id, fxBadMessage, "lsetstat: a size means nothing for a link"))
		return true
	}
	if !filepath.IsAbs(name) {
		name = filepath.Join(p.root, name)
	}
	var err error
	if a.flags&attrPermissions != 0 {
		if e := unix.Fchmodat(unix.AT_FDCWD, name, a.perm&0o7777, unix.AT_SYMLINK_NOFOLLOW); e != nil {
			err = e
		}
	}
	if a.flags&attrACModTime != 0 {
		ts := []unix.Timespec{
			unix.NsecToTimespec(time.Unix(int64(a.atime), 0).UnixNano()),
			unix.NsecToTimespec(time.Unix(int64(a.mtime), 0).UnixNano()),
		}
		if e := unix.UtimesNanoAt(unix.AT_FDCWD, name, ts, unix.AT_SYMLINK_NOFOLLOW); e != nil {
			err = e
		}
	}
	if a.flags&attrUIDGID != 0 {
		if e := unix.Fchownat(unix.AT_FDCWD, name, int(a.uid), int(a.gid), unix.AT_SYMLINK_NOFOLLOW); e != nil {
			err = e
		}
	}
	code, msg := uint32(fxOK), ""
	if err != nil {
		code, msg = fxFailure, err.Error()
		switch {
		case errors.Is(err, fs.ErrNotExist):
			code = fxNoSuchFile
		case errors.Is(err, fs.ErrPermission):
			code = fxPermissionDenied
		}
	}
	_ = p.write(status(id, code, msg))
	return true
}

// setAttrs are the fields of an SFTP v3 ATTRS a SETSTAT can carry.
type setAttrs struct {
	flags, uid, gid, perm, atime, mtime uint32
}

// parseSetAttrs reads an ATTRS; ok is false when b is too short for the
// fields its flags announce.
func parseSetAttrs(b []byte) (a setAttrs, ok bool) {
	u32 := func() uint32 {
		if len(b) < 4 {
			ok = false
			return 0
		}
		v := binary.BigEndian.Uint32(b)
		b = b[4:]
		return v
	}
	ok = true
	a.flags = u32()
	if a.flags&attrSize != 0 {
		u32()
		u32()
	}
	if a.flags&attrUIDGID != 0 {
		a.uid, a.gid = u32(), u32()
	}
	if a.flags&attrPermissions != 0 {
		a.perm = u32()
	}
	if a.flags&attrACModTime != 0 {
		a.atime, a.mtime = u32(), u32()
	}
	if a.flags&attrExtended != 0 && ok {
		for n := u32(); n > 0 && ok; n-- {
			for range 2 {
				var s bool
				if _, b, s = cutString(b); !s {
					return a, false
				}
			}
		}
	}
	return a, ok
}
