package sshconn

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"unsafe"

	"golang.org/x/sys/unix"
)

// SocketTCPInfo is the TCP state of the socket this host holds from
// local to remote, whichever process holds it: the kernel's sock_diag
// interface (what ss(8) reads) answers any user about any socket. The
// helper finds so the SSH connection it runs over, which sshd holds.
// ok is false where there is no such socket, or the kernel will not
// tell.
func SocketTCPInfo(local, remote netip.AddrPort) (TCPStats, bool) {
	local = netip.AddrPortFrom(local.Addr().Unmap(), local.Port())
	remote = netip.AddrPortFrom(remote.Addr().Unmap(), remote.Port())
	if local.Addr().Is4() != remote.Addr().Is4() {
		return TCPStats{}, false
	}
	if st, ok := socketTCPInfo(local, remote); ok {
		return st, true
	}
	if !local.Addr().Is4() {
		return TCPStats{}, false
	}
	// An IPv4 client of a server listening on IPv6 has a socket of the
	// IPv6 family, its addresses mapped.
	mapped := func(a netip.AddrPort) netip.AddrPort {
		return netip.AddrPortFrom(netip.AddrFrom16(a.Addr().As16()), a.Port())
	}
	return socketTCPInfo(mapped(local), mapped(remote))
}

// The kernel's structures (linux/inet_diag.h, linux/netlink.h).
const (
	nlmsgHdrLen    = 16
	diagReqLen     = 56 // inet_diag_req_v2
	diagMsgLen     = 72 // inet_diag_msg
	inetDiagInfo   = 2  // INET_DIAG_INFO: the attribute that is a tcp_info
	inetDiagNoCook = 0xffffffff
)

func socketTCPInfo(local, remote netip.AddrPort) (TCPStats, bool) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return TCPStats{}, false
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return TCPStats{}, false
	}
	family := byte(unix.AF_INET)
	if !local.Addr().Is4() {
		family = unix.AF_INET6
	}
	req := make([]byte, nlmsgHdrLen+diagReqLen)
	ne := binary.NativeEndian
	ne.PutUint32(req[0:], uint32(len(req)))
	ne.PutUint16(req[4:], unix.SOCK_DIAG_BY_FAMILY)
	ne.PutUint16(req[6:], unix.NLM_F_REQUEST)
	ne.PutUint32(req[8:], 1) // sequence
	r := req[nlmsgHdrLen:]
	r[0], r[1], r[2] = family, unix.IPPROTO_TCP, 1<<(inetDiagInfo-1)
	ne.PutUint32(r[4:], 0xffffffff) // any state
	id := r[8:]
	binary.BigEndian.PutUint16(id[0:], local.Port())
	binary.BigEndian.PutUint16(id[2:], remote.Port())
	copy(id[4:20], local.Addr().AsSlice())
	copy(id[20:36], remote.Addr().AsSlice())
	ne.PutUint32(id[40:], inetDiagNoCook)
	ne.PutUint32(id[44:], inetDiagNoCook)
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return TCPStats{}, false
	}
	buf := make([]byte, 8192)
	n, _, err := unix.Recvfrom(fd, buf, 0)
	if err != nil || n < nlmsgHdrLen {
		return TCPStats{}, false
	}
	msg := buf[:n]
	msgLen := int(ne.Uint32(msg[0:]))
	if msgLen > len(msg) || msgLen < nlmsgHdrLen+diagMsgLen || ne.Uint16(msg[4:]) != unix.SOCK_DIAG_BY_FAMILY {
		return TCPStats{}, false // NLMSG_ERROR: no such socket
	}
	// The lookup falls back on a listening socket of the local port:
	// only the socket of both ends is the one asked for.
	got := msg[nlmsgHdrLen+4:]
	if binary.BigEndian.Uint16(got[0:]) != local.Port() || binary.BigEndian.Uint16(got[2:]) != remote.Port() ||
		!bytes.Equal(got[20:20+len(remote.Addr().AsSlice())], remote.Addr().AsSlice()) {
		return TCPStats{}, false
	}
	// The attributes after the message, each a length, a type and its
	// payload, aligned to 4 bytes.
	for a := msg[nlmsgHdrLen+diagMsgLen : msgLen]; len(a) >= 4; {
		l, t := int(ne.Uint16(a[0:])), ne.Uint16(a[2:])
		if l < 4 || l > len(a) {
			break
		}
		if t == inetDiagInfo {
			var info unix.TCPInfo
			// A kernel older than these headers sends less; the rest
			// stays 0, as with getsockopt.
			copy(unsafe.Slice((*byte)(unsafe.Pointer(&info)), unsafe.Sizeof(info)), a[4:l])
			return statsOf(&info), true
		}
		a = a[min((l+3)&^3, len(a)):]
	}
	return TCPStats{}, false
}
