package transfer

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"sync"
)

// scp -r follows symbolic links to directories, and so does hpncp. A link
// to a directory that holds it would make the tree endless, and two such
// links double it at every level: the walk would never end, nor would the
// memory it takes. So every directory the walk enters is compared with
// those on its path from the source operand, and one that is one of them
// is reported and left out. A local directory is known by its device and
// inode (os.SameFile); SFTP gives no inode numbers, so a remote one is
// known by the path the server resolves it to (REALPATH), asked only of
// directories reached through a link, since a loop needs one.

// errDirLoop says a directory is one of the directories that hold it.
var errDirLoop = errors.New("directory loop")

// walkDir is a directory on the walk's current path, linked to the one
// that holds it.
type walkDir struct {
	up   *walkDir
	at   Endpoint
	info fs.FileInfo // links followed
	link bool        // reached through a symbolic link

	once  sync.Once
	canon string // remote: the server's canonical path; "" when unknown
}

// newWalkRoot is the source operand at, a directory of info si.
func newWalkRoot(at Endpoint, si fs.FileInfo) *walkDir {
	return &walkDir{at: at, info: si}
}

// child is the directory at below d, of info (links followed) fi; link
// says its entry in d is a symbolic link.
func (d *walkDir) child(at Endpoint, fi fs.FileInfo, link bool) *walkDir {
	return &walkDir{up: d, at: at, info: fi, link: link}
}

// loop returns an error naming the ancestor d is the same directory as,
// or nil when it is none of them.
func (d *walkDir) loop() error {
	if d == nil || d.up == nil {
		return nil
	}
	if !isRemote(d.at.FS) {
		for a := d.up; a != nil; a = a.up {
			if os.SameFile(a.info, d.info) {
				return loopError(d, a)
			}
		}
		return nil
	}
	if !d.link {
		return nil
	}
	c := d.canonical()
	if c == "" {
		return nil
	}
	for a := d.up; a != nil; a = a.up {
		if a.canonical() == c {
			return loopError(d, a)
		}
	}
	return nil
}

func loopError(d, a *walkDir) error {
	return &Error{Op: "copy", Path: d.at.String(),
		Err:  fmt.Errorf("%w: it leads back to %s", errDirLoop, a.at),
		Hint: "a symbolic link points to a directory that holds it; it was not followed, the rest was copied"}
}

// canonical returns the server's canonical path of a remote d, asked
// once, or "" when the server would not say.
func (d *walkDir) canonical() string {
	d.once.Do(func() {
		if d.up != nil && !d.link {
			// An entry that is no link adds its name to its parent's
			// path, and a loop needs a link: no round trip.
			if up := d.up.canonical(); up != "" {
				d.canon = path.Join(up, d.at.FS.Base(d.at.Path))
			}
			return
		}
		d.canon = d.resolve()
	})
	return d.canon
}

// resolve asks the server where d is. A server whose REALPATH leaves
// links as they are (pkg/sftp's) names a link's own path: the link is
// then read and its target taken as the path, which catches links to
// an ancestor written as ".", ".." or an absolute path.
func (d *walkDir) resolve() string {
	p, err := d.at.FS.Abs(d.at.Path)
	if err != nil || !d.link || d.up == nil {
		return cleanOrEmpty(p, err)
	}
	up := d.up.canonical()
	r, ok := d.at.FS.(LinkReader)
	if up == "" || !ok || p != path.Join(up, d.at.FS.Base(d.at.Path)) {
		return p
	}
	target, err := r.ReadLink(d.at.Path)
	if err != nil {
		return p
	}
	if !path.IsAbs(target) {
		target = path.Join(up, target)
	}
	return path.Clean(target)
}

func cleanOrEmpty(p string, err error) string {
	if err != nil || p == "" {
		return ""
	}
	return path.Clean(p)
}
