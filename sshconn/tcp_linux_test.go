package sshconn

import (
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func sockopt(t *testing.T, c *net.TCPConn, opt int) int {
	t.Helper()
	raw, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	var serr error
	if err := raw.Control(func(fd uintptr) { n, serr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, opt) }); err != nil {
		t.Fatal(err)
	}
	if serr != nil {
		t.Fatal(serr)
	}
	return n
}

func sysctl(t *testing.T, name string) int {
	t.Helper()
	b, err := os.ReadFile("/proc/sys/net/core/" + name)
	if err != nil {
		t.Skipf("cannot read the kernel's buffer limit: %v", err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return n
}

func TestSetBuffersLoopback(t *testing.T) {
	const rcv, snd = 96 << 10, 80 << 10 // below any rmem_max/wmem_max default
	t.Run("both", func(t *testing.T) {
		c, _ := tcpPair(t)
		if err := SetBuffers(c, rcv, snd); err != nil {
			t.Fatal(err)
		}
		// Linux reports twice what was set (socket(7)).
		if got := sockopt(t, c, unix.SO_RCVBUF); got != 2*rcv {
			t.Errorf("SO_RCVBUF = %d, want %d", got, 2*rcv)
		}
		if got := sockopt(t, c, unix.SO_SNDBUF); got != 2*snd {
			t.Errorf("SO_SNDBUF = %d, want %d", got, 2*snd)
		}
	})
	t.Run("only what is set", func(t *testing.T) {
		c, _ := tcpPair(t)
		rcv0, snd0 := sockopt(t, c, unix.SO_RCVBUF), sockopt(t, c, unix.SO_SNDBUF)
		if err := SetBuffers(c, 0, 0); err != nil {
			t.Fatal(err)
		}
		if got := sockopt(t, c, unix.SO_RCVBUF); got != rcv0 {
			t.Errorf("SO_RCVBUF %d changed to %d with no size set", rcv0, got)
		}
		if err := SetBuffers(c, 0, snd); err != nil {
			t.Fatal(err)
		}
		if got := sockopt(t, c, unix.SO_RCVBUF); got != rcv0 {
			t.Errorf("SO_RCVBUF %d changed to %d when only the send buffer was set", rcv0, got)
		}
		if got := sockopt(t, c, unix.SO_SNDBUF); got != 2*snd || got == snd0 {
			t.Errorf("SO_SNDBUF = %d (was %d), want %d", got, snd0, 2*snd)
		}
	})
	t.Run("capped", func(t *testing.T) {
		limit := sysctl(t, "rmem_max")
		if limit > 1<<29 {
			t.Skipf("rmem_max %d: no size above it fits an int32", limit)
		}
		c, _ := tcpPair(t)
		err := SetBuffers(c, 2*limit, 0)
		if !errors.Is(err, ErrCapped) || !strings.Contains(err.Error(), "rmem_max") ||
			!strings.Contains(err.Error(), c.RemoteAddr().String()) {
			t.Errorf("asking for twice rmem_max: %v, want ErrCapped naming the peer and rmem_max", err)
		}
		if got := sockopt(t, c, unix.SO_RCVBUF); got != 2*limit {
			t.Errorf("SO_RCVBUF = %d, want the capped %d in force", got, 2*limit)
		}
	})
	// An ordinary user's --tcp-rcvbuf and --tcp-sndbuf above both limits
	// (SO_RCVBUF and SO_SNDBUF cap root's too): both capped, both in
	// force, both said.
	t.Run("both capped", func(t *testing.T) {
		rlimit, wlimit := sysctl(t, "rmem_max"), sysctl(t, "wmem_max")
		if max(rlimit, wlimit) > 1<<29 {
			t.Skipf("rmem_max %d, wmem_max %d: no size above them fits an int32", rlimit, wlimit)
		}
		c, _ := tcpPair(t)
		err := SetBuffers(c, 2*rlimit, 2*wlimit)
		if !errors.Is(err, ErrCapped) || !strings.Contains(err.Error(), "rmem_max") || !strings.Contains(err.Error(), "wmem_max") {
			t.Errorf("asking for twice rmem_max and wmem_max: %v, want ErrCapped naming both limits", err)
		}
		if got := sockopt(t, c, unix.SO_RCVBUF); got != 2*rlimit {
			t.Errorf("SO_RCVBUF = %d, want the capped %d in force", got, 2*rlimit)
		}
		if got := sockopt(t, c, unix.SO_SNDBUF); got != 2*wlimit {
			t.Errorf("SO_SNDBUF = %d, want the capped %d in force: a capped receive buffer left the send buffer unset", got, 2*wlimit)
		}
	})
}

func TestTCPRTTLoopback(t *testing.T) {
	c, s := tcpPair(t)
	// A few round trips give the kernel RTT samples on both ends.
	buf := make([]byte, 4)
	for range 5 {
		if _, err := c.Write([]byte("ping")); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(s, buf); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Write(buf); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			t.Fatal(err)
		}
	}
	for name, conn := range map[string]net.Conn{"client": c, "server": s} {
		rtt, ok := TCPRTT(conn)
		if !ok || rtt <= 0 || rtt > 50*time.Millisecond {
			t.Errorf("%s: TCPRTT = %v, %v; want a small loopback RTT", name, rtt, ok)
		}
	}
}

func TestTCPRTTNotTCP(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if rtt, ok := TCPRTT(a); ok {
		t.Errorf("TCPRTT on a pipe = %v, true; want not ok", rtt)
	}

	dir := t.TempDir()
	ln, err := net.Listen("unix", dir+"/s")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.Close()
		}
	}()
	u, err := net.Dial("unix", dir+"/s")
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	if rtt, ok := TCPRTT(u); ok {
		t.Errorf("TCPRTT on a unix socket = %v, true; want not ok", rtt)
	}
}

// TestConnBytes: the estimate follows this namespace's tcp_rmem and
// tcp_wmem maxima, and buffers set by flag replace them.
func TestConnBytes(t *testing.T) {
	rcv, snd := autotuneLimits()
	if rcv <= 0 || snd <= 0 {
		t.Fatalf("autotuneLimits = %d, %d; want this host's tcp_rmem and tcp_wmem maxima", rcv, snd)
	}
	want := int64(min(sendPayload*float64(snd), receivePayload*float64(rcv)))
	if got := ConnBytes(0, 0); got != want {
		t.Errorf("ConnBytes(0, 0) = %d, want %d from tcp_rmem max %d and tcp_wmem max %d", got, want, rcv, snd)
	}
	mib := float64(1 << 20)
	if got, want := ConnBytes(64<<20, 1<<20), int64(sendPayload*mib); got != want {
		t.Errorf("ConnBytes(64 MiB, 1 MiB) = %d, want %d: the set send buffer binds", got, want)
	}
	if got, want := ConnBytes(1<<20, 64<<20), int64(receivePayload*mib); got != want {
		t.Errorf("ConnBytes(1 MiB, 64 MiB) = %d, want %d: the set receive buffer binds", got, want)
	}
}

// TestSetCongestion: --cc's algorithm is in force on the socket (reno is
// built into every Linux kernel and allowed to every user), and a name
// the kernel lacks fails with what to look at.
func TestSetCongestion(t *testing.T) {
	c, _ := tcpPair(t)
	if err := SetCongestion(c, "reno"); err != nil {
		t.Fatal(err)
	}
	if got := Congestion(c); got != "reno" {
		t.Errorf("congestion control after setting reno: %q", got)
	}
	err := SetCongestion(c, "nosuchcc")
	if err == nil || !errors.Is(err, unix.ENOENT) || !strings.Contains(err.Error(), "tcp_available_congestion_control") {
		t.Errorf("setting an algorithm the kernel lacks: %v, want ENOENT with the sysctl to look at", err)
	}
	if got := Congestion(c); got != "reno" {
		t.Errorf("a refused algorithm changed the socket's: %q", got)
	}
}

func TestValidCongestionName(t *testing.T) {
	for name, want := range map[string]bool{
		"bbr": true, "cubic": true, "htcp": true, "dctcp": true, "bbr2": true,
		"": false, "BBR": false, "a b": false, "../x": false, "sixteen_letters_": false, "x\x00": false,
	} {
		if got := ValidCongestionName(name); got != want {
			t.Errorf("ValidCongestionName(%q) = %v, want %v", name, got, want)
		}
	}
}

// TestQuickAckSocket checks that quickAck acts on a TCP socket (the
// option is set without error) and leaves a connection without a socket
// alone.
func TestQuickAckSocket(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	q := quickAck(c)
	if q == nil {
		t.Fatal("no quick ACK for a TCP connection")
	}
	q()
	if err := control(c, func(fd int) error {
		return unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_QUICKACK, 1)
	}); err != nil {
		t.Fatalf("TCP_QUICKACK: %v", err)
	}
	p, _ := net.Pipe()
	defer p.Close()
	if quickAck(p) != nil {
		t.Fatal("quick ACK offered for a pipe")
	}
}

// TestCongestionOrdinaryUser: an algorithm the kernel has but does not
// allow every user (bbr on a stock kernel) is refused to a process without
// CAP_NET_ADMIN with EPERM and the sysctl to look at, CanSetCongestion
// says so beforehand, and reno, always allowed, is still set.
func TestCongestionOrdinaryUser(t *testing.T) {
	cc := forbiddenCongestion()
	if cc == "" {
		t.Skip("every algorithm this kernel has is allowed to every user")
	}
	c, _ := tcpPair(t)
	err := withoutNetAdmin(func() {
		if CanSetCongestion(cc) {
			t.Errorf("CanSetCongestion(%q) without CAP_NET_ADMIN: true, but it is not in tcp_allowed_congestion_control", cc)
		}
		if !CanSetCongestion("reno") {
			t.Error("CanSetCongestion(reno) without CAP_NET_ADMIN: false")
		}
		err := SetCongestion(c, cc)
		if !errors.Is(err, unix.EPERM) || !strings.Contains(err.Error(), "tcp_allowed_congestion_control") {
			t.Errorf("setting %s without CAP_NET_ADMIN: %v, want EPERM naming tcp_allowed_congestion_control", cc, err)
		}
		if err := SetCongestion(c, "reno"); err != nil {
			t.Errorf("setting reno without CAP_NET_ADMIN: %v", err)
		}
	})
	if err != nil {
		t.Fatalf("dropping CAP_NET_ADMIN: %v", err)
	}
	if CanSetCongestion("nosuchcc") {
		t.Error("CanSetCongestion(nosuchcc): true for an algorithm the kernel lacks")
	}
	if os.Geteuid() == 0 && !CanSetCongestion(cc) {
		t.Errorf("CanSetCongestion(%q) as root: false, but root may set any algorithm the kernel has", cc)
	}
}

// withoutNetAdmin calls f as an ordinary user meets the network stack: on
// an OS thread of its own whose effective capabilities lack CAP_NET_ADMIN
// (capabilities are per thread on Linux), so that the kernel applies
// tcp_allowed_congestion_control even when the tests run as root. The
// thread ends with f. Only f's own syscalls see it, such as a socket
// option set through a conn's RawConn.Control. An error is from dropping
// the capability.
func withoutNetAdmin(f func()) error {
	errc := make(chan error, 1)
	go func() {
		// Never unlocked: the goroutine's end takes the thread with it.
		runtime.LockOSThread()
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var data [2]unix.CapUserData
		if err := unix.Capget(&hdr, &data[0]); err != nil {
			errc <- err
			return
		}
		data[0].Effective &^= 1 << unix.CAP_NET_ADMIN
		if err := unix.Capset(&hdr, &data[0]); err != nil {
			errc <- err
			return
		}
		f()
		errc <- nil
	}()
	return <-errc
}

// forbiddenCongestion returns an algorithm this kernel has
// (tcp_available_congestion_control) that an ordinary user may not set
// (not in tcp_allowed_congestion_control), "" when there is none. The
// default (tcp_congestion_control) is never one: a new socket has it
// already, and the kernel lets anyone ask for what a socket has. (A
// default left out of the allowed list is what the benchmarks' --tcp
// debian does to this host for as long as they run.)
func forbiddenCongestion() string {
	read := func(name string) []string {
		b, _ := os.ReadFile("/proc/sys/net/ipv4/" + name)
		return strings.Fields(string(b))
	}
	allowed := append(read("tcp_allowed_congestion_control"), read("tcp_congestion_control")...)
	for _, cc := range read("tcp_available_congestion_control") {
		if !slices.Contains(allowed, cc) {
			return cc
		}
	}
	return ""
}
