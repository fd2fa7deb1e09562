package clone

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// same says whether two stats of a file say the same of its bytes.
func same(a, b os.FileInfo) bool {
	sa, ok1 := a.Sys().(*syscall.Stat_t)
	sb, ok2 := b.Sys().(*syscall.Stat_t)
	return ok1 && ok2 && sa.Dev == sb.Dev && sa.Ino == sb.Ino && sa.Size == sb.Size &&
		sa.Mtim == sb.Mtim && sa.Ctim == sb.Ctim
}

func into(dst, src *os.File) bool {
	dc, err := dst.SyscallConn()
	if err != nil {
		return false
	}
	sc, err := src.SyscallConn()
	if err != nil {
		return false
	}
	var cerr error = unix.ENOTSUP
	err = dc.Control(func(dfd uintptr) {
		if err := sc.Control(func(sfd uintptr) { cerr = unix.IoctlFileClone(int(dfd), int(sfd)) }); err != nil {
			cerr = err
		}
	})
	return err == nil && cerr == nil
}
