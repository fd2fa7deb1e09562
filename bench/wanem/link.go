package main

import (
	"math/rand/v2"
	"time"
)

// verdict is what the link does with one packet.
type verdict uint8

const (
	deliver      verdict = iota
	queueDrop            // the drop-tail queue was full on arrival
	lossDrop             // serialised, then lost on the wire
	deliverAhead         // delivered, and let past the packet ahead of it (--reorder)
)

// link models one direction of the emulated path as a router port would
// behave: a drop-tail FIFO bounded in bytes in front of a serialiser running
// at a fixed rate, then a propagation delay, fixed or with random extra
// delay per packet (jitter), then random loss.
//
// Only arrival times matter for the model, so admit computes a packet's
// whole fate the moment it arrives. Delivery times are kept
// non-decreasing, jitter included (a packet that drew less extra delay
// than the one ahead waits for it, as on a path that never reorders), so
// the caller can release packets in arrival order; the only exception is
// the deliverAhead verdict, which asks the caller to swap the packet with
// the one ahead of it. Not safe for concurrent use: one reader owns a
// link.
type link struct {
	nsPerByte float64 // serialisation time; 0 means unlimited rate, no queue
	delay     int64   // one-way propagation delay, ns
	jitter    int64   // ns: extra one-way delay, uniform in [0, jitter], per packet
	queue     int64   // bytes the FIFO may hold, the packet on the wire included
	loss      float64
	reorder   float64 // share of delivered packets let past the one ahead
	rng       *rand.Rand

	busyUntil int64 // ns: when the serialiser finishes the last admitted packet
	lastOut   int64 // ns: when the last delivered packet leaves the far end
	peak      int64 // largest backlog seen, bytes
}

func newLink(rate int64, oneWay time.Duration, queue int64, loss float64, seed uint64) *link {
	l := &link{
		delay: int64(oneWay),
		queue: queue,
		loss:  loss,
		rng:   rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15)),
	}
	if rate > 0 {
		l.nsPerByte = 8e9 / float64(rate)
	}
	return l
}

// vary adds jitter (random extra one-way delay per packet, up to jitter)
// and reordering (the share of packets let past the one ahead) to l.
func (l *link) vary(jitter time.Duration, reorder float64) *link {
	l.jitter, l.reorder = int64(jitter), reorder
	return l
}

// admit decides the fate of a packet of n bytes arriving at now (ns on the
// caller's monotonic clock) and, if it is delivered, returns when it leaves
// the far end of the link.
func (l *link) admit(now int64, n int) (int64, verdict) {
	depart := now
	if l.nsPerByte > 0 {
		start := now
		var backlog int64
		if l.busyUntil > now {
			start = l.busyUntil
			backlog = int64(float64(l.busyUntil-now) / l.nsPerByte)
		}
		if backlog+int64(n) > l.queue {
			return 0, queueDrop
		}
		backlog += int64(n)
		l.peak = max(l.peak, backlog)
		depart = start + int64(float64(n)*l.nsPerByte+0.5)
		l.busyUntil = depart
	}
	// Loss is decided after serialisation: a packet lost on the wire has
	// still occupied the link for its transmission time. It is drawn
	// first so that a given seed loses the same packets with and without
	// jitter and reordering.
	if l.loss > 0 && l.rng.Float64() < l.loss {
		return 0, lossDrop
	}
	out := depart + l.delay
	if l.jitter > 0 {
		out += l.rng.Int64N(l.jitter + 1)
	}
	// Never before the packet ahead: jitter alone varies the delay, it
	// does not reorder.
	out = max(out, l.lastOut)
	l.lastOut = out
	if l.reorder > 0 && l.rng.Float64() < l.reorder {
		return out, deliverAhead
	}
	return out, deliver
}

// queueFor is the drop-tail queue of a direction at rate: bdps times its
// bandwidth-delay product (1 is the classic router sizing that lets a
// single Reno/CUBIC flow keep the link busy), and never less than a few
// dozen full-size packets so short RTTs still absorb a burst.
func queueFor(bdps float64, rate int64, rtt time.Duration, mtu int) int64 {
	bdp := float64(rate) / 8 * rtt.Seconds()
	return max(int64(bdps*bdp+0.5), int64(32*mtu))
}
