package transfer

import (
	"io/fs"
	"os"

	"github.com/hpncp/hpncp/protocol"
)

// Optional FS methods for copies that keep symbolic links as links, hard
// links as one file with several names, and numeric owners (rsync's -l,
// -H, -o and -g). Local and *protocol.SFTP have them all; an end that
// lacks one cannot do what it is for, and the caller says so.

// LinkReader is an end that reads symbolic links themselves rather than
// what they point to.
type LinkReader interface {
	// Lstat is Stat without following a final symbolic link.
	Lstat(name string) (fs.FileInfo, error)
	// ReadLink returns the target of the symbolic link name, as stored.
	ReadLink(name string) (string, error)
}

// Symlinker is an end that creates symbolic links.
type Symlinker interface {
	// Symlink creates name, a symbolic link pointing to target.
	Symlink(target, name string) error
}

// HardLinker is an end that gives a file another name.
type HardLinker interface {
	// Link makes newname another name of oldname. Over SFTP it needs
	// OpenSSH's hardlink@openssh.com; without it the error wraps
	// errors.ErrUnsupported and names the extension.
	Link(oldname, newname string) error
}

// Chowner is an end that sets numeric owners.
type Chowner interface {
	// Lchown sets name's owner and group without following a final
	// symbolic link. SFTP can only with OpenSSH's lsetstat@openssh.com:
	// without it, for a link the error wraps errors.ErrUnsupported, and
	// callers leave that link's owner be.
	Lchown(name string, uid, gid int) error
}

func (Local) Lstat(name string) (fs.FileInfo, error) { return os.Lstat(name) }
func (Local) ReadLink(name string) (string, error)   { return os.Readlink(name) }
func (Local) Symlink(target, name string) error      { return os.Symlink(target, name) }
func (Local) Link(oldname, newname string) error     { return os.Link(oldname, newname) }
func (Local) Lchown(name string, uid, gid int) error { return os.Lchown(name, uid, gid) }

// OwnerOf returns the numeric owner and group in fi, from any end's Stat,
// Lstat or ReadDir; ok is false where the end gave none.
func OwnerOf(fi fs.FileInfo) (uid, gid int, ok bool) {
	if uid, gid, ok := protocol.Owner(fi); ok {
		return uid, gid, true
	}
	return localOwner(fi)
}

// FileID returns the device and inode that identify the file of fi, and
// its count of names, for a local FileInfo: files with the same device
// and inode are one file. SFTP has no inode numbers: ok is false for a
// remote FileInfo.
func FileID(fi fs.FileInfo) (dev, ino, nlink uint64, ok bool) {
	return localFileID(fi)
}
