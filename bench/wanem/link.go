package main

import (
	"math/rand/v2"
	"time"
)

// verdict is what the link does with one packet.
type verdict uint8

const (
	deliver   verdict = iota
	queueDrop         // the drop-tail queue was full on arrival
	lossDrop          // serialised, then lost on the wire
)

// link models one direction of the emulated path as a router port would
// behave: a drop-tail FIFO bounded in bytes in front of a serialiser running
// at a fixed rate, then a fixed propagation delay, then random loss.
//
// Only arrival times matter for the model, so admit computes a packet's
// whole fate the moment it arrives: with a FIFO and a constant delay,
// delivery times are non-decreasing and the caller can release packets in
// arrival order. Not safe for concurrent use: one reader owns a link.
type link struct {
	nsPerByte float64 // serialisation time; 0 means unlimited rate, no queue
	delay     int64   // one-way propagation delay, ns
	queue     int64   // bytes the FIFO may hold, the packet on the wire included
	loss      float64
	rng       *rand.Rand

	busyUntil int64 // ns: when the serialiser finishes the last admitted packet
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
	// still occupied the link for its transmission time.
	if l.loss > 0 && l.rng.Float64() < l.loss {
		return 0, lossDrop
	}
	return depart + l.delay, deliver
}

// autoQueue is the drop-tail queue used when none is given: one
// bandwidth-delay product, the classic router sizing that lets a single
// Reno/CUBIC flow keep the link busy, and never less than a few dozen
// full-size packets so short RTTs still absorb a burst.
func autoQueue(rate int64, rtt time.Duration, mtu int) int64 {
	bdp := int64(float64(rate) / 8 * rtt.Seconds())
	return max(bdp, int64(32*mtu))
}
