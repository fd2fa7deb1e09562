//go:build !linux

package transfer

import (
	"errors"
	"io/fs"
	"os"
	"slices"
	"time"
)

// root is a confined end's target where openat2 and O_PATH are missing:
// Go's os.Root, which keeps every path below the target but, unlike the
// Linux end, follows a link that stays below it.
type root struct {
	rootPath
	r *os.Root
}

func openRoot(dir string) (*root, error) {
	p, err := newRootPath(dir)
	if err != nil {
		return nil, err
	}
	r, err := os.OpenRoot(p.abs)
	if err != nil {
		return nil, err
	}
	return &root{rootPath: p, r: r}, nil
}

func (r *root) lstat(_, name string) (fs.FileInfo, error) {
	rel, err := r.rel(name)
	if err != nil {
		return nil, err
	}
	return r.r.Lstat(rel)
}

func (r *root) readDir(name string) ([]fs.FileInfo, error) {
	f, err := r.open("open", name, os.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	infos := make([]fs.FileInfo, 0, len(names))
	for _, n := range names {
		fi, err := r.lstat("lstat", name+string(os.PathSeparator)+n)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return nil, err
		}
		infos = append(infos, fi)
	}
	return infos, nil
}

func (r *root) open(op, name string, flags int) (*os.File, error) {
	return r.openMode(op, name, flags, 0)
}

func (r *root) openMode(op, name string, flags int, perm uint32) (*os.File, error) {
	rel, err := r.rel(name)
	if err != nil {
		return nil, err
	}
	if fi, err := r.r.Lstat(rel); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		return nil, &fs.PathError{Op: op, Path: name, Err: ErrLinkInPath}
	}
	return r.r.OpenFile(rel, flags, fs.FileMode(perm))
}

func (r *root) with(name string, f func(rel string) error) error {
	rel, err := r.rel(name)
	if err != nil {
		return err
	}
	return f(rel)
}

func (r *root) mkdir(name string, perm fs.FileMode) error {
	return r.with(name, func(rel string) error { return r.r.Mkdir(rel, perm) })
}

func (r *root) rename(oldname, newname string) error {
	return r.with(oldname, func(o string) error {
		return r.with(newname, func(n string) error { return r.r.Rename(o, n) })
	})
}

func (r *root) link(oldname, newname string) error {
	return r.with(oldname, func(o string) error {
		return r.with(newname, func(n string) error { return r.r.Link(o, n) })
	})
}

func (r *root) remove(name string) error {
	return r.with(name, func(rel string) error { return r.r.Remove(rel) })
}

func (r *root) chmod(name string, mode fs.FileMode) error {
	return r.with(name, func(rel string) error { return r.r.Chmod(rel, mode) })
}

func (r *root) chtimes(name string, atime, mtime time.Time) error {
	return r.with(name, func(rel string) error { return r.r.Chtimes(rel, atime, mtime) })
}

func (r *root) lchown(name string, uid, gid int) error {
	return r.with(name, func(rel string) error { return r.r.Lchown(rel, uid, gid) })
}

func (r *root) symlink(target, name string) error {
	return r.with(name, func(rel string) error { return r.r.Symlink(target, rel) })
}

func (r *root) readLink(name string) (string, error) {
	rel, err := r.rel(name)
	if err != nil {
		return "", err
	}
	return r.r.Readlink(rel)
}

func (r *root) truncate(name string, size int64) error {
	f, err := r.open("truncate", name, os.O_WRONLY)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Truncate(size)
}
