//go:build darwin || freebsd || netbsd

package helper

import "syscall"

// statAtime is st's access time, Unix seconds.
func statAtime(st *syscall.Stat_t) int64 { return int64(st.Atimespec.Sec) }
