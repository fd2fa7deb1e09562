package transfer

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
)

// A receiving end writes only below the target the user named. Every
// operation of a confined Local (Confine) resolves its path from a
// directory opened once at that target, one element at a time, and
// refuses to pass through a symbolic link on the way; the operation on
// the last element acts on it without following it either (a link there
// is read, replaced or removed as a link, never written through). So a
// name a server sent, a link an earlier run made, or a directory swapped
// for a link between two runs cannot lead a write outside the target,
// nor sideways inside it. The target itself is opened as the user named
// it, following links, as scp and rsync do for the destination operand.
//
// hpncp follows no link in the destination, as rsync does without
// --keep-dirlinks (-K), which hpncp does not offer: a link where the
// source has a directory is replaced by a directory.

// ErrLinkInPath is a path that passes through a symbolic link below the
// target: a receiving end does not follow it.
var ErrLinkInPath = errors.New("a symbolic link stands in the path; hpncp does not write through links below the target")

// ErrOutsideTarget is a path the engine asked a confined end for that is
// not below its target: a bug, or a name that escaped the checks.
var ErrOutsideTarget = errors.New("outside the target")

// Confine returns the receiving end e confined to e's path, when e is
// local and not confined yet; a remote end is returned as it is.
func Confine(e Endpoint) (Endpoint, error) { return ConfineAt(e, e.Path) }

// ConfineAt returns the receiving end e confined to dir, which holds e's
// path: the writes go below dir when it is an existing directory (links
// followed: the user named it), below its parent otherwise. A sync names
// the directory the user gave, so that whatever stands at e's path below
// it is replaced, not followed.
func ConfineAt(e Endpoint, dir string) (Endpoint, error) {
	l, ok := e.FS.(Local)
	if !ok || l.root != nil {
		return e, nil
	}
	if fi, err := l.Stat(dir); err != nil || !fi.IsDir() {
		dir = filepath.Dir(filepath.Clean(dir))
	}
	r, err := openRoot(dir)
	if err != nil {
		return e, &Error{Op: "open target", Path: dir, Err: err}
	}
	if _, err := r.rel(e.Path); err != nil {
		return e, &Error{Op: "open target", Path: e.Path, Err: err}
	}
	return Endpoint{FS: Local{root: r}, Path: e.Path}, nil
}

// errSwappedForLink is a source listed as a file that is a link when it
// is opened, in a copy that does not follow links.
var errSwappedForLink = errors.New("is a symbolic link now, but was listed as a file; links are not followed")

// NoFollow returns the source end e reading files without following a
// final link, for a walk that listed them without following links (rsync's
// --links, and hpncp sync): a file swapped for a link since its listing
// is refused, not read through the link.
func NoFollow(e Endpoint) Endpoint {
	if l, ok := e.FS.(Local); ok && l.root == nil {
		e.FS = Local{noFollow: true}
	}
	return e
}

// Confined reports whether fsys is a local end confined to a target.
func Confined(fsys FS) bool {
	l, ok := fsys.(Local)
	return ok && l.root != nil
}

// rootPath is where a confined end's root is, in both forms a caller
// may name paths in.
type rootPath struct {
	given string // as given, cleaned
	abs   string
}

func newRootPath(dir string) (rootPath, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return rootPath{}, err
	}
	return rootPath{given: filepath.Clean(dir), abs: abs}, nil
}

// rel returns name relative to the root ("." for the root itself), from
// the lexical form alone: the engine joins names that passed ValidName
// onto the target's path, so no ".." stands in a name it asks for.
func (p rootPath) rel(name string) (string, error) {
	base := p.given
	switch {
	case filepath.IsAbs(name) != filepath.IsAbs(base):
		base = p.abs
		if !filepath.IsAbs(name) {
			abs, err := filepath.Abs(name)
			if err != nil {
				return "", err
			}
			name = abs
		}
	}
	rel, err := filepath.Rel(base, filepath.Clean(name))
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", &fs.PathError{Op: "resolve", Path: name, Err: fmt.Errorf("%w %s", ErrOutsideTarget, p.given)}
	}
	return rel, nil
}

// dirTarget looks at dst, where a directory of the source goes. A
// symbolic link there, which only a confined end shows (an earlier
// --links run may have made it), is removed as rsync replaces it, and
// dst then reads as missing; a remote end follows links as scp does.
func dirTarget(dst Endpoint) (fs.FileInfo, error) {
	di, err := dst.FS.Stat(dst.Path)
	if err != nil || di.Mode()&fs.ModeSymlink == 0 {
		return di, err
	}
	if err := dst.FS.Remove(dst.Path); err != nil {
		return nil, err
	}
	return nil, &fs.PathError{Op: "stat", Path: dst.Path, Err: fs.ErrNotExist}
}
