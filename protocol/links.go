package protocol

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"github.com/pkg/sftp"
)

// Symbolic links, hard links and numeric owners over SFTP, for copies
// that keep links as links and owners as they were (transfer/links.go).

// hardlinkExt is OpenSSH's extension that gives a file another name;
// SFTP v3 itself has no hard links.
const hardlinkExt = "hardlink@openssh.com"

// Lstat returns name's attributes without following a final symbolic
// link.
func (s *SFTP) Lstat(name string) (fs.FileInfo, error) {
	if a, ok := s.early.take(name, true); ok {
		return a.fi, a.err
	}
	return s.lstat(name)
}

// Symlink creates name, a symbolic link whose target is the string
// target, stored as given (relative targets stay relative).
//
// The draft puts the link's path first in SSH_FXP_SYMLINK; OpenSSH's
// sftp-server has always read the two the other way round, and every
// client that talks to it sends target first. pkg/sftp's client does,
// which is what the servers hpncp meets (OpenSSH's) expect.
func (s *SFTP) Symlink(target, name string) error {
	return s.onMain(func(c *sftp.Client) error { return c.Symlink(target, name) })
}

// Link makes newname another name of the file oldname, through OpenSSH's
// hardlink@openssh.com. A server without the extension gets no request:
// the error wraps errors.ErrUnsupported and names the extension.
func (s *SFTP) Link(oldname, newname string) error {
	if _, ok := s.mc.current().HasExtension(hardlinkExt); !ok {
		return &fs.PathError{Op: "hard link", Path: newname,
			Err: fmt.Errorf("%w: the server does not offer %s", errors.ErrUnsupported, hardlinkExt)}
	}
	return s.onMain(func(c *sftp.Client) error { return c.Link(oldname, newname) })
}

// Lchown sets name's numeric owner and group without following a final
// symbolic link: through lsetstat@openssh.com (lsetstat.go) where the
// server offers it, in one request and for every kind of file. Elsewhere
// SFTP's SETSTAT would follow a link (OpenSSH's calls chown) and change
// its target instead: for a link the error wraps errors.ErrUnsupported
// and nothing is sent, and the caller leaves the link's owner as the
// server made it. A link put in name's place between that check and the
// SETSTAT would be followed; a copy sets owners on the files it has just
// made, under names no one else writes.
func (s *SFTP) Lchown(name string, uid, gid int) error {
	if s.CanLchtimes() {
		err := s.lsetstat(context.Background(), "lchown", name, lchownAttrs(uid, gid))
		if !errors.Is(err, errNoLsetstatSession) {
			return err
		}
	}
	fi, err := s.lstat(name)
	if err != nil {
		return err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return &fs.PathError{Op: "lchown", Path: name,
			Err: fmt.Errorf("%w: SFTP can set a symbolic link's owner only by following it, without %s", errors.ErrUnsupported, lsetstatExt)}
	}
	return s.onMain(func(c *sftp.Client) error { return c.Chown(name, uid, gid) })
}

// Owner returns the numeric owner and group the server sent with the
// attributes, and whether it sent them.
func (a *attrInfo) Owner() (uid, gid int, ok bool) {
	return int(a.uid), int(a.gid), a.owned
}

// Owner returns the numeric owner and group of a FileInfo this package
// returned, from its own listings and stats or from pkg/sftp's, or of one
// whose Sys says them itself (a helper's walk); ok is false for any other
// FileInfo, or when the server sent no owner.
func Owner(fi fs.FileInfo) (uid, gid int, ok bool) {
	switch st := fi.Sys().(type) {
	case interface {
		Owner() (uid, gid int, ok bool)
	}:
		return st.Owner()
	case *sftp.FileStat:
		// pkg/sftp keeps no record of which attributes a reply held.
		// OpenSSH's replies always hold the owner; a server whose do not
		// reads as 0:0 here.
		return int(st.UID), int(st.GID), true
	}
	return 0, 0, false
}
