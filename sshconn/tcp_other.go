//go:build !linux

package sshconn

import (
	"errors"
	"net"
	"net/netip"
	"time"
)

// TCPRTT returns the kernel's smoothed round-trip time of c. Only Linux
// (TCP_INFO) is supported; elsewhere ok is false and the pipeline times
// request round trips instead.
func TCPRTT(c net.Conn) (rtt time.Duration, ok bool) { return 0, false }

// TCPInfo reads nothing: only Linux's TCP_INFO is read.
func TCPInfo(c net.Conn) (TCPStats, bool) { return TCPStats{}, false }

// SocketTCPInfo finds nothing: only Linux's sock_diag is read.
func SocketTCPInfo(local, remote netip.AddrPort) (TCPStats, bool) { return TCPStats{}, false }

// granted reports nothing: BSD and macOS fail a setsockopt above their
// limit (kern.ipc.maxsockbuf), so SetBuffers reports that as an error.
func granted(c net.Conn, which bufferKind) (int, bool) { return 0, false }

// autotuneLimits knows nothing: only Linux's sysctls are read.
func autotuneLimits() (rcv, snd int) { return 0, 0 }

// setCongestion is unsupported: only Linux's TCP_CONGESTION is set.
func setCongestion(c net.Conn, name string) error { return errors.ErrUnsupported }

// CanSetCongestion is false: only Linux's TCP_CONGESTION is set.
func CanSetCongestion(name string) bool { return false }

func congestion(c net.Conn) (string, error) { return "", errors.ErrUnsupported }

// quickAck is Linux's TCP_QUICKACK; elsewhere ACKs keep their timing.
func quickAck(c net.Conn) func() { return nil }
