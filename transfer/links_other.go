//go:build !unix

package transfer

import "io/fs"

// Elsewhere the local FileInfo carries neither owners nor inodes.

func localOwner(fs.FileInfo) (uid, gid int, ok bool) { return 0, 0, false }

func localFileID(fs.FileInfo) (dev, ino, nlink uint64, ok bool) { return 0, 0, 0, false }
