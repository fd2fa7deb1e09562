//go:build unix

package ends

import (
	"time"

	"golang.org/x/sys/unix"
)

// ProcessCPU returns the CPU time, user and system, that this process
// has spent so far (getrusage RUSAGE_SELF), for the window controller's
// samples (transfer.ParallelOptions.CPU); 0 when the kernel does not
// tell.
func ProcessCPU() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
