package sshconn

import (
	"context"
	"errors"
	"testing"
	"time"
)

// slowStart is a TCP sender in slow start on a path of round trip rtt:
// segments sent are acknowledged a round trip later, and each one
// acknowledged grows the window by one while the sender kept at least
// half the window in flight (Linux's tcp_is_cwnd_limited), as padding
// must.
type slowStart struct {
	t        *testing.T
	now      time.Time
	rtt      time.Duration
	mss      int
	cwnd     int
	ssthresh int
	sent     int64 // bytes on the wire
	flights  []flight
	maxShare float64 // the most of the window padding filled
	hook     func(s *slowStart)
	closed   bool
	frozen   bool // acknowledgments no longer grow the window
}

type flight struct {
	at    time.Time
	bytes int
}

func newSlowStart(t *testing.T, rtt time.Duration) *slowStart {
	return &slowStart{t: t, now: time.Unix(1000, 0), rtt: rtt, mss: 1448, cwnd: 10, ssthresh: ssthreshInfinite}
}

// unacked is the segments in flight: the kernel packs the requests'
// bytes into full segments.
func (s *slowStart) unacked() int {
	n := 0
	for _, f := range s.flights {
		n += f.bytes
	}
	return (n + s.mss - 1) / s.mss
}

func (s *slowStart) ack() {
	limited := 2*s.unacked() >= s.cwnd
	kept, acked := s.flights[:0], 0
	for _, f := range s.flights {
		if s.now.Sub(f.at) >= s.rtt {
			acked += f.bytes
			continue
		}
		kept = append(kept, f)
	}
	s.flights = kept
	if limited && s.cwnd < s.ssthresh && !s.frozen {
		s.cwnd += acked / s.mss
	}
}

func (s *slowStart) warmer() warmer {
	return warmer{
		read: func() (TCPStats, bool) {
			s.ack()
			return TCPStats{MinRTT: s.rtt, Cwnd: s.cwnd, Ssthresh: s.ssthresh, MSS: s.mss,
				Unacked: s.unacked(), BytesSent: s.sent}, true
		},
		send: func(n int) error {
			if s.closed {
				return errors.New("closed")
			}
			if n > warmRequest {
				s.t.Errorf("a request of %d bytes of padding, more than %d", n, warmRequest)
			}
			s.flights = append(s.flights, flight{s.now, n + warmOverhead})
			s.sent += int64(n + warmOverhead)
			s.maxShare = max(s.maxShare, float64(s.unacked())/float64(s.cwnd))
			return nil
		},
		sleep: func(ctx context.Context, d time.Duration) error {
			s.now = s.now.Add(d)
			if s.hook != nil {
				s.hook(s)
			}
			return nil
		},
		now: func() time.Time { return s.now },
	}
}

func TestWarmGrowsTheWindowUntilDataFlows(t *testing.T) {
	s := newSlowStart(t, 100*time.Millisecond)
	start := s.now
	s.hook = func(s *slowStart) {
		if s.now.Sub(start) >= 500*time.Millisecond {
			s.sent += 1 << 20 // the copy's first writes
			s.hook = nil
		}
	}
	r, ok := s.warmer().run(context.Background(), 3*time.Second, 4<<20, 8<<20)
	if !ok {
		t.Fatal("not ok")
	}
	if r.StoppedFor != "data flows" {
		t.Errorf("stopped for %q, want data flows", r.StoppedFor)
	}
	// Five round trips with the window filled, a little less as the
	// requests go out a quarter round trip apart: 10 * 1.9^5 is 250
	// (at 0.8 of the window, 10 * 1.7^5 was 140).
	if r.FromCwnd != 10 || r.ToCwnd < 200 {
		t.Errorf("window %d to %d segments in 0.5 s at 100 ms, want from 10 to at least 200", r.FromCwnd, r.ToCwnd)
	}
	if r.Padding > 3*int64(r.ToCwnd)*int64(s.mss) {
		t.Errorf("%d bytes of padding for a window of %d segments", r.Padding, r.ToCwnd)
	}
	// Nothing is queued behind the window, before the requests that set
	// the copy up.
	if s.maxShare > warmShare+0.05 {
		t.Errorf("padding filled %.2f of the window, want at most %.2f", s.maxShare, warmShare)
	}
}

func TestWarmStops(t *testing.T) {
	for _, tc := range []struct {
		name   string
		enough int64
		most   time.Duration
		hook   func(s *slowStart)
		want   string
	}{
		{"slow start ends", 4 << 20, 3 * time.Second, func(s *slowStart) {
			if s.cwnd >= 80 {
				s.ssthresh = s.cwnd // HyStart
			}
		}, "slow start ended"},
		{"window grown", 256 << 10, 3 * time.Second, nil, "window grown"},
		{"time", 4 << 20, 250 * time.Millisecond, nil, "time"},
		{"window not growing", 4 << 20, 3 * time.Second, func(s *slowStart) {
			s.frozen = s.frozen || s.cwnd >= 40
		}, "window not growing"},
		{"connection closed", 4 << 20, 3 * time.Second, func(s *slowStart) { s.closed = true }, "connection closed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSlowStart(t, 100*time.Millisecond)
			s.hook = tc.hook
			r, ok := s.warmer().run(context.Background(), tc.most, tc.enough, 2*tc.enough)
			if !ok || r.StoppedFor != tc.want {
				t.Fatalf("stopped for %q (ok %v), want %q", r.StoppedFor, ok, tc.want)
			}
			if r.Padding > 2*tc.enough {
				t.Errorf("%d bytes of padding, more than %d", r.Padding, 2*tc.enough)
			}
		})
	}
}

func TestWarmPaddingStopsAtItsBound(t *testing.T) {
	// A window that grows while nothing stays in flight: the padding
	// stops once it comes to the bound.
	s := newSlowStart(t, 100*time.Millisecond)
	w := s.warmer()
	read := w.read
	cwnd := 100
	w.read = func() (TCPStats, bool) {
		st, ok := read()
		cwnd++
		st.Unacked, st.Cwnd = 0, cwnd
		return st, ok
	}
	r, _ := w.run(context.Background(), 10*time.Second, 1<<20, 2<<20)
	if r.StoppedFor != "padding spent" || r.Padding > 2<<20 {
		t.Fatalf("stopped for %q after %d bytes, want padding spent after %d", r.StoppedFor, r.Padding, 2<<20)
	}
}

func TestWarmStopsWithItsContext(t *testing.T) {
	s := newSlowStart(t, 100*time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	s.hook = func(*slowStart) { cancel() }
	r, _ := s.warmer().run(ctx, 3*time.Second, 4<<20, 8<<20)
	if r.StoppedFor != "stopped" {
		t.Fatalf("stopped for %q, want stopped", r.StoppedFor)
	}
}

func TestWarmLeavesShortPaths(t *testing.T) {
	s := newSlowStart(t, 2*time.Millisecond)
	w := s.warmer()
	w.shortest = warmMinRTT
	w.send = func(int) error { t.Fatal("padding on a 2 ms path"); return nil }
	if r, ok := w.run(context.Background(), time.Second, 4<<20, 8<<20); !ok || r.StoppedFor != "short path" {
		t.Fatalf("stopped for %q (ok %v), want short path", r.StoppedFor, ok)
	}
}

func TestWarmWithoutTCPInfo(t *testing.T) {
	w := warmer{read: func() (TCPStats, bool) { return TCPStats{}, false },
		send: func(int) error { t.Fatal("padding sent without TCP_INFO"); return nil }}
	if _, ok := w.run(context.Background(), time.Second, 4<<20, 8<<20); ok {
		t.Fatal("ok without TCP_INFO")
	}
}
