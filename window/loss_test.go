package window

import (
	"strings"
	"testing"
	"time"
)

func TestLostCountsRealLossOnly(t *testing.T) {
	for _, tc := range []struct {
		name string
		cs   ConnSample
		want bool
	}{
		{"retransmits, none reported twice", ConnSample{LimitedBy: "loss", Retrans: 3, Bytes: 1}, true},
		{"every retransmit reported twice (tail-loss probes)", ConnSample{LimitedBy: "loss", Retrans: 3, Spurious: 3, Bytes: 1}, false},
		{"one of three retransmits needed", ConnSample{LimitedBy: "loss", Retrans: 3, Spurious: 2, Bytes: 1}, true},
		{"a receiver's holes: no retransmits of its own", ConnSample{LimitedBy: "loss", Bytes: 1}, true},
		{"retransmits while the peer's window held it", ConnSample{LimitedBy: "rwnd", Retrans: 3, Bytes: 1}, false},
	} {
		if got := lost(tc.cs); got != tc.want {
			t.Errorf("%s: lost(%+v) = %v, want %v", tc.name, tc.cs, got, tc.want)
		}
		if got := lossSeen([]ConnSample{{LimitedBy: "cwnd", Bytes: 1}, tc.cs}); got != tc.want {
			t.Errorf("%s: lossSeen = %v, want %v", tc.name, got, tc.want)
		}
	}
	// A spurious "loss" is not a congestion-held connection's.
	if share, ok := congestedShare([]ConnSample{{LimitedBy: "loss", Retrans: 2, Spurious: 2, Bytes: 1}, {LimitedBy: "loss", Retrans: 1, Bytes: 1}}); !ok || share != 0.5 {
		t.Errorf("congestedShare of one spurious and one real loss = %v, %v; want 0.5", share, ok)
	}
}

// TestSpuriousRetransmitsOpenNoConnections: a relayed path of 50 ms on
// loopback (hpncp bench --embedded) whose connections retransmit every
// interval, each retransmit one the peer had already, keeps the start's
// connections; the same path telling real loss opens the lossy plan's.
func TestSpuriousRetransmitsOpenNoConnections(t *testing.T) {
	run := func(spurious bool) []step {
		l := link{rate: 10 * gbit, rtt: 50 * time.Millisecond, connBytes: stockConn, connCap: 40e6, cpuCap: 100e6}
		c := New(Config{ConnBytes: stockConn, Cores: 2})
		return simWith(t, c, &l, 60, func(p Plan, s *Sample) {
			for i := range p.Conns {
				cs := ConnSample{Conn: i, Bytes: s.Bytes / int64(p.Conns), LimitedBy: "loss", Retrans: 4}
				if spurious {
					cs.Spurious = cs.Retrans
				}
				s.Conns = append(s.Conns, cs)
			}
		})
	}
	for _, st := range run(true) {
		if strings.Contains(st.plan.Reason, "lose segments") || st.plan.Standby > 0 || st.plan.Conns > 4 {
			t.Fatalf("%v (standby %d) where every retransmit was spurious", st.plan, st.plan.Standby)
		}
	}
	// Real loss on connections of a LAN's round trip in TCP, behind ends
	// that report 50 ms (a relay, or a request that waited for a CPU):
	// each connection recovers within milliseconds.
	l := link{rate: 10 * gbit, rtt: 50 * time.Millisecond, connBytes: stockConn, connCap: 40e6, cpuCap: 100e6}
	for _, st := range simWith(t, New(Config{ConnBytes: stockConn, Cores: 2}), &l, 60, func(p Plan, s *Sample) {
		s.Conns = []ConnSample{{Bytes: s.Bytes, LimitedBy: "loss", MinRTT: 20 * time.Microsecond}}
	}) {
		if strings.Contains(st.plan.Reason, "lose segments") || st.plan.Standby > 0 {
			t.Fatalf("%v (standby %d) over connections of a 20 µs round trip", st.plan, st.plan.Standby)
		}
	}
	most := 0
	for _, st := range run(false) {
		most = max(most, st.plan.Conns)
	}
	if most < DefaultMaxConns {
		t.Errorf("real loss on the same path reached %d connections, want the lossy plan's", most)
	}
}
