package main

import (
	"errors"
	"fmt"
	"math/bits"
	"runtime"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// maxPacket is the largest datagram a TUN read can return (an IPv4 or IPv6
// packet without jumbo options). Reads reserve this much so that a device
// whose MTU someone raised inside a namespace still yields whole packets.
const maxPacket = 65535

// Batch limits per turn of the loop, so that neither a flood of arrivals
// nor a burst of departures delays the other side's work by more than a
// few hundred microseconds.
const (
	readBatch  = 64
	writeBatch = 64
)

// slot describes one packet held by a pipe.
type slot struct {
	start uint64 // logical offset in the arena; the byte index is start % len(arena)
	n     int32
	// passed: a later packet was let past this one (--reorder), which
	// may not be passed again, so that a held packet's bytes lie below
	// the ones of every packet after it but the one that passed it.
	passed bool
	// seg and segs: segment seg of segs of a GSO packet (see gso.go),
	// which start and n cover whole; segs is 0 for a packet sent as read.
	seg, segs uint16
	at        int64 // ns on the pipe's clock when the packet leaves the link
}

// counters are a pipe's statistics; each has a single writer and is atomic
// only so that a status dump can read it while packets flow.
type counters struct {
	rxPackets, rxBytes atomic.Uint64
	txPackets, txBytes atomic.Uint64
	queueDrops         atomic.Uint64
	lossDrops          atomic.Uint64
	reordered          atomic.Uint64
	overflowDrops      atomic.Uint64
	writeErrors        atomic.Uint64
	peakQueue          atomic.Int64
}

// pipe carries one direction: it reads packets from src, runs each through
// the link model on arrival, holds the survivors in a FIFO and writes each
// to dst when its time comes.
//
// One OS thread does all of it, blocked in ppoll(2) on src with a timeout
// at the next departure, rather than a reader goroutine handing packets
// to a releaser: every idle-to-busy hand-off between goroutines costs a
// cross-thread wake-up, and Go's timers wake late, which together add
// delay a WAN emulator must not add. With one thread per direction an
// idle packet costs one wake-up on arrival and one timer expiry on
// departure. Under load the wake-ups themselves are the cost, hence the
// tick: see run.
//
// Packets are stored back to back in one arena rather than in fixed-size
// slots so that memory follows bytes, not packet counts: a delay line full
// of 52-byte ACKs and one full of 9000-byte frames cost what they carry.
type pipe struct {
	name string
	src  int // file descriptors, non-blocking: TUN devices, or SOCK_SEQPACKET sockets in tests
	dst  int
	link *link
	// vnet: src and dst are TUN devices with offload (gso.go), whose
	// packets carry a virtio_net_hdr.
	vnet  bool
	clock func() int64
	tick  int64 // ns: shortest interval between wake-ups while packets are held

	arena []byte
	slots []slot
	mask  uint64
	head  uint64 // next slot to send
	tail  uint64 // next slot to fill
	wpos  uint64 // logical arena offset where the next packet may go
	freed uint64 // arena bytes below this logical offset are free

	hdr [vnetHdrLen + 120]byte // scratch for a GSO run's headers (IPv6 and TCP at most 100 bytes)

	quit  atomic.Bool
	stats counters
}

// frameMax is the most one read from src may return.
func (p *pipe) frameMax() uint64 {
	if p.vnet {
		return maxPacket + vnetHdrLen
	}
	return maxPacket
}

// newPipe sizes the FIFO for arenaBytes of packets in flight: the caller
// passes what the queue plus the delay line hold at the link rate.
func newPipe(name string, src, dst int, l *link, clock func() int64, tick time.Duration, arenaBytes int64) *pipe {
	arenaBytes = max(arenaBytes, 4*(maxPacket+vnetHdrLen))
	// The smallest packets worth counting are TCP ACKs with timestamps
	// (52 bytes): with a slot per 48 arena bytes the slots never run out
	// before the bytes do.
	nslots := uint64(1) << bits.Len64(uint64(arenaBytes/48))
	return &pipe{
		name:  name,
		src:   src,
		dst:   dst,
		link:  l,
		clock: clock,
		tick:  int64(tick),
		arena: make([]byte, arenaBytes),
		slots: make([]slot, nslots),
		mask:  nslots - 1,
	}
}

// reserve returns where the next packet can be read into: frameMax
// contiguous arena bytes at or after wpos, or ok=false when the arena or
// the slots are full. A GSO packet takes a slot per segment, so the
// slots must have room for the most a frame can hold.
func (p *pipe) reserve() (buf []byte, start uint64, ok bool) {
	size := uint64(len(p.arena))
	room := p.frameMax()
	start = p.wpos
	if off := start % size; size-off < room {
		start += size - off // too little room before the end: wrap to the start
	}
	slots := uint64(1)
	if p.vnet {
		slots = maxPacket / 48
	}
	if start+room-p.freed > size || p.tail-p.head+slots > uint64(len(p.slots)) {
		return nil, 0, false
	}
	off := start % size
	return p.arena[off : off+room], start, true
}

// receive reads up to readBatch packets that are waiting on src and queues
// the ones the link delivers. It reports whether src may have more.
func (p *pipe) receive(scratch []byte) (more bool, err error) {
	for range readBatch {
		buf, start, ok := p.reserve()
		if !ok {
			buf = scratch
		}
		n, err := unix.Read(p.src, buf)
		if err != nil {
			if errors.Is(err, unix.EAGAIN) {
				return false, nil
			}
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return false, fmt.Errorf("read packet from %s: %w", p.name, err)
		}
		if n == 0 {
			return false, fmt.Errorf("read packet from %s: end of file", p.name)
		}
		now := p.clock()
		g, cut := gsoPacket{}, false
		if p.vnet {
			g, cut = parseGSO(buf[:n])
		}
		if !cut {
			wire := n
			if p.vnet {
				wire -= vnetHdrLen
			}
			if p.admit(now, ok, wire, slot{start: start, n: int32(n)}) {
				p.wpos = start + uint64(n)
			}
			continue
		}
		kept := false
		for i := range g.segments {
			s := slot{start: start, n: int32(n), seg: uint16(i), segs: uint16(g.segments)}
			kept = p.admit(now, ok, g.wireLen(i), s) || kept
		}
		if kept {
			p.wpos = start + uint64(n)
		}
	}
	return true, nil
}

// admit counts a packet of wire bytes that arrived at now, runs it
// through the link and queues s for it if the link delivers it. ok is
// false when the arena had no room for it.
func (p *pipe) admit(now int64, ok bool, wire int, s slot) bool {
	p.stats.rxPackets.Add(1)
	p.stats.rxBytes.Add(uint64(wire))
	if !ok {
		// The emulator itself is out of room: counted apart from the
		// link's drops, since it means the arena was sized too small.
		p.stats.overflowDrops.Add(1)
		return false
	}
	at, v := p.link.admit(now, wire)
	switch v {
	case queueDrop:
		p.stats.queueDrops.Add(1)
		return false
	case lossDrop:
		p.stats.lossDrops.Add(1)
		return false
	}
	if p.link.peak > p.stats.peakQueue.Load() {
		p.stats.peakQueue.Store(p.link.peak)
	}
	s.at = at
	if v == deliverAhead && p.tail != p.head {
		// The packet takes the place of the one ahead of it, which
		// leaves right after it: the link's times stay non-decreasing in
		// slot order. One already sent, or one passed before, is not
		// passed.
		if prev := &p.slots[(p.tail-1)&p.mask]; !prev.passed {
			s, *prev = *prev, s
			s.passed, s.at = true, max(s.at, prev.at)
			p.stats.reordered.Add(1)
		}
	}
	p.slots[p.tail&p.mask] = s
	p.tail++
	return true
}

// send writes up to writeBatch packets whose time has come. It returns how
// long until the next packet is due: 0 if one is due now, -1 if none is
// held. A failed write (a device set down, say) drops the packet, as a dead
// link would, instead of stopping the emulator.
func (p *pipe) send() int64 {
	size := uint64(len(p.arena))
	now := p.clock()
	for range writeBatch {
		if p.head == p.tail {
			return -1
		}
		s := &p.slots[p.head&p.mask]
		if s.at > now {
			return s.at - now
		}
		if wait := p.runWait(now); wait > 0 {
			return wait
		}
		off := s.start % size
		frame := p.arena[off : off+uint64(s.n)]
		run := uint64(1)
		var iov [][]byte
		packets, wire := 1, len(frame)
		if p.vnet {
			wire -= vnetHdrLen
		}
		if s.segs > 0 {
			// The segments of this GSO packet right behind it that are
			// due too leave with it.
			for run < writeBatch {
				next, ok := p.inRun(run)
				if !ok || next.at > now {
					break
				}
				run++
			}
			g, _ := parseGSO(frame)
			i, j := int(s.seg), int(s.seg)+int(run)
			if i > 0 || j < g.segments {
				hdr, payload := g.runHeader(p.hdr[:], frame, i, j)
				iov = [][]byte{hdr, payload}
				wire = len(hdr) - vnetHdrLen + len(payload) + (j-i-1)*g.hdrLen
			} else {
				wire += (j - i - 1) * g.hdrLen
			}
			packets = j - i
		}
		for {
			var err error
			if iov != nil {
				_, err = unix.Writev(p.dst, iov)
			} else {
				_, err = unix.Write(p.dst, frame)
			}
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if err != nil {
				p.stats.writeErrors.Add(uint64(packets))
			} else {
				p.stats.txPackets.Add(uint64(packets))
				p.stats.txBytes.Add(uint64(wire))
			}
			break
		}
		p.release(run)
	}
	return 0
}

// release drops the n slots at the head, sent, and frees the arena below
// the packets still held.
func (p *pipe) release(n uint64) {
	p.head += n
	last := &p.slots[(p.head-1)&p.mask]
	p.freed = last.start + uint64(last.n)
	// A packet that was passed lies below the one that passed it, which
	// may be next or, after a run of segments, the one after the next; a
	// GSO packet's segments not yet sent keep it whole.
	for k := uint64(0); k < 2 && p.head+k != p.tail; k++ {
		if next := &p.slots[(p.head+k)&p.mask]; k == 0 || next.passed {
			p.freed = min(p.freed, next.start)
		}
	}
}

// runWait is how long the GSO segment at the head of the queue waits so
// as to leave with the rest of its run (the segments of its packet queued
// right behind it): 0 when the run is due, or when its last segment is
// due more than a tick from now, since the tick is the lateness batching
// already allows. A real receiver's GRO coalesces segments that arrive
// together the same way; one write instead of several is most of the
// CPU offload saves.
func (p *pipe) runWait(now int64) int64 {
	s := &p.slots[p.head&p.mask]
	if s.segs == 0 || p.tick == 0 {
		return 0
	}
	last := s.at
	for k := uint64(1); ; k++ {
		next, ok := p.inRun(k)
		if !ok {
			break
		}
		last = next.at
	}
	if wait := last - now; wait > 0 && wait <= p.tick {
		return wait
	}
	return 0
}

// inRun returns the slot k places behind the head when it holds the k-th
// segment after the head's of the same GSO packet: part of its run.
func (p *pipe) inRun(k uint64) (*slot, bool) {
	if p.head+k == p.tail {
		return nil, false
	}
	s, next := &p.slots[p.head&p.mask], &p.slots[(p.head+k)&p.mask]
	return next, next.start == s.start && next.seg == s.seg+uint16(k)
}

// run forwards packets until stop (an eventfd) becomes readable or quit is
// set, or reading src fails. It occupies its own OS thread throughout. The
// eventfd wakes a sleeping pipe; quit stops one that a flood of packets
// keeps from sleeping.
func (p *pipe) run(stop int) error {
	// The timer slack of a thread widens every timeout it sleeps on; the
	// default 50 µs is four packet times at 1 Gbit/s.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("set timer slack for %s: %w", p.name, err)
	}
	scratch := make([]byte, p.frameMax())
	both := []unix.PollFd{{Fd: int32(p.src), Events: unix.POLLIN}, {Fd: int32(stop), Events: unix.POLLIN}}
	var lastWake int64
	for !p.quit.Load() {
		more, err := p.receive(scratch)
		if err != nil {
			return err
		}
		wait := p.send()
		if more || wait == 0 {
			continue
		}
		// While packets are held, wake at most once per tick: sleep out
		// the rest of it without watching src, so that arrivals and
		// departures are handled in batches. A packet reaching an empty
		// pipe still wakes it at once.
		fds, sleep := both, wait
		if rest := lastWake + p.tick - p.clock(); rest > 0 && p.head != p.tail {
			fds, sleep = both[1:], rest
		}
		var timeout *unix.Timespec
		if sleep > 0 {
			ts := unix.NsecToTimespec(sleep)
			timeout = &ts
		}
		both[0].Revents, both[1].Revents = 0, 0
		if _, err := unix.Ppoll(fds, timeout, nil); err != nil && !errors.Is(err, unix.EINTR) {
			return fmt.Errorf("poll %s: %w", p.name, err)
		}
		lastWake = p.clock()
		if both[1].Revents != 0 {
			return nil
		}
		if both[0].Revents&(unix.POLLERR|unix.POLLHUP|unix.POLLNVAL) != 0 {
			return fmt.Errorf("poll %s: device gone (revents %#x)", p.name, both[0].Revents)
		}
	}
	return nil
}

// report formats the counters as one key=value line for scripts to parse.
func (p *pipe) report() string {
	c := &p.stats
	return fmt.Sprintf("dir=%s rx_pkts=%d rx_bytes=%d tx_pkts=%d tx_bytes=%d drop_queue=%d drop_loss=%d drop_overflow=%d write_errors=%d peak_queue_bytes=%d reordered=%d",
		p.name, c.rxPackets.Load(), c.rxBytes.Load(), c.txPackets.Load(), c.txBytes.Load(),
		c.queueDrops.Load(), c.lossDrops.Load(), c.overflowDrops.Load(), c.writeErrors.Load(), c.peakQueue.Load(),
		c.reordered.Load())
}
