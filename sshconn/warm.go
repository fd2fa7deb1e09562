package sshconn

import (
	"context"
	"fmt"
	"time"

	"github.com/hpncp/hpncp/internal/sleep"
)

// A connection dialed ahead for an upload waits several round trips
// between its authentication and the copy's first write: its sessions
// open, the first connection makes the temporary file, the streams open
// it. At 100 ms that is half a second, and the connection starts the copy
// with the congestion window TCP starts with (10 segments), eight round
// trips of slow start short of its share of the path. Warm spends the wait
// growing the window: it keeps a part of it in flight with padding, which
// TCP counts as use (a window grows in slow start only while the sender
// fills half of it). The padding is global requests without a reply,
// which servers ignore (RFC 4254 section 4). A warmed connection's first
// write goes out into a window tens of times TCP's initial one, and an
// upload on a long path reaches link speed a good part of a second
// sooner.
const (
	// warmShare is the part of the window the padding fills: all of it,
	// never more. In slow start the window then doubles each round trip,
	// where filling less of it grows it by less; the requests that set
	// the copy up find no padding queued before them, only a window
	// opening with each acknowledgment.
	warmShare = 1.0
	// warmData is how many bytes beyond the padding the connection sends
	// before Warm takes it for the copy's data and stops.
	warmData = 256 << 10
	// warmRequest is the most padding in one request; warmOverhead the
	// bytes each adds on the wire (SSH packet, MAC, request name).
	warmRequest  = 16 << 10
	warmOverhead = 96
	// warmRequestName is the global request the padding goes in.
	warmRequestName = "padding@hpncp"
	// ssthreshInfinite is the slow start threshold the kernel keeps until
	// the first congestion event (TCP_INFINITE_SSTHRESH).
	ssthreshInfinite = 0x7fffffff
	// warmBudget bounds a connection's padding: growing a window takes
	// about twice the window in padding, and this one grows it to about
	// 500 KiB, six doublings from where TCP starts. A large upload's data
	// flows before the budget is spent; a tree's connections, idle for
	// many round trips before their first file, would without it pad
	// all that time, to windows as large as their send buffers.
	warmBudget = 1 << 20
	// warmMinRTT is the shortest path worth warming: below it slow start
	// is over in a few milliseconds anyway, and on loopback the window,
	// never filled, would not grow while the budget went out in 4 ms.
	warmMinRTT = 10 * time.Millisecond
)

// WarmResult tells what Warm did.
type WarmResult struct {
	Padding    int64  // bytes of padding sent
	FromCwnd   int    // the congestion window when it began, in segments
	ToCwnd     int    // and when it stopped
	StoppedFor string // why it stopped
}

func (r WarmResult) String() string {
	return fmt.Sprintf("%d KiB of padding, congestion window %d to %d segments (%s)",
		r.Padding>>10, r.FromCwnd, r.ToCwnd, r.StoppedFor)
}

// Warm grows c's congestion window with padding, as above, until the
// copy's data flows, slow start ends, the window could carry all the
// socket's send buffer may hold (the most autotuning grows it to), it
// did not grow over a round trip (a path so short that acknowledgments
// come before half the window is out: padding is no use there), the
// padding comes to warmBudget, c closes, ctx is done or most has passed.
// A path shorter than warmMinRTT is left alone. ok is false where the
// kernel tells nothing (TCPInfo), and nothing was sent.
func (c *Client) Warm(ctx context.Context, most time.Duration) (WarmResult, bool) {
	return c.warm(ctx, most, warmMinRTT)
}

// warm is Warm for paths of at least shortest.
func (c *Client) warm(ctx context.Context, most, shortest time.Duration) (WarmResult, bool) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-c.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	pad := make([]byte, warmRequest)
	return warmWith(ctx, most, shortest,
		func() (TCPStats, bool) { return TCPInfo(c.Transport) },
		func(n int) error {
			_, _, err := c.SendRequest(warmRequestName, false, pad[:n])
			return err
		})
}

// WarmWith is Warm for a connection this process sends on but does not
// hold: read looks at its TCP state, send puts n bytes of padding on it
// (at most 16 KiB; the other end drops them). The helper warms its SSH
// connection's window toward the client so, through the server's
// socket, with padding on its channel's stderr.
func WarmWith(ctx context.Context, most time.Duration, read func() (TCPStats, bool), send func(n int) error) (WarmResult, bool) {
	return warmWith(ctx, most, warmMinRTT, read, send)
}

func warmWith(ctx context.Context, most, shortest time.Duration, read func() (TCPStats, bool), send func(n int) error) (WarmResult, bool) {
	w := warmer{read: read, send: send, sleep: sleep.For, now: time.Now, shortest: shortest}
	_, enough := autotuneLimits()
	if enough <= 0 {
		enough = 4 << 20 // Debian's, and most distributions'
	}
	return w.run(ctx, most, int64(enough), warmBudget)
}

// warmer is Warm's loop, with the kernel, the connection and the clock
// as functions for the tests.
type warmer struct {
	read  func() (TCPStats, bool)
	send  func(n int) error                                // sends n bytes of padding, n <= warmRequest
	sleep func(ctx context.Context, d time.Duration) error // ends early with ctx
	now   func() time.Time
	// shortest is the shortest round trip warmed.
	shortest time.Duration
}

// run warms until, among the rest, the window holds window bytes or the
// padding comes to budget.
func (w warmer) run(ctx context.Context, most time.Duration, window, budget int64) (WarmResult, bool) {
	first, ok := w.read()
	if !ok || first.MSS <= 0 {
		return WarmResult{}, false
	}
	r := WarmResult{FromCwnd: first.Cwnd, ToCwnd: first.Cwnd}
	if first.MinRTT < w.shortest {
		r.StoppedFor = "short path"
		return r, true
	}
	// A quarter of a round trip between looks: the window grows as
	// acknowledgments come, and is kept filled as it does.
	step := max(first.MinRTT/4, time.Millisecond)
	deadline := w.now().Add(most)
	var wire int64 // the padding's bytes on the wire
	// The window at the start of the round trip under way, and when
	// that began: one looked at a quarter round trip apart, at least.
	roundCwnd, roundAt, looks := first.Cwnd, w.now(), 0
	for {
		switch {
		case ctx.Err() != nil:
			r.StoppedFor = "stopped"
			return r, true
		case !w.now().Before(deadline):
			r.StoppedFor = "time"
			return r, true
		}
		st, ok := w.read()
		if !ok {
			r.StoppedFor = "no TCP_INFO"
			return r, true
		}
		r.ToCwnd = st.Cwnd
		switch {
		case st.BytesSent-first.BytesSent-wire > warmData:
			r.StoppedFor = "data flows"
			return r, true
		case st.Ssthresh > 0 && st.Ssthresh < ssthreshInfinite:
			// Loss, or HyStart's delay: the path has said how much it
			// takes, and padding would only take from the copy.
			r.StoppedFor = "slow start ended"
			return r, true
		case int64(st.Cwnd)*int64(max(st.MSS, 1)) >= window:
			r.StoppedFor = "window grown"
			return r, true
		case budget-r.Padding <= warmOverhead:
			r.StoppedFor = "padding spent"
			return r, true
		}
		// A round trip and a half: the acknowledgments of what went
		// out first in it have come, whatever the jitter.
		if looks++; looks >= 4 && w.now().Sub(roundAt) >= st.MinRTT*3/2 {
			if st.Cwnd <= roundCwnd {
				r.StoppedFor = "window not growing"
				return r, true
			}
			roundCwnd, roundAt, looks = st.Cwnd, w.now(), 0
		}
		mss := max(st.MSS, 1)
		want := (int(warmShare*float64(st.Cwnd)) - st.Unacked - (st.NotSent+mss-1)/mss) * mss
		want = int(min(int64(want), budget-r.Padding))
		for want > warmOverhead {
			n := min(want-warmOverhead, warmRequest)
			if err := w.send(n); err != nil {
				r.StoppedFor = "connection closed"
				return r, true
			}
			want -= n + warmOverhead
			r.Padding += int64(n)
			wire += int64(n + warmOverhead)
		}
		_ = w.sleep(ctx, step) // a done ctx is seen at the loop's top
	}
}
