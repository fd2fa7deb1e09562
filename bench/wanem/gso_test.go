package main

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// gsoFrame builds what a TUN device with offload hands over for a TCP
// sender's GSO packet: a virtio_net_hdr, the IP and TCP headers (TCP with
// a 12-byte timestamp option, so 32 bytes) and payload bytes of mss-sized
// segments, the last one shorter; its TCP checksum holds the pseudo-header
// sum, as the kernel leaves it for the device to finish.
func gsoFrame(v6 bool, mss, payload int, flags byte) []byte {
	ipLen := 20
	gso := byte(vnetGSOTCPv4)
	if v6 {
		ipLen, gso = 40, vnetGSOTCPv6
	}
	hdrLen := ipLen + 32
	f := make([]byte, vnetHdrLen+hdrLen+payload)
	f[0], f[1] = vnetFlagNeedsCsum, gso
	binary.LittleEndian.PutUint16(f[2:], uint16(hdrLen))
	binary.LittleEndian.PutUint16(f[4:], uint16(mss))
	binary.LittleEndian.PutUint16(f[6:], uint16(ipLen))
	binary.LittleEndian.PutUint16(f[8:], 16)
	ip := f[vnetHdrLen:]
	if v6 {
		ip[0] = 0x60
		binary.BigEndian.PutUint16(ip[4:], uint16(32+payload))
		ip[6], ip[7] = 6, 64
		ip[8], ip[23] = 0xfd, 1 // fd00::1 to fd00::2
		ip[24], ip[39] = 0xfd, 2
	} else {
		ip[0] = 0x45
		binary.BigEndian.PutUint16(ip[2:], uint16(hdrLen+payload))
		binary.BigEndian.PutUint16(ip[4:], 0x1234)
		ip[6], ip[8], ip[9] = 0x40, 64, 6
		copy(ip[12:], []byte{198, 18, 0, 1, 198, 18, 0, 2})
		binary.BigEndian.PutUint16(ip[10:], ^fold(sum16(ip[:20], 0)))
	}
	tcp := ip[ipLen:]
	binary.BigEndian.PutUint16(tcp[0:], 40000)
	binary.BigEndian.PutUint16(tcp[2:], 22)
	binary.BigEndian.PutUint32(tcp[4:], 0xfffff000) // wraps within the packet
	binary.BigEndian.PutUint32(tcp[8:], 77)
	tcp[12], tcp[13] = 8<<4, flags
	binary.BigEndian.PutUint16(tcp[14:], 512)
	tcp[20], tcp[21], tcp[22] = 1, 1, 8 // NOP NOP TS
	for i := range payload {
		tcp[32+i] = byte(i*7 + i>>8)
	}
	return f
}

// checkSegment checks one packet (headers in hdr, payload apart) as the
// receiving stack would after finishing its checksum: the IP header's
// checksum and length, the TCP checksum over pseudo-header and segment,
// and returns the TCP sequence number and flags.
func checkSegment(t *testing.T, v6 bool, hdr, payload []byte) (seq uint32, flags byte) {
	t.Helper()
	ip := hdr[vnetHdrLen:]
	ipLen := 20
	if v6 {
		ipLen = 40
		if got := int(binary.BigEndian.Uint16(ip[4:])); got != len(ip)-40+len(payload) {
			t.Errorf("IPv6 payload length %d, want %d", got, len(ip)-40+len(payload))
		}
	} else {
		if got := int(binary.BigEndian.Uint16(ip[2:])); got != len(ip)+len(payload) {
			t.Errorf("IPv4 total length %d, want %d", got, len(ip)+len(payload))
		}
		if fold(sum16(ip[:20], 0)) != 0xffff {
			t.Errorf("IPv4 header checksum does not verify")
		}
	}
	if hdr[0] != vnetFlagNeedsCsum || binary.LittleEndian.Uint16(hdr[6:]) != uint16(ipLen) || binary.LittleEndian.Uint16(hdr[8:]) != 16 {
		t.Errorf("virtio_net_hdr %x: want the checksum left to the kernel from the TCP header", hdr[:vnetHdrLen])
	}
	// Finish the checksum as the kernel does for VIRTIO_NET_HDR_F_NEEDS_CSUM,
	// then verify it as a receiver does.
	seg := append(append([]byte(nil), ip[ipLen:]...), payload...)
	binary.BigEndian.PutUint16(seg[16:], ^fold(sum16(seg, 0)))
	var pseudo uint32
	if v6 {
		pseudo = sum16(ip[8:40], 0)
	} else {
		pseudo = sum16(ip[12:20], 0)
	}
	pseudo += 6 + uint32(len(seg))
	if fold(sum16(seg, pseudo)) != 0xffff {
		t.Errorf("TCP checksum does not verify")
	}
	return binary.BigEndian.Uint32(seg[4:]), seg[13]
}

func TestRunHeader(t *testing.T) {
	const mss = 1448
	for _, v6 := range []bool{false, true} {
		frame := gsoFrame(v6, mss, 3*mss+500, 0x10|tcpPSH|tcpCWR|tcpFIN)
		g, ok := parseGSO(frame)
		if !ok || g.segments != 4 || g.mss != mss || g.payload != 3*mss+500 {
			t.Fatalf("v6=%v: parseGSO = %+v, %v; want 4 segments of %d", v6, g, ok, mss)
		}
		whole := frame[vnetHdrLen+g.hdrLen:]
		for i := range 4 {
			for j := i + 1; j <= 4; j++ {
				var dst [vnetHdrLen + 120]byte
				hdr, payload := g.runHeader(dst[:], frame, i, j)
				if want := whole[i*mss : min(j*mss, len(whole))]; !bytes.Equal(payload, want) {
					t.Errorf("v6=%v run [%d,%d): payload is not segments %d to %d", v6, i, j, i, j-1)
				}
				seq, flags := checkSegment(t, v6, hdr, payload)
				if want := uint32(0xfffff000 + i*mss); seq != want {
					t.Errorf("v6=%v run [%d,%d): seq %#x, want %#x", v6, i, j, seq, want)
				}
				want := byte(0x10)
				if i == 0 {
					want |= tcpCWR
				}
				if j == 4 {
					want |= tcpPSH | tcpFIN
				}
				if flags != want {
					t.Errorf("v6=%v run [%d,%d): TCP flags %#x, want %#x", v6, i, j, flags, want)
				}
				gsoType, gsoSize := hdr[1], binary.LittleEndian.Uint16(hdr[4:])
				if j-i > 1 && (gsoType != frame[1] || gsoSize != mss) || j-i == 1 && (gsoType != vnetGSONone || gsoSize != 0) {
					t.Errorf("v6=%v run [%d,%d): gso type %d size %d", v6, i, j, gsoType, gsoSize)
				}
				if !v6 {
					if id := binary.BigEndian.Uint16(hdr[vnetHdrLen+4:]); id != 0x1234+uint16(i) {
						t.Errorf("run [%d,%d): IP ID %#x, want %#x", i, j, id, 0x1234+i)
					}
				}
			}
		}
		if got, want := g.wireLen(3), g.hdrLen+500; got != want {
			t.Errorf("v6=%v: wireLen(3) = %d, want %d", v6, got, want)
		}
	}
}

func TestParseGSORefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(f []byte)
	}{
		{"not GSO", func(f []byte) { f[1] = vnetGSONone }},
		{"UDP GSO", func(f []byte) { f[1] = 5 }},
		{"IPv4 options", func(f []byte) { f[vnetHdrLen] = 0x46 }},
		{"not TCP", func(f []byte) { f[vnetHdrLen+9] = 17 }},
		{"TCP header too short", func(f []byte) { f[vnetHdrLen+20+12] = 4 << 4 }},
		{"segment size 0", func(f []byte) { f[4], f[5] = 0, 0 }},
		{"one segment", func(f []byte) { f[4], f[5] = 0xff, 0xff }},
	} {
		f := gsoFrame(false, 1448, 3000, 0x10)
		tc.edit(f)
		if g, ok := parseGSO(f); ok {
			t.Errorf("%s: parseGSO = %+v, true; want it sent whole", tc.name, g)
		}
	}
	if _, ok := parseGSO(make([]byte, 5)); ok {
		t.Error("parseGSO of 5 bytes: ok")
	}
}

// TestPipeGSO runs GSO packets through a pipe with offload: all of one
// packet due at once leaves as read; where the queue drops its tail the
// rest leaves as one shorter GSO packet; segments due apart leave one by
// one; the counters count segments, as packets on the wire.
func TestPipeGSO(t *testing.T) {
	vnet := func(p *pipe) { p.vnet = true }
	const mss = 1000
	frame := gsoFrame(false, mss, 4*mss, 0x10|tcpPSH)
	g, _ := parseGSO(frame)

	t.Run("whole", func(t *testing.T) {
		tp := startPipe(t, newLink(0, time.Millisecond, 0, 0, 1), 0, 1<<20, vnet)
		if _, err := unix.Write(tp.in, frame); err != nil {
			t.Fatal(err)
		}
		if got := tp.recv(t, 2*time.Second); !bytes.Equal(got, frame) {
			t.Fatalf("delivered %d bytes, not the packet as written (%d bytes)", len(got), len(frame))
		}
		tp.halt(t)
		if c := &tp.p.stats; c.rxPackets.Load() != 4 || c.txPackets.Load() != 4 || c.txBytes.Load() != uint64(4*(g.hdrLen+mss)) {
			t.Errorf("counters: %s; want 4 packets of %d bytes each way", tp.p.report(), g.hdrLen+mss)
		}
	})

	t.Run("queue drops the tail", func(t *testing.T) {
		// Room for two segments at 800 kbit/s: the second is serialised
		// 10.5 ms after the first, within the 50 ms tick, so both leave
		// together once it is.
		tp := startPipe(t, newLink(8e5, 0, int64(2*g.wireLen(0)), 0, 1), 50*time.Millisecond, 1<<20, vnet)
		if _, err := unix.Write(tp.in, frame); err != nil {
			t.Fatal(err)
		}
		got := tp.recv(t, 5*time.Second)
		hdrEnd := vnetHdrLen + g.hdrLen
		seq, _ := checkSegment(t, false, got[:hdrEnd], got[hdrEnd:])
		if got[1] != vnetGSOTCPv4 || len(got)-hdrEnd != 2*mss || seq != 0xfffff000 {
			t.Errorf("delivered gso type %d, %d payload bytes from seq %#x; want segments 0 and 1 as one GSO packet", got[1], len(got)-hdrEnd, seq)
		}
		tp.halt(t)
		if c := &tp.p.stats; c.queueDrops.Load() != 2 || c.txPackets.Load() != 2 {
			t.Errorf("counters: %s; want drop_queue=2 tx_pkts=2", tp.p.report())
		}
	})

	t.Run("a run waits for its rest", func(t *testing.T) {
		// Two segments, due 45.5 and 56 ms after they arrive: the pipe
		// wakes once per 50 ms tick, finds the first due and the second
		// due within the tick, and sends both as one at the next wake. (A
		// pipe woken more than 6 ms late finds both due: one write too.)
		two := gsoFrame(false, mss, 2*mss, 0x10)
		tp := startPipe(t, newLink(8e5, 35*time.Millisecond, 1<<20, 0, 1), 50*time.Millisecond, 1<<20, vnet)
		// A small packet through first: once it is out the pipe is
		// idle, and the pair's arrival wakes it, which starts the tick.
		small := gsoFrame(false, mss, 100, 0x10)
		small[1] = vnetGSONone
		if _, err := unix.Write(tp.in, small); err != nil {
			t.Fatal(err)
		}
		tp.recv(t, 5*time.Second)
		if _, err := unix.Write(tp.in, two); err != nil {
			t.Fatal(err)
		}
		if got := tp.recv(t, 5*time.Second); !bytes.Equal(got, two) {
			t.Fatalf("delivered %d bytes, not both segments as written (%d bytes)", len(got), len(two))
		}
	})

	t.Run("segments due apart", func(t *testing.T) {
		// 80 kbit/s without a tick: a segment every ~105 ms, each sent
		// when it is due. A pipe woken late finds several due, which
		// leave as one run: what is checked is that the runs follow each
		// other, each with its own headers, and make up the packet.
		tp := startPipe(t, newLink(8e4, 0, 1<<20, 0, 1), 0, 1<<20, vnet)
		if _, err := unix.Write(tp.in, frame); err != nil {
			t.Fatal(err)
		}
		var payload []byte
		writes := 0
		for len(payload) < 4*mss {
			got := tp.recv(t, 5*time.Second)
			writes++
			hdrEnd := vnetHdrLen + g.hdrLen
			seq, flags := checkSegment(t, false, got[:hdrEnd], got[hdrEnd:])
			if want := uint32(0xfffff000 + len(payload)); seq != want {
				t.Fatalf("write %d: seq %#x, want %#x", writes, seq, want)
			}
			payload = append(payload, got[hdrEnd:]...)
			if psh := flags&tcpPSH != 0; psh != (len(payload) == 4*mss) {
				t.Errorf("write %d: PSH %v", writes, psh)
			}
		}
		if !bytes.Equal(payload, frame[vnetHdrLen+g.hdrLen:]) {
			t.Error("the segments' payloads do not make up the packet's")
		}
		// The four are due over 420 ms: all in one write would mean the
		// pipe held the first for 300 ms.
		if writes < 2 {
			t.Errorf("%d writes; want the segments sent as they fall due", writes)
		}
	})
}

// TestReleaseKeepsAPassedSegment: a packet's last segment passed by the
// next packet's first lies behind that slot once a run of the packet's
// other segments has left; the arena below it stays reserved.
func TestReleaseKeepsAPassedSegment(t *testing.T) {
	a, b := packetPair(t), packetPair(t)
	if err := unix.SetNonblock(a[1], true); err != nil {
		t.Fatal(err)
	}
	p := newPipe("test", a[1], b[0], newLink(0, 0, 0, 0, 1), func() int64 { return 0 }, 0, 1<<20)
	p.vnet = true
	for range 2 {
		if _, err := unix.Write(a[0], gsoFrame(false, 1000, 3000, 0x10)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.receive(make([]byte, p.frameMax())); err != nil || p.tail != 6 {
		t.Fatalf("received %d slots (%v), want 2 packets of 3 segments", p.tail, err)
	}
	// As admit lets the second packet's first segment past the first
	// packet's last: A0 A1 B0 A2 B1 B2.
	p.slots[2], p.slots[3] = p.slots[3], p.slots[2]
	p.slots[3].passed = true
	p.release(2) // the run A0 A1
	if held := p.slots[3].start; p.freed > held {
		t.Errorf("after A0 and A1 the arena is free up to %d; want at most %d, where A2 is still held", p.freed, held)
	}
	p.release(1) // B0
	if held := p.slots[3].start; p.freed > held {
		t.Errorf("after B0 the arena is free up to %d; want at most %d", p.freed, held)
	}
}
