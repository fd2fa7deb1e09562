package sshdtest

import "syscall"

// sysProcAttr makes the kernel stop sshd if the test binary dies without
// running its cleanups (a -timeout panic, a kill), so that no listener
// outlives the tests.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
