package protocol

import "io/fs"

// FileMode turns permission bits as SFTP, scp and tar carry them (with
// setuid 0o4000, setgid 0o2000 and sticky 0o1000) into an fs.FileMode;
// UnixMode is its inverse.
func FileMode(m uint32) fs.FileMode {
	mode := fs.FileMode(m & 0o777)
	if m&0o4000 != 0 {
		mode |= fs.ModeSetuid
	}
	if m&0o2000 != 0 {
		mode |= fs.ModeSetgid
	}
	if m&0o1000 != 0 {
		mode |= fs.ModeSticky
	}
	return mode
}
