//go:build !linux

package transfer

import (
	"io/fs"
	"time"
)

func accessTime(fs.FileInfo) (time.Time, bool) { return time.Time{}, false }
