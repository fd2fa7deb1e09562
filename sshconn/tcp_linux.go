package sshconn

import (
	"net"
	"os"
	"strconv"
	"strings"
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

// TCPInfo reads the kernel's TCP_INFO and buffer sizes of c. ok is false
// when c is not a TCP socket.
func TCPInfo(c net.Conn) (TCPStats, bool) {
	var info *unix.TCPInfo
	if err := control(c, func(fd int) error {
		var err error
		info, err = unix.GetsockoptTCPInfo(fd, unix.IPPROTO_TCP, unix.TCP_INFO)
		return err
	}); err != nil {
		return TCPStats{}, false
	}
	st := statsOf(info)
	st.SndBuf, _ = granted(c, sendBuffer)
	st.RcvBuf, _ = granted(c, receiveBuffer)
	return st, true
}

// statsOf is the TCPStats of a kernel's TCP_INFO.
func statsOf(info *unix.TCPInfo) TCPStats {
	us := func(v uint32) time.Duration { return time.Duration(v) * time.Microsecond }
	return TCPStats{
		SRTT:          us(info.Rtt),
		MinRTT:        us(info.Min_rtt),
		RTTVar:        us(info.Rttvar),
		Cwnd:          int(info.Snd_cwnd),
		Ssthresh:      int(info.Snd_ssthresh),
		Unacked:       int(info.Unacked),
		BytesSent:     int64(info.Bytes_sent),
		MSS:           int(info.Snd_mss),
		DeliveryRate:  float64(info.Delivery_rate),
		Retrans:       int64(info.Total_retrans),
		DSACKDups:     int64(info.Dsack_dups),
		Lost:          int(info.Lost),
		BytesAcked:    int64(info.Bytes_acked),
		BytesReceived: int64(info.Bytes_received),
		OutOfOrder:    int64(info.Rcv_ooopack),
		// The kernel counts these three in microseconds.
		BusyTime:      time.Duration(info.Busy_time) * time.Microsecond,
		RwndLimited:   time.Duration(info.Rwnd_limited) * time.Microsecond,
		SndbufLimited: time.Duration(info.Sndbuf_limited) * time.Microsecond,
		NotSent:       int(info.Notsent_bytes),
		// Kernels before 5.4 return a shorter struct, leaving it 0.
		PeerWindow: int(info.Snd_wnd),
		RcvWindow:  int(info.Rcv_wnd),
	}
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
// quickAck returns a function that has c acknowledge at once the data
// it receives next (TCP_QUICKACK; an acknowledgement already delayed goes
// out now), or nil when c is not a socket.
func quickAck(c net.Conn) func() {
	if _, ok := c.(syscall.Conn); !ok {
		return nil
	}
	return func() {
		_ = control(c, func(fd int) error {
			return unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_QUICKACK, 1)
		})
	}
}

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

// autotuneLimits reads the most the kernel's autotuning grows a TCP
// socket's receive and send buffers to (the third field of
// net.ipv4.tcp_rmem and tcp_wmem, of this network namespace); 0 for one
// it cannot read.
func autotuneLimits() (rcv, snd int) {
	return sysctlMax("/proc/sys/net/ipv4/tcp_rmem"), sysctlMax("/proc/sys/net/ipv4/tcp_wmem")
}

// sysctlMax reads the last of the numbers in the file at path, 0 when
// there is none.
func sysctlMax(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	n, _ := strconv.Atoi(f[len(f)-1])
	return n
}

func setCongestion(c net.Conn, name string) error {
	return control(c, func(fd int) error {
		return unix.SetsockoptString(fd, unix.IPPROTO_TCP, unix.TCP_CONGESTION, name)
	})
}

// CanSetCongestion reports whether this process may give its TCP
// connections the congestion control name, asked of a socket of its own:
// the kernel must have the algorithm, and it must be in
// net.ipv4.tcp_allowed_congestion_control unless the process has
// CAP_NET_ADMIN in its network namespace (root may set any).
func CanSetCongestion(name string) bool {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		fd, err = unix.Socket(unix.AF_INET6, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return false
		}
	}
	defer unix.Close(fd)
	return unix.SetsockoptString(fd, unix.IPPROTO_TCP, unix.TCP_CONGESTION, name) == nil
}

func congestion(c net.Conn) (string, error) {
	var name string
	err := control(c, func(fd int) error {
		var err error
		name, err = unix.GetsockoptString(fd, unix.IPPROTO_TCP, unix.TCP_CONGESTION)
		return err
	})
	return name, err
}
