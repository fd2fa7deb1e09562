package main

import (
	"encoding/binary"

	"golang.org/x/sys/unix"
)

// Offload: with IFF_VNET_HDR and TUNSETOFFLOAD a TUN device hands the
// emulator a TCP sender's segmentation-offload (GSO) packets whole, up to
// 64 KiB with one virtio_net_hdr in front saying how to cut them, and takes
// such packets back, which the receiving stack then handles as one, as it
// would a packet a real NIC's GRO had coalesced. Without offload the
// kernel cuts every GSO packet into MTU-sized ones before the device, the
// emulator reads and writes each with a syscall, and the receiving stack
// processes each: at 1 Gbit/s that is over 80,000 packets a second each
// way, about a core of a 2-core host, which the endpoints whose speed is
// being measured then lack.
//
// The link model still sees every MTU-sized packet: a GSO packet becomes
// one slot per segment, each admitted, queued, dropped or delayed on its
// own (cut here without copying: a slot names its segment by index). On
// the way out, the consecutive segments of one GSO packet that are due
// together leave as one write: the original packet as read when all of
// it is due at once, else a GSO packet of that run with its own headers
// (see runHeader), or a plain packet for a run of one.

// vnetHdrLen is the size of struct virtio_net_hdr, the header a TUN
// device with IFF_VNET_HDR puts in front of every packet (the default
// TUNSETVNETHDRSZ).
const vnetHdrLen = 10

// Fields of struct virtio_net_hdr (include/uapi/linux/virtio_net.h).
const (
	vnetFlagNeedsCsum = 1 // checksum from csum_start, stored at csum_start+csum_offset, left to do

	vnetGSONone  = 0
	vnetGSOTCPv4 = 1
	vnetGSOTCPv6 = 4
	vnetGSOECN   = 0x80 // flag: the sender set ECE/CWR, segments keep CWR on the first only
)

// TCP flags this file touches.
const (
	tcpFIN = 0x01
	tcpPSH = 0x08
	tcpCWR = 0x80
)

// gsoPacket is how to cut one packet read with its virtio_net_hdr.
type gsoPacket struct {
	gsoType  uint8 // vnetGSOTCPv4 or vnetGSOTCPv6, the ECN flag kept
	ipLen    int   // IP header
	hdrLen   int   // IP and TCP headers, repeated in front of every segment
	mss      int   // payload bytes per segment, the last one's excepted
	payload  int   // payload bytes in all
	segments int
}

// parseGSO reads the virtio_net_hdr in front of frame and the headers
// behind it. ok is false for a frame that is not a TCP GSO packet the
// emulator can cut (no GSO, or IPv4 options, IPv6 extension headers, a
// header that does not add up): such a frame travels as one packet of
// its size, which the link accounts byte for byte all the same.
func parseGSO(frame []byte) (g gsoPacket, ok bool) {
	if len(frame) < vnetHdrLen {
		return g, false
	}
	g.gsoType = frame[1]
	mss := int(binary.LittleEndian.Uint16(frame[4:]))
	pkt := frame[vnetHdrLen:]
	switch g.gsoType &^ vnetGSOECN {
	case vnetGSOTCPv4:
		if len(pkt) < 20 || pkt[0] != 0x45 || pkt[9] != unix.IPPROTO_TCP {
			return g, false
		}
		g.ipLen = 20
	case vnetGSOTCPv6:
		if len(pkt) < 40 || pkt[0]>>4 != 6 || pkt[6] != unix.IPPROTO_TCP {
			return g, false
		}
		g.ipLen = 40
	default:
		return g, false
	}
	if len(pkt) < g.ipLen+20 {
		return g, false
	}
	g.hdrLen = g.ipLen + int(pkt[g.ipLen+12]>>4)*4
	if g.hdrLen < g.ipLen+20 || g.hdrLen > len(pkt) || mss == 0 {
		return g, false
	}
	g.mss = mss
	g.payload = len(pkt) - g.hdrLen
	g.segments = (g.payload + mss - 1) / mss
	// A slot's segment index is 16 bits wide; no TUN hands out more
	// segments than that, but a frame claiming so is sent whole.
	if g.segments < 2 || g.segments > 1<<16-1 {
		return g, false
	}
	return g, true
}

// wireLen is the size on the wire of segment i: headers and its payload.
func (g gsoPacket) wireLen(i int) int {
	return g.hdrLen + min(g.mss, g.payload-i*g.mss)
}

// runHeader writes into dst (at least vnetHdrLen+g.hdrLen bytes) the
// virtio_net_hdr and the IP and TCP headers of segments [i, j) of frame
// sent as one packet, and returns them with that run's payload, which
// stays in frame. The headers are the first segment's, as TCP
// segmentation offload would make them: the IP length (and for IPv4 the
// ID, advanced by i, and the header checksum) and the TCP sequence
// number follow the run; CWR stays on the first segment only, FIN and PSH
// on the last only. The TCP checksum is left to the kernel as the
// original's was (VIRTIO_NET_HDR_F_NEEDS_CSUM), seeded with the
// pseudo-header sum for the run's length. A run of one is a plain packet.
func (g gsoPacket) runHeader(dst, frame []byte, i, j int) (hdr, payload []byte) {
	pkt := frame[vnetHdrLen:]
	from := g.hdrLen + i*g.mss
	to := min(g.hdrLen+j*g.mss, len(pkt))
	plen := to - from
	hdr = dst[:vnetHdrLen+g.hdrLen]
	clear(hdr[:vnetHdrLen])
	hdr[0] = vnetFlagNeedsCsum
	if j-i > 1 {
		hdr[1] = g.gsoType
		binary.LittleEndian.PutUint16(hdr[2:], uint16(g.hdrLen))
		binary.LittleEndian.PutUint16(hdr[4:], uint16(g.mss))
	}
	binary.LittleEndian.PutUint16(hdr[6:], uint16(g.ipLen))
	binary.LittleEndian.PutUint16(hdr[8:], 16) // th->check
	ip := hdr[vnetHdrLen:]
	copy(ip, pkt[:g.hdrLen])
	tcpLen := g.hdrLen - g.ipLen + plen
	var sum uint32
	if g.ipLen == 20 {
		binary.BigEndian.PutUint16(ip[2:], uint16(g.hdrLen+plen))
		binary.BigEndian.PutUint16(ip[4:], binary.BigEndian.Uint16(pkt[4:])+uint16(i))
		ip[10], ip[11] = 0, 0
		binary.BigEndian.PutUint16(ip[10:], ^fold(sum16(ip[:20], 0)))
		sum = sum16(ip[12:20], 0) // source and destination
	} else {
		binary.BigEndian.PutUint16(ip[4:], uint16(tcpLen))
		sum = sum16(ip[8:40], 0)
	}
	sum += unix.IPPROTO_TCP + uint32(tcpLen)
	tcp := ip[g.ipLen:]
	binary.BigEndian.PutUint32(tcp[4:], binary.BigEndian.Uint32(tcp[4:])+uint32(i*g.mss))
	if i > 0 {
		tcp[13] &^= tcpCWR
	}
	if j < g.segments {
		tcp[13] &^= tcpFIN | tcpPSH
	}
	binary.BigEndian.PutUint16(tcp[16:], fold(sum))
	return hdr, pkt[from:to]
}

// sum16 adds b to sum as big-endian 16-bit words, the Internet checksum's
// running sum before folding.
func sum16(b []byte, sum uint32) uint32 {
	for len(b) >= 2 {
		sum += uint32(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		sum += uint32(b[0]) << 8
	}
	return sum
}

// fold folds a running sum into 16 bits, carries added back.
func fold(sum uint32) uint16 {
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return uint16(sum)
}
