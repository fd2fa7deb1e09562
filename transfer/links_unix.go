//go:build unix

package transfer

import (
	"io/fs"
	"syscall"
)

func localOwner(fi fs.FileInfo) (uid, gid int, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return int(st.Uid), int(st.Gid), true
}

func localFileID(fi fs.FileInfo) (dev, ino, nlink uint64, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, 0, false
	}
	// The fields' types differ between systems, hence the conversions.
	return uint64(st.Dev), uint64(st.Ino), uint64(st.Nlink), true
}
