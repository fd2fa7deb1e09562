//go:build unix

package ends

import (
	"syscall"
	"time"
)

// ProcessCPU returns the CPU time, user and system, that this process
// has spent so far (getrusage RUSAGE_SELF), for the window controller's
// samples (transfer.ParallelOptions.CPU); 0 when the kernel does not
// tell.
func ProcessCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
