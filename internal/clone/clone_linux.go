package clone

import (
	"os"

	"golang.org/x/sys/unix"
)

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
