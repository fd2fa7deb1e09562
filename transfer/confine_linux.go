//go:build linux

package transfer

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// root is a confined end's target: a directory opened once, O_PATH, from
// which every operation resolves its path.
type root struct {
	rootPath
	fd int
}

func openRoot(dir string) (*root, error) {
	p, err := newRootPath(dir)
	if err != nil {
		return nil, err
	}
	fd, err := unix.Open(p.abs, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: dir, Err: err}
	}
	r := &root{rootPath: p, fd: fd}
	// A run's ends live as long as its Copy or Sync; nothing closes them
	// one by one, so the descriptor goes with the last reference.
	runtime.AddCleanup(r, func(fd int) { _ = unix.Close(fd) }, fd)
	return r, nil
}

// noOpenat2 is set once the kernel refused openat2 (before Linux 5.6, or
// a seccomp filter): resolution then walks element by element.
var noOpenat2 atomic.Bool

// at opens the directory holding name's last element, resolved below the
// root without following a link, and returns it with that element ("."
// for the root itself). done closes the directory.
func (r *root) at(op, name string) (dirfd int, base string, done func(), err error) {
	rel, err := r.rel(name)
	if err != nil {
		return -1, "", nil, err
	}
	dir, base := filepath.Split(rel)
	dir = strings.TrimSuffix(dir, "/")
	if dir == "" {
		return r.fd, base, func() { runtime.KeepAlive(r) }, nil
	}
	fd, err := r.openDir(dir)
	if err != nil {
		runtime.KeepAlive(r)
		return -1, "", nil, &fs.PathError{Op: op, Path: name, Err: err}
	}
	return fd, base, func() { _ = unix.Close(fd); runtime.KeepAlive(r) }, nil
}

// openDir opens rel, a directory below the root, for use as the dirfd of
// *at calls; a link on the way is ErrLinkInPath.
func (r *root) openDir(rel string) (int, error) {
	if !noOpenat2.Load() {
		fd, err := unix.Openat2(r.fd, rel, &unix.OpenHow{
			Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
		})
		switch {
		case err == nil:
			return fd, nil
		case errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM):
			noOpenat2.Store(true)
		case errors.Is(err, unix.ELOOP):
			return -1, ErrLinkInPath
		case errors.Is(err, unix.EXDEV):
			// RESOLVE_BENEATH says a ".." climbed out; rel has none, but
			// say what it means should one appear.
			return -1, ErrOutsideTarget
		default:
			return -1, err
		}
	}
	fd := r.fd
	for _, elem := range strings.Split(rel, "/") {
		next, err := unix.Openat(fd, elem, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil && (errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP)) {
			var st unix.Stat_t
			if unix.Fstatat(fd, elem, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
				err = ErrLinkInPath
			}
		}
		if fd != r.fd {
			_ = unix.Close(fd)
		}
		if err != nil {
			return -1, err
		}
		fd = next
	}
	return fd, nil
}

func (r *root) lstat(op, name string) (fs.FileInfo, error) {
	dirfd, base, done, err := r.at(op, name)
	if err != nil {
		return nil, err
	}
	defer done()
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return nil, &fs.PathError{Op: op, Path: name, Err: err}
	}
	if base == "." {
		base = filepath.Base(r.given)
	}
	return newStatInfo(base, &st), nil
}

func (r *root) readDir(name string) ([]fs.FileInfo, error) {
	f, err := r.open("open", name, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	fd := int(f.Fd())
	infos := make([]fs.FileInfo, 0, len(names))
	for _, n := range names {
		var st unix.Stat_t
		if err := unix.Fstatat(fd, n, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue // removed since the listing: nothing to copy
			}
			return nil, &fs.PathError{Op: "lstat", Path: filepath.Join(name, n), Err: err}
		}
		infos = append(infos, newStatInfo(n, &st))
	}
	return infos, nil
}

// open opens name's last element without following it; O_NONBLOCK keeps
// a FIFO from blocking the open, and anything but a regular file or,
// where asked for, a directory is refused.
func (r *root) open(op, name string, flags int) (*os.File, error) {
	return r.openMode(op, name, flags, 0)
}

func (r *root) openMode(op, name string, flags int, perm uint32) (*os.File, error) {
	dirfd, base, done, err := r.at(op, name)
	if err != nil {
		return nil, err
	}
	defer done()
	fd, err := unix.Openat(dirfd, base, flags|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, perm)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			err = ErrLinkInPath
		}
		return nil, &fs.PathError{Op: op, Path: name, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		_ = unix.Close(fd)
		return nil, &fs.PathError{Op: op, Path: name, Err: err}
	}
	want := uint32(unix.S_IFREG)
	if flags&unix.O_DIRECTORY != 0 {
		want = unix.S_IFDIR
	}
	if st.Mode&unix.S_IFMT != want {
		_ = unix.Close(fd)
		return nil, &fs.PathError{Op: op, Path: name, Err: errNotRegular}
	}
	// Back to blocking: the file is regular or a directory, and os.File
	// reads it without the poller either way.
	_ = unix.SetNonblock(fd, false)
	return os.NewFile(uintptr(fd), name), nil
}

func (r *root) mkdir(name string, perm fs.FileMode) error {
	return r.do("mkdir", name, func(dirfd int, base string) error {
		return unix.Mkdirat(dirfd, base, syscallMode(perm))
	})
}

// do runs f on the directory holding name's last element.
func (r *root) do(op, name string, f func(dirfd int, base string) error) error {
	dirfd, base, done, err := r.at(op, name)
	if err != nil {
		return err
	}
	defer done()
	if err := f(dirfd, base); err != nil {
		return &fs.PathError{Op: op, Path: name, Err: err}
	}
	return nil
}

// do2 runs f on the directories holding the last elements of two names.
func (r *root) do2(op, oldname, newname string, f func(olddir int, oldbase string, newdir int, newbase string) error) error {
	odir, obase, odone, err := r.at(op, oldname)
	if err != nil {
		return err
	}
	defer odone()
	ndir, nbase, ndone, err := r.at(op, newname)
	if err != nil {
		return err
	}
	defer ndone()
	if err := f(odir, obase, ndir, nbase); err != nil {
		return &os.LinkError{Op: op, Old: oldname, New: newname, Err: err}
	}
	return nil
}

func (r *root) rename(oldname, newname string) error {
	return r.do2("rename", oldname, newname, unix.Renameat)
}

func (r *root) link(oldname, newname string) error {
	return r.do2("link", oldname, newname, func(od int, ob string, nd int, nb string) error {
		return unix.Linkat(od, ob, nd, nb, 0)
	})
}

func (r *root) remove(name string) error {
	return r.do("remove", name, func(dirfd int, base string) error {
		err := unix.Unlinkat(dirfd, base, 0)
		if err == nil {
			return nil
		}
		err1 := unix.Unlinkat(dirfd, base, unix.AT_REMOVEDIR)
		if err1 == nil {
			return nil
		}
		// As os.Remove: the rmdir's error unless name is no directory.
		if !errors.Is(err1, unix.ENOTDIR) {
			return err1
		}
		return err
	})
}

func (r *root) chmod(name string, mode fs.FileMode) error {
	return r.do("chmod", name, func(dirfd int, base string) error {
		err := unix.Fchmodat(dirfd, base, syscallMode(mode), unix.AT_SYMLINK_NOFOLLOW)
		if !errors.Is(err, unix.EOPNOTSUPP) {
			return err
		}
		// Before fchmodat2 (Linux 6.6) the kernel cannot refuse a final
		// link itself: look, then change what was looked at.
		var st unix.Stat_t
		if err := unix.Fstatat(dirfd, base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return err
		}
		if st.Mode&unix.S_IFMT == unix.S_IFLNK {
			return unix.EOPNOTSUPP
		}
		return unix.Fchmodat(dirfd, base, syscallMode(mode), 0)
	})
}

func (r *root) chtimes(name string, atime, mtime time.Time) error {
	ts := []unix.Timespec{timespec(atime), timespec(mtime)}
	return r.do("chtimes", name, func(dirfd int, base string) error {
		return unix.UtimesNanoAt(dirfd, base, ts, unix.AT_SYMLINK_NOFOLLOW)
	})
}

func timespec(t time.Time) unix.Timespec {
	if t.IsZero() {
		return unix.Timespec{Nsec: unix.UTIME_OMIT}
	}
	return unix.NsecToTimespec(t.UnixNano())
}

func (r *root) lchown(name string, uid, gid int) error {
	return r.do("lchown", name, func(dirfd int, base string) error {
		return unix.Fchownat(dirfd, base, uid, gid, unix.AT_SYMLINK_NOFOLLOW)
	})
}

func (r *root) symlink(target, name string) error {
	return r.do("symlink", name, func(dirfd int, base string) error {
		return unix.Symlinkat(target, dirfd, base)
	})
}

func (r *root) readLink(name string) (string, error) {
	var target string
	err := r.do("readlink", name, func(dirfd int, base string) error {
		for size := 256; ; size *= 2 {
			buf := make([]byte, size)
			n, err := unix.Readlinkat(dirfd, base, buf)
			if err != nil {
				return err
			}
			if n < size {
				target = string(buf[:n])
				return nil
			}
		}
	})
	return target, err
}

func (r *root) truncate(name string, size int64) error {
	f, err := r.open("truncate", name, unix.O_WRONLY)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Truncate(size)
}

// syscallMode is mode's permission and special bits as chmod takes them.
func syscallMode(mode fs.FileMode) uint32 {
	m := uint32(mode.Perm())
	if mode&fs.ModeSetuid != 0 {
		m |= unix.S_ISUID
	}
	if mode&fs.ModeSetgid != 0 {
		m |= unix.S_ISGID
	}
	if mode&fs.ModeSticky != 0 {
		m |= unix.S_ISVTX
	}
	return m
}

// statInfo is a FileInfo from an fstatat, with the same Sys as os's own
// (links_unix.go and atime_linux.go read it).
type statInfo struct {
	name string
	sys  syscall.Stat_t
}

func newStatInfo(name string, st *unix.Stat_t) *statInfo {
	return &statInfo{name: name, sys: syscall.Stat_t{
		Dev: st.Dev, Ino: st.Ino, Nlink: st.Nlink, Mode: st.Mode,
		Uid: st.Uid, Gid: st.Gid, Rdev: st.Rdev, Size: st.Size,
		Blksize: st.Blksize, Blocks: st.Blocks,
		Atim: syscall.Timespec{Sec: st.Atim.Sec, Nsec: st.Atim.Nsec},
		Mtim: syscall.Timespec{Sec: st.Mtim.Sec, Nsec: st.Mtim.Nsec},
		Ctim: syscall.Timespec{Sec: st.Ctim.Sec, Nsec: st.Ctim.Nsec},
	}}
}

func (s *statInfo) Name() string { return s.name }
func (s *statInfo) Size() int64  { return s.sys.Size }
func (s *statInfo) ModTime() time.Time {
	return time.Unix(int64(s.sys.Mtim.Sec), int64(s.sys.Mtim.Nsec))
}
func (s *statInfo) IsDir() bool { return s.Mode().IsDir() }
func (s *statInfo) Sys() any    { return &s.sys }

func (s *statInfo) Mode() fs.FileMode {
	m := fs.FileMode(s.sys.Mode & 0o777)
	switch s.sys.Mode & unix.S_IFMT {
	case unix.S_IFBLK:
		m |= fs.ModeDevice
	case unix.S_IFCHR:
		m |= fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFDIR:
		m |= fs.ModeDir
	case unix.S_IFIFO:
		m |= fs.ModeNamedPipe
	case unix.S_IFLNK:
		m |= fs.ModeSymlink
	case unix.S_IFSOCK:
		m |= fs.ModeSocket
	}
	if s.sys.Mode&unix.S_ISUID != 0 {
		m |= fs.ModeSetuid
	}
	if s.sys.Mode&unix.S_ISGID != 0 {
		m |= fs.ModeSetgid
	}
	if s.sys.Mode&unix.S_ISVTX != 0 {
		m |= fs.ModeSticky
	}
	return m
}
