//go:build !linux

package sshdtest

import "syscall"

func sysProcAttr() *syscall.SysProcAttr { return nil }
