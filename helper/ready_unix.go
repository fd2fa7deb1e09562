//go:build unix

package helper

import (
	"io"
	"syscall"

	"golang.org/x/sys/unix"
)

// readyFunc is a Sender's readiness question for r (stripe.SetReady):
// whether a pipe or socket under r has bytes to read at once; nil where r
// has no descriptor to ask.
func readyFunc(r io.Reader) func() bool {
	sc, ok := r.(syscall.Conn)
	if !ok {
		return nil
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return func() bool {
		ready := false
		raw.Control(func(fd uintptr) {
			p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			n, err := unix.Poll(p, 0)
			ready = err == nil && n > 0 && p[0].Revents&unix.POLLIN != 0
		})
		return ready
	}
}
