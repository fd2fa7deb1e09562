package sshconn

import (
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// TCPRTT returns the kernel's smoothed round-trip time of c (tcpi_rtt from
// TCP_INFO). ok is false when c is not a TCP socket or the kernel has no
// sample yet.
func TCPRTT(c net.Conn) (rtt time.Duration, ok bool) {
	var info *unix.TCPInfo
	if err := control(c, func(fd int) error {
		var err error
		info, err = unix.GetsockoptTCPInfo(fd, unix.IPPROTO_TCP, unix.TCP_INFO)
		return err
	}); err != nil || info.Rtt == 0 {
		return 0, false
	}
	return time.Duration(info.Rtt) * time.Microsecond, true
}

// granted returns the usable size of c's buffer: Linux reports twice what
// was set, the other half being its bookkeeping overhead (socket(7)).
func granted(c net.Conn, which bufferKind) (int, bool) {
	opt := unix.SO_RCVBUF
	if which == sendBuffer {
		opt = unix.SO_SNDBUF
	}
	var n int
	if err := control(c, func(fd int) error {
		var err error
		n, err = unix.GetsockoptInt(fd, unix.SOL_SOCKET, opt)
		return err
	}); err != nil {
		return 0, false
	}
	return n / 2, true
}

// control runs f on c's file descriptor.
func control(c net.Conn, f func(fd int) error) error {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return syscall.ENOTSOCK
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := raw.Control(func(fd uintptr) { ferr = f(int(fd)) }); err != nil {
		return err
	}
	return ferr
}
