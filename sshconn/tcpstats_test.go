package sshconn

import (
	"testing"
	"time"
)

func TestLimitedBy(t *testing.T) {
	const sec = time.Second
	base := TCPStats{BytesAcked: 1 << 20, BusyTime: 5 * sec, RwndLimited: sec, SndbufLimited: sec, Retrans: 3}
	// after returns base moved on by one interval of sent bytes, with
	// busy and the limited times grown by the given amounts.
	after := func(busy, rwnd, sndbuf time.Duration, retrans int64) TCPStats {
		s := base
		s.BytesAcked += 8 << 20
		s.BusyTime += busy
		s.RwndLimited += rwnd
		s.SndbufLimited += sndbuf
		s.Retrans += retrans
		return s
	}
	// A download's client: 8 MiB in, requests out, busy all along; its
	// window 4 MiB at a 100 ms round trip, so at most 40 MiB/s.
	receiver := func(in int64, wnd int) TCPStats {
		s := base
		s.BytesReceived += in
		s.BytesAcked += 64 << 10
		s.BusyTime += time.Second
		s.SRTT = 100 * time.Millisecond
		s.RcvWindow = wnd
		return s
	}
	for _, tc := range []struct {
		name string
		cur  TCPStats
		el   time.Duration
		want string
	}{
		{"retransmits", after(sec, 0, 0, 2), sec, LimitLoss},
		{"a held-back window wins over a retransmit", after(sec, 900*time.Millisecond, 0, 1), sec, LimitRwnd},
		{"loss wins over a busy window", after(sec, 100*time.Millisecond, 0, 1), sec, LimitLoss},
		{"peer window most of the time", after(sec, 600*time.Millisecond, 0, 0), sec, LimitRwnd},
		{"peer window at the threshold", after(sec, 250*time.Millisecond, 0, 0), sec, LimitRwnd},
		{"send buffer", after(sec, 0, 400*time.Millisecond, 0), sec, LimitSndbuf},
		{"the larger of the two", after(sec, 300*time.Millisecond, 500*time.Millisecond, 0), sec, LimitSndbuf},
		{"both below the threshold, busy throughout", after(950*time.Millisecond, 200*time.Millisecond, 200*time.Millisecond, 0), sec, LimitCwnd},
		{"busy at 90 %", after(900*time.Millisecond, 0, 0, 0), sec, LimitCwnd},
		{"busy half the time", after(500*time.Millisecond, 0, 0, 0), sec, LimitApp},
		{"shares are of the interval given", after(sec, 0, 0, 0), 4 * sec, LimitApp},
		{"a receiver below its window", receiver(8<<20, 4<<20), sec, LimitRecv},
		{"a receiver filling its window", receiver(36<<20, 4<<20), sec, LimitRwnd},
		{"a receiver, its window unknown", receiver(36<<20, 0), sec, LimitRecv},
		{"a receiver with segments out of order: the sender lost them", func() TCPStats {
			s := receiver(36<<20, 4<<20)
			s.OutOfOrder = base.OutOfOrder + 12
			return s
		}(), sec, LimitLoss},
		{"sends a quarter of what it receives: a sender still", func() TCPStats {
			s := after(sec, 0, 0, 0)
			s.BytesReceived += 4*(8<<20) - 1
			return s
		}(), sec, LimitCwnd},
		{"retransmits the peer had already (DSACK): tail-loss probes, not loss", func() TCPStats {
			s := after(sec, 0, 0, 2)
			s.DSACKDups = base.DSACKDups + 2
			return s
		}(), sec, LimitCwnd},
		{"one of two retransmits reported twice: one lost", func() TCPStats {
			s := after(sec, 0, 0, 2)
			s.DSACKDups = base.DSACKDups + 1
			return s
		}(), sec, LimitLoss},
		{"a retransmit beside the duplicate of the last interval's, which that interval counted", func() TCPStats {
			s := after(sec, 0, 0, 1)
			s.DSACKDups = base.DSACKDups + 1
			return s
		}(), sec, LimitCwnd},
		{"nothing moved", base, sec, LimitIdle},
		{"counters went back: another connection", TCPStats{BytesAcked: 10}, sec, LimitIdle},
		{"no interval", after(sec, 0, 0, 0), 0, LimitIdle},
	} {
		if got := LimitedBy(base, tc.cur, tc.el); got != tc.want {
			t.Errorf("%s: LimitedBy = %q, want %q", tc.name, got, tc.want)
		}
	}
}
