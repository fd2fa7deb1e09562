package window

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

const (
	mbit = 1e6 / 8 // bytes per second
	gbit = 1e9 / 8
	w    = defaultChannelWindow
)

// link is a simulated path: goodput is the smallest of the link rate, the
// streams' windows per round trip, the connections' crypto and the host's
// CPU, less what a shallow drop-tail queue costs. Deterministic: noise
// comes from a fixed-seed generator.
type link struct {
	rate float64       // bottleneck rate, bytes/s
	rtt  time.Duration // base round trip
	// streamCap is each stream's limit below window / RTT, bytes/s; 0:
	// none. A server whose disk adds latency to every request has one.
	streamCap float64
	connCap   float64 // per-connection crypto limit, bytes/s; 0: none
	// connBytes is what one connection's socket buffers keep in flight
	// (stock tcp_wmem: about 3.6 MB), whatever its channels' windows;
	// 0: no limit.
	connBytes float64
	cpuCap    float64 // whole-host limit, bytes/s; 0: none
	noise     float64 // each interval's goodput is scaled by 1 ± noise
	state     uint64
	// lateJoin is how many more round trips connections opened while
	// the link is nearly full take to carry their share; 0: none.
	lateJoin time.Duration
	stall    int // every stall-th interval delivers half (a GC pause, a disk hiccup); 0: never
	n        int // intervals delivered
	// limitedBy, when set, is what the kernel tells of each connection
	// every interval (Sample.Conns): "loss" for a path that drops
	// segments at random.
	limitedBy string
	// flatRTT keeps the round trip the base one under any plan: the
	// queue at a full link does not show in it (a download's client
	// times its requests, whose acknowledgements the queue delays less
	// than its data).
	flatRTT bool
	// burst is how many intervals from the start the connections carry
	// four times connCap: their slow starts' windows, before the first
	// losses bring them down to what the loss rate allows.
	burst int
	// queue is the drop-tail queue at the bottleneck in bandwidth-delay
	// products (bench/wanem --queue 0.25bdp); 0: deep enough for any
	// plan. See overflow.
	queue float64

	prev Plan          // the plan of the last interval
	old  float64       // goodput before the last change
	ramp time.Duration // until added capacity arrives
}

func (l *link) goodput(p Plan) float64 {
	// A window crosses the bottleneck in InFlight / rate: a stream's
	// cycle is the round trip plus that.
	perStream := float64(p.InFlight) / (l.rtt.Seconds() + float64(p.InFlight)/l.rate)
	if l.streamCap > 0 {
		perStream = min(perStream, l.streamCap)
	}
	g := min(l.rate, float64(p.Streams)*perStream)
	if l.connBytes > 0 {
		g = min(g, float64(p.Conns)*l.connBytes/l.rtt.Seconds())
	}
	if l.connCap > 0 {
		g = min(g, float64(p.Conns)*l.connCap)
	}
	if l.cpuCap > 0 {
		g = min(g, l.cpuCap)
	}
	if use, _, over := l.overflow(p); over {
		g = min(g, use*l.rate)
	}
	return g
}

// inFlight is what p's windows keep in flight on the path, bytes.
func (l *link) inFlight(p Plan) float64 {
	w := float64(p.Streams) * float64(p.InFlight)
	if l.streamCap > 0 {
		w = min(w, float64(p.Streams)*l.streamCap*l.rtt.Seconds())
	}
	if l.connBytes > 0 {
		w = min(w, float64(p.Conns)*l.connBytes)
	}
	return w
}

// overflow is the shallow queue's toll on p: where p's windows would keep
// more in flight than the bandwidth-delay product plus the queue, the
// connections' congestion windows grow until the queue overflows, one of
// them (cubic) cuts its window by 30 %, and they grow again. Their sum
// saws between the top, BDP + queue, and the top less the cut. Drops from
// a drop-tail queue hit one flow or a few, not all (desynchronised flows,
// as router buffer sizing assumes): the sum loses 0.3 of the top spread
// over sqrt(connections). Where the bottom falls below the BDP, the link
// idles for part of each tooth (use < 1, assuming the sum grows at a
// steady pace); queued is the mean standing queue in BDPs, which is what
// the round trip shows.
func (l *link) overflow(p Plan) (use, queued float64, over bool) {
	bdp := l.rate * l.rtt.Seconds()
	w := l.inFlight(p)
	if l.queue <= 0 || w <= bdp*(1+l.queue) || p.Conns < 1 {
		return 1, 0, false
	}
	top := 1 + l.queue // in BDPs
	bottom := top * (1 - 0.3/math.Sqrt(float64(p.Conns)))
	if bottom >= 1 {
		return 1, (top+bottom)/2 - 1, true
	}
	// The link's share over the tooth: w/BDP below 1, full above.
	use = ((1-bottom*bottom)/2 + (top - 1)) / (top - bottom)
	queued = (top - 1) * (top - 1) / 2 / (top - bottom)
	return use, queued, true
}

// achievable is the best goodput any plan within cfg's bounds can reach.
func (l *link) achievable(c *Controller) float64 {
	return l.goodput(Plan{Streams: c.cfg.MaxStreams, Conns: c.cfg.MaxConns, InFlight: c.cfg.ChannelWindow})
}

// rttUnder is the round trip TCP would report: windows beyond the
// bandwidth-delay product queue at the bottleneck when the link is the limit.
func (l *link) rttUnder(p Plan) time.Duration {
	if l.flatRTT {
		return l.rtt
	}
	if _, queued, over := l.overflow(p); over {
		return time.Duration((1 + queued) * float64(l.rtt))
	}
	if l.goodput(p) < l.rate {
		return l.rtt
	}
	return max(l.rtt, time.Duration(l.inFlight(p)/l.rate*float64(time.Second)))
}

// limits is what the kernel tells of the connections in an interval of p
// (ConnSample.LimitedBy): loss where the queue overflows, else limitedBy.
func (l *link) limits(p Plan) string {
	if _, _, over := l.overflow(p); over {
		return "loss"
	}
	return l.limitedBy
}

// deliver returns the goodput of one interval of p, ramping up after a
// change that adds streams or connections.
func (l *link) deliver(p Plan) float64 {
	g := l.goodput(p)
	if p.Streams != l.prev.Streams || p.Conns != l.prev.Conns {
		l.old = l.goodput(l.prev)
		switch {
		case p.Conns > l.prev.Conns && l.lateJoin > 0 && l.old >= 0.9*l.rate:
			// Connections starting into a queue the others keep leave
			// slow start early (cubic's HyStart) and grow slowly.
			l.ramp = (rampRTTsConns + l.lateJoin) * l.rtt
		case p.Conns > l.prev.Conns:
			l.ramp = rampRTTsConns * l.rtt
		case p.Streams > l.prev.Streams:
			l.ramp = rampRTTsChannels * l.rtt
		default:
			l.ramp = 0
		}
		l.prev = p
	}
	l.n++
	if l.stall > 0 && l.n%l.stall == 0 {
		g /= 2
	}
	if l.n <= l.burst && l.connCap > 0 {
		fast := *l
		fast.connCap, fast.burst = 4*l.connCap, 0
		g = fast.goodput(p)
	}
	if l.ramp <= 0 || g <= l.old {
		return g
	}
	waited := min(l.ramp, p.Interval)
	l.ramp -= waited
	return (l.old*waited.Seconds() + g*(p.Interval-waited).Seconds()) / p.Interval.Seconds()
}

func (l *link) jitter() float64 {
	if l.noise == 0 {
		return 1
	}
	l.state = l.state*6364136223846793005 + 1442695040888963407
	u := float64(l.state>>11) / (1 << 53)
	return 1 + l.noise*(2*u-1)
}

// step is one simulated interval: the plan that ran and its true goodput.
type step struct {
	plan    Plan
	goodput float64
}

// Added capacity arrives this many round trips after a change: a new
// channel needs its open, the sftp subsystem request, SFTP init, a file
// open and its first reads; a new connection also TCP, key exchange, auth
// and slow start. Until then the old plan's goodput is what gets delivered.
const (
	rampRTTsChannels = 5
	rampRTTsConns    = 10
)

// sim drives c over l for n intervals after Start, with errs[i] transport
// errors reported in interval i.
func sim(t *testing.T, c *Controller, l *link, n int, errs map[int]int) []step {
	t.Helper()
	p := c.Start(l.rtt)
	return simFrom(t, c, l, p, n, errs)
}

func simFrom(t *testing.T, c *Controller, l *link, p Plan, n int, errs map[int]int) []step {
	t.Helper()
	return simHooked(t, c, l, p, n, func(i int, p Plan, s *Sample) {
		s.Errors = errs[i]
		if by := l.limits(p); by != "" && s.Bytes > 0 {
			s.Conns = []ConnSample{{Conn: 0, Bytes: s.Bytes, LimitedBy: by}}
		}
	})
}

// simHooked drives c over l from plan p for n intervals, with hook
// filling in what l does not model (errors, Sample.Conns, Sample.CPU)
// for interval i's plan and sample.
func simHooked(t *testing.T, c *Controller, l *link, p Plan, n int, hook func(i int, p Plan, s *Sample)) []step {
	t.Helper()
	var steps []step
	for i := range n {
		checkPlan(t, c, p)
		steps = append(steps, step{p, l.goodput(p)})
		s := Sample{
			Elapsed: p.Interval,
			Bytes:   int64(l.deliver(p) * l.jitter() * p.Interval.Seconds()),
			RTT:     l.rttUnder(p),
		}
		hook(i, p, &s)
		p = c.Observe(s)
	}
	return steps
}

// simFor is simFrom for d of simulated time rather than a count of
// intervals, whose length follows the RTT.
func simFor(t *testing.T, c *Controller, l *link, p Plan, d time.Duration) []step {
	t.Helper()
	var steps []step
	for elapsed := time.Duration(0); elapsed < d; elapsed += p.Interval {
		checkPlan(t, c, p)
		steps = append(steps, step{p, l.goodput(p)})
		p = c.Observe(Sample{
			Elapsed: p.Interval,
			Bytes:   int64(l.deliver(p) * l.jitter() * p.Interval.Seconds()),
			RTT:     l.rttUnder(p),
		})
	}
	return steps
}

// checkPlan asserts what must hold for every plan.
func checkPlan(t *testing.T, c *Controller, p Plan) {
	t.Helper()
	cfg := c.cfg
	if cfg.Fixed > 0 {
		if p.Streams != cfg.Fixed {
			t.Fatalf("plan %v: want the fixed %d streams", p, cfg.Fixed)
		}
	} else if most := c.maxStreams(); p.Streams < cfg.MinStreams || p.Streams > most {
		t.Fatalf("plan %v: streams outside [%d, %d]", p, cfg.MinStreams, most)
	}
	if p.Conns < ceilDiv(p.Streams, cfg.StreamsPerConn) || p.Conns > p.Streams ||
		(cfg.Fixed == 0 && p.Conns > c.maxConns()) {
		t.Fatalf("plan %v: connections do not fit %d streams at %d per connection, at most %d",
			p, p.Streams, cfg.StreamsPerConn, c.maxConns())
	}
	switch {
	case c.lossyPath() && (p.InFlight < cfg.ChannelWindow/8 || p.InFlight > cfg.ChannelWindow):
		t.Fatalf("plan %v on a lossy path: in flight %d, want from an eighth of a window to a window of %d", p, p.InFlight, cfg.ChannelWindow)
	case !c.lossyPath() && (p.InFlight < cfg.ChannelWindow/2 || p.InFlight > cfg.ChannelWindow):
		t.Fatalf("plan %v: in flight %d, want from half a window to a window of %d", p, p.InFlight, cfg.ChannelWindow)
	case !c.lossyPath() && c.minRTT > 0 &&
		float64(p.Streams)*float64(p.InFlight) < min(float64(p.Streams)*float64(cfg.ChannelWindow), guessRate*c.minRTT.Seconds()):
		t.Fatalf("plan %v: %d bytes in flight in all, under the guessed product %.0f", p, int64(p.Streams)*p.InFlight, guessRate*c.minRTT.Seconds())
	}
	if p.Interval < minInterval || p.Interval > maxInterval || p.Reason == "" {
		t.Fatalf("plan %v: interval %v or reason missing", p, p.Interval)
	}
}

// converged returns the first interval from which goodput stays at or above
// frac of want to the end, or -1.
func converged(steps []step, want, frac float64) int {
	at := -1
	for i, s := range steps {
		if s.goodput >= frac*want {
			if at < 0 {
				at = i
			}
		} else {
			at = -1
		}
	}
	return at
}

// changes counts the plan changes in steps.
func changes(steps []step) int {
	n := 0
	for i := 1; i < len(steps); i++ {
		if steps[i].plan.Streams != steps[i-1].plan.Streams || steps[i].plan.Conns != steps[i-1].plan.Conns {
			n++
		}
	}
	return n
}

func maxStreams(steps []step) int {
	m := 0
	for _, s := range steps {
		m = max(m, s.plan.Streams)
	}
	return m
}

func TestGrowsToBandwidthDelayProduct(t *testing.T) {
	for _, tc := range []struct {
		name   string
		link   link
		within int // intervals to reach 90 % of the achievable goodput
		// Streams held, at least and at most: the bandwidth-delay
		// product's with headroom, which noise moves by one.
		hold [2]int
	}{
		// Three windows fill 1 Gbit/s at 50 ms, and the start guesses so.
		// Four windows fill 1 Gbit/s at 50 ms (each crosses the link in
		// 17 ms, so a stream's cycle is 67 ms), and the start guesses so.
		{"50ms 1Gbit", link{rate: 1 * gbit, rtt: 50 * time.Millisecond}, 10, [2]int{4, 5}},
		{"100ms 1Gbit", link{rate: 1 * gbit, rtt: 100 * time.Millisecond}, 15, [2]int{7, 8}},
		{"200ms 1Gbit", link{rate: 1 * gbit, rtt: 200 * time.Millisecond}, 25, [2]int{13, 15}},
		{"50ms 10Gbit", link{rate: 10 * gbit, rtt: 50 * time.Millisecond}, 30, [2]int{32, 32}},
		{"100ms 1Gbit noisy", link{rate: 1 * gbit, rtt: 100 * time.Millisecond, noise: 0.05, state: 1}, 15, [2]int{7, 9}},
		{"200ms 1Gbit noisy", link{rate: 1 * gbit, rtt: 200 * time.Millisecond, noise: 0.05, state: 7}, 25, [2]int{13, 16}},
		// One interval in five stalls to half: the median of three
		// ignores it.
		{"100ms 1Gbit stalls", link{rate: 1 * gbit, rtt: 100 * time.Millisecond, stall: 5}, 15, [2]int{7, 8}},
		{"50ms 1Gbit stalls", link{rate: 1 * gbit, rtt: 50 * time.Millisecond, stall: 4}, 10, [2]int{4, 5}},
		// The start's 1 Gbit/s guess overshoots; the plateau is trimmed.
		{"100ms 300Mbit", link{rate: 300 * mbit, rtt: 100 * time.Millisecond}, 10, [2]int{3, 4}},
		// Each stream does 10 MB/s, not 21: trimming to the windows the
		// path needs loses goodput, so the untrimmed plan stays.
		{"100ms 1Gbit slow server", link{rate: 1 * gbit, rtt: 100 * time.Millisecond, streamCap: 10e6}, 35, [2]int{13, 16}},
		// Intervals stop at 2 s, two round trips: new channels take more
		// than one interval to ramp up.
		{"1s 100Mbit", link{rate: 100 * mbit, rtt: time.Second}, 25, [2]int{7, 8}},
		// Each connection's crypto tops out at 200 MB/s and the host at
		// 800 MB/s: only more connections, not more channels, get there.
		{"20ms 10Gbit CPU-bound connections", link{rate: 10 * gbit, rtt: 20 * time.Millisecond, connCap: 200e6, cpuCap: 800e6}, 30, [2]int{8, 10}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := New(Config{})
			want := tc.link.achievable(c)
			steps := sim(t, c, &tc.link, 300, nil)
			at := converged(steps, want, 0.9)
			if at < 0 || at > tc.within {
				t.Fatalf("reached 90%% of %.0f MB/s at interval %d, want by %d; last plan %v",
					want/1e6, at, tc.within, steps[len(steps)-1].plan)
			}
			// Holding: the plan of the last 200 intervals never changes.
			if n := changes(steps[100:]); n != 0 {
				t.Errorf("%d plan changes on the plateau, want none; last plan %v", n, steps[len(steps)-1].plan)
			}
			if last := steps[len(steps)-1].plan; last.Streams < tc.hold[0] || last.Streams > tc.hold[1] {
				// Each window also spends w / want crossing the link.
				need := want*tc.link.rtt.Seconds()/w + 1
				t.Errorf("holding %v, want %d to %d streams (%.1f windows carry %.0f MB/s)",
					last, tc.hold[0], tc.hold[1], need, want/1e6)
			}
		})
	}
}

// Where the start's windows already fill the link, the round trips grow
// by the queue they build at the bottleneck: no probe adds streams or
// connections, which would only deepen it until the router drops.
func TestFullLinkIsNotProbed(t *testing.T) {
	for _, l := range []link{
		{rate: 1 * gbit, rtt: 50 * time.Millisecond},
		{rate: 1 * gbit, rtt: 100 * time.Millisecond},
		{rate: 1 * gbit, rtt: 100 * time.Millisecond, noise: 0.05, state: 3},
	} {
		t.Run(l.rtt.String(), func(t *testing.T) {
			c := New(Config{})
			start := c.Start(l.rtt)
			if l.goodput(start) < l.rate {
				t.Fatalf("start %v does not fill the link; the test wants one that does", start)
			}
			steps := simFrom(t, c, &l, start, 100, nil)
			for i, st := range steps {
				if st.plan.Streams > start.Streams || st.plan.Conns > start.Conns {
					t.Fatalf("interval %d: %v, more than the start's %v on a full link", i, st.plan, start)
				}
			}
			if last := steps[len(steps)-1]; last.goodput < 0.99*l.rate {
				t.Errorf("holding %v at %.0f MB/s, want the link's %.0f", last.plan, last.goodput/1e6, l.rate/1e6)
			}
		})
	}
	// The same round trips without a queue (the windows carry less than
	// the link) leave the probes to decide.
	l := link{rate: 10 * gbit, rtt: 100 * time.Millisecond}
	c := New(Config{})
	start := c.Start(l.rtt)
	steps := simFrom(t, c, &l, start, 100, nil)
	if last := steps[len(steps)-1].plan; last.Streams <= start.Streams {
		t.Errorf("10 Gbit/s at 100 ms held %v, want more than the start's %d streams", last, start.Streams)
	}
}

func TestStaysSmallOnLAN(t *testing.T) {
	for _, tc := range []struct {
		name        string
		link        link
		wantStreams int
	}{
		// One connection is all the CPU there is: nothing helps.
		{"CPU-bound", link{rate: 10 * gbit, rtt: 100 * time.Microsecond, connCap: 300e6, cpuCap: 300e6}, 1},
		{"CPU-bound noisy", link{rate: 10 * gbit, rtt: 100 * time.Microsecond, connCap: 300e6, cpuCap: 300e6, noise: 0.05, state: 3}, 1},
		{"CPU-bound stalls", link{rate: 10 * gbit, rtt: 100 * time.Microsecond, connCap: 300e6, cpuCap: 300e6, stall: 4}, 1},
		// One stream fills the link.
		{"link-bound", link{rate: 1 * gbit, rtt: 200 * time.Microsecond}, 1},
		// A second connection adds a second core's worth: a probe proves
		// it, so it is kept.
		{"two cores", link{rate: 10 * gbit, rtt: 100 * time.Microsecond, connCap: 300e6, cpuCap: 600e6}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := New(Config{})
			if p := c.Start(tc.link.rtt); p.Streams != 1 || p.Conns != 1 {
				t.Fatalf("start on a LAN: %v, want 1 stream", p)
			}
			steps := sim(t, c, &tc.link, 300, nil)
			// A probe past the plateau is how the plateau is found; where
			// one stream is the answer, one probe and back is all it costs.
			if m := maxStreams(steps); m > 2*tc.wantStreams {
				t.Errorf("tried %d streams on a LAN, want at most %d", m, 2*tc.wantStreams)
			}
			if n := changes(steps); tc.wantStreams == 1 && n > 2 {
				t.Errorf("%d plan changes on a LAN where one stream is best, want one probe and back", n)
			}
			last := steps[len(steps)-1].plan
			if last.Streams != tc.wantStreams {
				t.Errorf("holding %v, want %d streams", last, tc.wantStreams)
			}
			if n := changes(steps[50:]); n != 0 {
				t.Errorf("%d plan changes on the plateau, want none", n)
			}
		})
	}
}

func TestBacksOffOnErrors(t *testing.T) {
	l := &link{rate: 1 * gbit, rtt: 100 * time.Millisecond}
	c := New(Config{})
	steps := sim(t, c, l, 60, nil)
	held := steps[len(steps)-1].plan
	if held.Streams < 6 {
		t.Fatalf("precondition: plateau at %v, want at least 6 streams", held)
	}

	p := c.Observe(Sample{Elapsed: held.Interval, Bytes: 1 << 20, RTT: l.rtt, Errors: 2})
	if p.Streams != held.Streams/2 || !strings.Contains(p.Reason, "error") {
		t.Fatalf("after errors: %v, want %d streams and the errors as reason", p, held.Streams/2)
	}
	// The next interval still reports failures of the old plan: not
	// counted twice.
	p2 := c.Observe(Sample{Elapsed: p.Interval, Bytes: 1 << 20, RTT: l.rtt, Errors: 1})
	if p2.Streams != p.Streams {
		t.Fatalf("errors while settling halved again: %v", p2)
	}

	// Growth resumes but stays below the count that failed until the cap
	// lifts after 30 s without errors.
	steps = simFor(t, c, l, p2, 28*time.Second)
	if m := maxStreams(steps); m >= held.Streams {
		t.Errorf("grew to %d streams within 28 s of errors at %d", m, held.Streams)
	}
	last := steps[len(steps)-1].plan
	if float64(last.Streams)*w/l.rtt.Seconds() < 0.8*l.rate {
		t.Errorf("recovered only to %v under the cap", last)
	}
	// Then the held plan probes past the cap again.
	steps = simFrom(t, c, l, last, 30, nil)
	if m := maxStreams(steps); m < held.Streams {
		t.Errorf("no probe past the cap of %d streams once lifted: at most %d", held.Streams-1, m)
	}
	last = steps[len(steps)-1].plan
	if g := steps[len(steps)-1].goodput; g < 0.9*l.rate {
		t.Errorf("after the cap lifted: %v, %.0f MB/s of %.0f", last, g/1e6, l.rate/1e6)
	}

	// A second back-off holds its cap twice as long: 60 s.
	p = c.Observe(Sample{Elapsed: last.Interval, Bytes: 1 << 20, RTT: l.rtt, Errors: 1})
	capped := last.Streams - 1
	steps = simFor(t, c, l, p, 56*time.Second)
	if m := maxStreams(steps); m > capped {
		t.Errorf("grew to %d streams within 56 s of a second back-off at %d", m, last.Streams)
	}
	// Then the cap lifts. Here the capped plan already fills the link (its
	// round trips show the queue), so lifting it need not add streams.
	steps = simFor(t, c, l, steps[len(steps)-1].plan, 12*time.Second)
	last = steps[len(steps)-1].plan
	if c.errCap != 0 || !strings.Contains(last.Reason, "no errors for 1m0s") {
		t.Errorf("cap of %d streams not lifted 64 s after a second back-off: %v", capped, last)
	}
	if m := maxStreams(steps); m <= capped && steps[len(steps)-1].goodput < 0.99*l.rate {
		t.Errorf("the lifted cap left %v at %.0f MB/s of %.0f", last, steps[len(steps)-1].goodput/1e6, l.rate/1e6)
	}
}

func TestErrorsBackOffToMin(t *testing.T) {
	l := &link{rate: 1 * gbit, rtt: 100 * time.Millisecond}
	errs := map[int]int{}
	for i := 40; i < 100; i += 2 {
		errs[i] = 1
	}
	c := New(Config{MinStreams: 2})
	steps := sim(t, c, l, 100, errs)
	if last := steps[len(steps)-1].plan; last.Streams != 2 {
		t.Errorf("after persistent errors: %v, want the minimum of 2 streams", last)
	}
}

func TestFixed(t *testing.T) {
	c := New(Config{Fixed: 5, StreamsPerConn: 4})
	l := &link{rate: 10 * gbit, rtt: 100 * time.Millisecond}
	steps := sim(t, c, l, 100, map[int]int{10: 3, 50: 1})
	for _, s := range steps {
		if s.plan.Streams != 5 || s.plan.Conns != 2 {
			t.Fatalf("fixed at 5 streams: got %v", s.plan)
		}
	}
	last := steps[len(steps)-1].plan
	// Bytes are whole: the reported goodput may round differently.
	if want := int64(l.goodput(last)); last.Goodput < want-16 || last.Goodput > want+16 || last.RTT != l.rtt {
		t.Errorf("fixed plan reports %d B/s at rtt %v, want %d at %v", last.Goodput, last.RTT, want, l.rtt)
	}
}

func TestBounds(t *testing.T) {
	t.Run("max", func(t *testing.T) {
		c := New(Config{MaxStreams: 4})
		steps := sim(t, c, &link{rate: 10 * gbit, rtt: 100 * time.Millisecond}, 100, nil)
		if last := steps[len(steps)-1].plan; last.Streams != 4 {
			t.Errorf("bounded by 4 on a path that wants 60: holding %v", last)
		}
	})
	t.Run("min", func(t *testing.T) {
		c := New(Config{MinStreams: 3})
		steps := sim(t, c, &link{rate: 10 * gbit, rtt: 100 * time.Microsecond, connCap: 300e6, cpuCap: 300e6}, 100, map[int]int{60: 1})
		if last := steps[len(steps)-1].plan; last.Streams != 3 {
			t.Errorf("at least 3 streams on a CPU-bound LAN: holding %v", last)
		}
	})
	t.Run("single connection", func(t *testing.T) {
		c := New(Config{MaxConns: 1})
		if c.cfg.MaxStreams != defaultStreamsPerConn {
			t.Errorf("one connection of %d channels allows %d streams", defaultStreamsPerConn, c.cfg.MaxStreams)
		}
		sim(t, c, &link{rate: 10 * gbit, rtt: 100 * time.Millisecond}, 100, nil)
	})
	t.Run("min above max", func(t *testing.T) {
		c := New(Config{MinStreams: 50, MaxStreams: 10})
		if p := c.Start(time.Millisecond); p.Streams != 10 {
			t.Errorf("min 50 max 10: start at %v, want 10", p)
		}
	})
}

func TestStart(t *testing.T) {
	for _, tc := range []struct {
		rtt         time.Duration
		cfg         Config
		streams     int
		conns       int
		interval    time.Duration
		reasonMatch string
	}{
		{0, Config{}, 1, 1, minInterval, "unknown"},
		{100 * time.Microsecond, Config{}, 1, 1, minInterval, "rtt"},
		{5 * time.Millisecond, Config{}, 1, 1, minInterval, "rtt"},
		{10 * time.Millisecond, Config{}, 2, 1, minInterval, "rtt"},
		{50 * time.Millisecond, Config{}, 4, 1, 250 * time.Millisecond, "rtt"},
		{100 * time.Millisecond, Config{}, 7, 2, 400 * time.Millisecond, "rtt"},
		{300 * time.Millisecond, Config{StreamsPerConn: 8}, 16, 2, 1200 * time.Millisecond, "rtt"},
		{time.Second, Config{}, 8, 2, maxInterval, "rtt"},
		{time.Second, Config{MaxConns: 1}, 4, 1, maxInterval, "rtt"},
		// An earlier measurement overrides the guess, connections
		// following StreamsPerConn, within the bounds.
		{50 * time.Millisecond, Config{Start: 12}, 12, 3, 250 * time.Millisecond, "earlier measurement"},
		{100 * time.Microsecond, Config{Start: 2}, 2, 1, minInterval, "earlier measurement"},
		{50 * time.Millisecond, Config{Start: 100}, 32, 8, 250 * time.Millisecond, "earlier measurement"},
		{50 * time.Millisecond, Config{Start: 8, Fixed: 2}, 2, 1, 250 * time.Millisecond, "fixed"},
	} {
		p := New(tc.cfg).Start(tc.rtt)
		if p.Streams != tc.streams || p.Conns != tc.conns || p.Interval != tc.interval ||
			!strings.Contains(p.Reason, tc.reasonMatch) {
			t.Errorf("Start(%v) with %+v = %v every %v, want %d streams on %d every %v",
				tc.rtt, tc.cfg, p, p.Interval, tc.streams, tc.conns, tc.interval)
		}
	}
}

// TestShareSplitsTheGuess: files starting beside each other split the
// guessed first plan, at least one stream each, and it stays theirs to
// probe from; a fixed or measured start is not split.
func TestShareSplitsTheGuess(t *testing.T) {
	for _, tc := range []struct {
		rtt     time.Duration
		cfg     Config
		share   int
		streams int
	}{
		{50 * time.Millisecond, Config{}, 0, 4},
		{50 * time.Millisecond, Config{}, 1, 4},
		{50 * time.Millisecond, Config{}, 2, 2},
		{50 * time.Millisecond, Config{}, 5, 1},
		{100 * time.Millisecond, Config{}, 3, 3},
		{time.Millisecond, Config{}, 4, 1},
		{50 * time.Millisecond, Config{Fixed: 6}, 3, 6},
		{50 * time.Millisecond, Config{Start: 12}, 3, 12},
	} {
		c := New(tc.cfg)
		c.Share(tc.share)
		if p := c.Start(tc.rtt); p.Streams != tc.streams {
			t.Errorf("Share(%d), Start(%v) with %+v = %v, want %d streams", tc.share, tc.rtt, tc.cfg, p, tc.streams)
		}
		// Starting over keeps the share.
		if p := c.Start(tc.rtt); p.Streams != tc.streams {
			t.Errorf("Share(%d), second Start(%v) with %+v = %v, want %d streams", tc.share, tc.rtt, tc.cfg, p, tc.streams)
		}
	}
}

// TestNoProbeNearTheEnd: a probe that could not be measured before the
// copy ends is not started: the plan holds. With the same measurements
// and more left to copy, the controller probes.
func TestNoProbeNearTheEnd(t *testing.T) {
	const rtt = 50 * time.Millisecond
	run := func(remaining int64) Plan {
		c := New(Config{})
		p := c.Start(rtt)
		// Window-limited goodput: the streams' windows over the round trip.
		rate := float64(p.Streams) * defaultChannelWindow / rtt.Seconds() * 0.9
		// Until the first decision: the start's set-up settles, then
		// measureSamples intervals measure it.
		for i := 0; i < 20 && strings.HasPrefix(p.Reason, "start"); i++ {
			p = c.Observe(Sample{Elapsed: p.Interval, Bytes: int64(rate * p.Interval.Seconds()), RTT: rtt, Remaining: remaining})
		}
		return p
	}
	start := New(Config{}).Start(rtt)
	if p := run(1 << 30); p.Streams <= start.Streams || !strings.Contains(p.Reason, "probing") {
		t.Errorf("1 GiB left: %v, want a probe above %d streams", p, start.Streams)
	}
	if p := run(0); p.Streams <= start.Streams {
		t.Errorf("nothing known of what is left: %v, want a probe above %d streams", p, start.Streams)
	}
	if p := run(4 << 20); p.Streams != start.Streams || !strings.Contains(p.Reason, "holding") {
		t.Errorf("4 MiB left: %v, want %d streams held", p, start.Streams)
	}
}

// TestStartFromEarlierMeasurement: a start taken from an earlier
// measurement of the path gets there sooner than the guess does, and one
// that was too large is trimmed towards the bandwidth-delay product as a
// guess would be.
func TestStartFromEarlierMeasurement(t *testing.T) {
	fast := link{rate: 10 * gbit, rtt: 50 * time.Millisecond}
	guessed := converged(sim(t, New(Config{}), &fast, 100, nil), fast.achievable(New(Config{})), 0.9)
	fast = link{rate: 10 * gbit, rtt: 50 * time.Millisecond}
	c := New(Config{Start: 32})
	started := converged(sim(t, c, &fast, 100, nil), fast.achievable(c), 0.9)
	if started < 0 || guessed < 0 || started >= guessed {
		t.Errorf("reached 90%% at interval %d from an earlier measurement and %d from the guess, want sooner", started, guessed)
	}

	slow := link{rate: 1 * gbit, rtt: 50 * time.Millisecond}
	steps := sim(t, New(Config{Start: 16}), &slow, 200, nil)
	// Four windows carry 1 Gbit/s at 50 ms; the trim adds 15 % headroom.
	if last := steps[len(steps)-1].plan; last.Streams > 5 {
		t.Errorf("started at 16 streams on a 1 Gbit/s, 50 ms path: holding %v, want at most 5 streams", last)
	}
}

func TestObserveBeforeStart(t *testing.T) {
	c := New(Config{})
	p := c.Observe(Sample{Elapsed: time.Second, Bytes: 1 << 20, RTT: 100 * time.Millisecond})
	if want := New(Config{}).Start(100 * time.Millisecond); p.Streams != want.Streams || p.RTT != 100*time.Millisecond {
		t.Errorf("Observe before Start: %v, want the start plan for 100ms, %v", p, want)
	}
}

func TestAppLimitedSamplesDecideNothing(t *testing.T) {
	c := New(Config{})
	start := c.Start(100 * time.Millisecond)
	for i := range 100 {
		// Wildly varying goodput while the pipeline is short of work.
		p := c.Observe(Sample{Elapsed: start.Interval, Bytes: int64(i%7) << 20, RTT: 100 * time.Millisecond, AppLimited: true})
		if p.Streams != start.Streams || p.Conns != start.Conns {
			t.Fatalf("interval %d: app-limited samples changed the plan to %v", i, p)
		}
	}
}

func TestReprobesWhenThePathChanges(t *testing.T) {
	// A path shared with other traffic: 100 Mbit/s at first, the whole
	// 1 Gbit/s once the competition leaves.
	l := &link{rate: 100 * mbit, rtt: 100 * time.Millisecond}
	c := New(Config{})
	steps := sim(t, c, l, 60, nil)
	before := steps[len(steps)-1].plan
	if n := changes(steps[30:]); n != 0 {
		t.Fatalf("precondition: %d changes on the 100 Mbit/s plateau", n)
	}
	l.rate = 1 * gbit
	steps = simFrom(t, c, l, before, 100, nil)
	if at := converged(steps, l.rate, 0.9); at < 0 || at > 30 {
		t.Errorf("after the path sped up: 90%% of the link from interval %d; holding %v", at, steps[len(steps)-1].plan)
	}
}

// TestHoldsThroughADip: a held plan's goodput that falls by two fifths
// for two intervals and comes back (a loss on one of a download's sender
// connections, whose cubic halves its window) changes nothing; probing
// then added connections into the queue that had overflowed. A fall that
// lasts is still followed (TestTrimsWhenThePathSlows).
func TestHoldsThroughADip(t *testing.T) {
	l := &link{rate: 1 * gbit, rtt: 100 * time.Millisecond, connBytes: 3.6e6}
	c := New(Config{ConnBytes: 3.6e6})
	steps := sim(t, c, l, 60, nil)
	held := steps[len(steps)-1].plan
	if n := changes(steps[40:]); n != 0 {
		t.Fatalf("precondition: %d changes on the plateau", n)
	}
	p := held
	for i := range 8 {
		l.rate = 1 * gbit
		if i == 1 || i == 2 {
			l.rate = 0.6 * gbit
		}
		p = c.Observe(Sample{Elapsed: p.Interval, Bytes: int64(l.deliver(p) * p.Interval.Seconds()), RTT: l.rttUnder(p)})
		if p.Streams != held.Streams || p.Conns != held.Conns || strings.Contains(p.Reason, "moved") {
			t.Fatalf("interval %d of a two-interval dip: the plan moved from %v to %v", i, held, p)
		}
	}
}

func TestTrimsWhenThePathSlows(t *testing.T) {
	// Competing traffic takes half the link: the held windows would only
	// queue, so the plan shrinks to the new bandwidth-delay product, and
	// grows back when the competition leaves.
	l := &link{rate: 1 * gbit, rtt: 100 * time.Millisecond}
	c := New(Config{})
	steps := sim(t, c, l, 60, nil)
	full := steps[len(steps)-1].plan
	l.rate = 500 * mbit
	steps = simFrom(t, c, l, full, 60, nil)
	half := steps[len(steps)-1].plan
	windows := l.rate * l.rtt.Seconds() / w
	if need := int(windows*(1+headroom) + min(1, windows)); half.Streams > need+1 || half.Streams >= full.Streams {
		t.Errorf("at half the rate: holding %v, was %d streams, want about %d", half, full.Streams, need+1)
	}
	if n := changes(steps[40:]); n != 0 {
		t.Errorf("%d plan changes after settling at half the rate", n)
	}
	l.rate = 1 * gbit
	steps = simFrom(t, c, l, half, 60, nil)
	// Back to the plan held before, or one stream either side of it: the
	// path is the same, the way there differs.
	if last := steps[len(steps)-1]; last.plan.Streams < full.Streams-1 || last.plan.Streams > full.Streams+1 || last.goodput < 0.9*l.rate {
		t.Errorf("back at the full rate: holding %v, want %d streams again", last.plan, full.Streams)
	}
}

func TestParkedWhenNothingMoves(t *testing.T) {
	// A stalled transfer reports zero bytes: no probe can gain, so the
	// controller holds rather than growing without evidence.
	c := New(Config{})
	start := c.Start(50 * time.Millisecond)
	p := start
	grown := 0
	for range 200 {
		p = c.Observe(Sample{Elapsed: p.Interval, RTT: 50 * time.Millisecond})
		grown = max(grown, p.Streams)
	}
	if p.Streams != start.Streams || grown > 2*start.Streams {
		t.Errorf("with no goodput: holding %v after trying %d streams, want the start's %d", p, grown, start.Streams)
	}
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{
		{[]float64{3}, 3},
		{[]float64{9, 1, 5}, 5},
		{[]float64{4, 1, 3, 2}, 2.5},
	} {
		if got := median(tc.in); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestPlanString(t *testing.T) {
	p := Plan{Streams: 7, Conns: 2, InFlight: w, Goodput: 120 << 20, RTT: 100 * time.Millisecond, Reason: "plateau"}
	want := "7 streams on 2 connections, 2 MiB in flight each, 120.0 MiB/s, rtt 100ms: plateau"
	if got := p.String(); got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

func TestLANConnectionsStopAtCores(t *testing.T) {
	// Every connection adds 100 MB/s, without end: on a LAN the controller
	// still opens no more connections than the host has cores, which on a
	// real host they would only contend for.
	lan := &link{rate: 10 * gbit, rtt: 100 * time.Microsecond, connCap: 100e6}
	steps := sim(t, New(Config{Cores: 2}), lan, 300, nil)
	for _, s := range steps {
		if s.plan.Conns > 2 {
			t.Fatalf("a LAN with 2 cores got %v", s.plan)
		}
	}
	if last := steps[len(steps)-1].plan; last.Conns != 2 {
		t.Errorf("holding %v on a LAN where 2 connections carry twice one, want 2 connections", last)
	}
	// Where the windows are the limit, connections are not a matter of
	// cores: each brings its own TCP window and congestion control.
	wan := &link{rate: 10 * gbit, rtt: 20 * time.Millisecond, connCap: 200e6, cpuCap: 800e6}
	steps = sim(t, New(Config{Cores: 2}), wan, 300, nil)
	if last := steps[len(steps)-1].plan; last.Conns < 4 {
		t.Errorf("holding %v at 20 ms where 4 CPU-bound connections carry 800 MB/s, want at least 4", last)
	}
}

// stockConn is what one connection with Debian's stock buffers keeps in
// flight (tcp_wmem max 4 MiB, seen at 100 ms: 31.5 MB/s at 114 ms).
const stockConn = 3.6e6

// TestBufferBoundConnections: where each connection's socket buffers,
// not its channels' windows, bound what it carries (stock kernels), the
// start opens the connections the guessed path needs at once, and no
// probe adds channels to connections whose buffers are full. Without
// ConnBytes the controller starts on two connections and reaches the
// link only seconds later through probes, whose late connections ramp
// slowly beside the full ones.
func TestBufferBoundConnections(t *testing.T) {
	for _, tc := range []struct {
		rtt   time.Duration
		conns int // the start's connections, at least
	}{
		{50 * time.Millisecond, 2},
		{100 * time.Millisecond, 4},
		{200 * time.Millisecond, 7},
	} {
		t.Run(tc.rtt.String(), func(t *testing.T) {
			l := link{rate: 1 * gbit, rtt: tc.rtt, connBytes: stockConn, lateJoin: 30}
			c := New(Config{ConnBytes: stockConn})
			start := c.Start(l.rtt)
			if start.Conns < tc.conns {
				t.Fatalf("start %v, want at least %d connections", start, tc.conns)
			}
			if g := l.goodput(start); g < 0.9*l.rate {
				t.Errorf("start %v carries %.0f MB/s, want 90%% of the link's %.0f", start, g/1e6, l.rate/1e6)
			}
			steps := simFrom(t, c, &l, start, 200, nil)
			for i := 1; i < len(steps); i++ {
				a, b := steps[i-1].plan, steps[i].plan
				if b.Conns == a.Conns && b.Streams > a.Streams && c.buffersBind(shape{a.Streams, a.Conns}) {
					t.Errorf("interval %d: %v to %v adds channels to connections whose buffers bind", i, a, b)
				}
			}
			want := min(l.achievable(c), l.rate)
			if at := converged(steps, want, 0.9); at < 0 || at > 3 {
				t.Errorf("reached 90%% of %.0f MB/s at interval %d, want by 3; last %v", want/1e6, at, steps[len(steps)-1].plan)
			}
			if last := steps[len(steps)-1]; last.goodput < 0.95*want {
				t.Errorf("holding %v at %.0f MB/s, want 95%% of %.0f", last.plan, last.goodput/1e6, want/1e6)
			}

			// The same link without ConnBytes: what the windows alone
			// suggest is short of it for seconds.
			l = link{rate: 1 * gbit, rtt: tc.rtt, connBytes: stockConn, lateJoin: 30}
			old := New(Config{})
			steps = sim(t, old, &l, 200, nil)
			if at := converged(steps, want, 0.9); at >= 0 && at <= 3 {
				t.Errorf("without ConnBytes the link was full by interval %d: the test shows nothing", at)
			}
		})
	}
}

// TestTrimKeepsConnectionsFull: a start that overshoots a slower path is
// trimmed, but never to fewer windows than fill its connections' buffers.
func TestTrimKeepsConnectionsFull(t *testing.T) {
	l := link{rate: 300 * mbit, rtt: 100 * time.Millisecond, connBytes: stockConn}
	c := New(Config{ConnBytes: stockConn})
	steps := sim(t, c, &l, 200, nil)
	for _, st := range steps {
		if per := c.connStreams() + 1; st.plan.Streams < st.plan.Conns*per {
			t.Errorf("%v: fewer than %d streams per connection", st.plan, per)
		}
	}
	if last := steps[len(steps)-1]; last.goodput < 0.95*l.rate {
		t.Errorf("holding %v at %.0f MB/s, want the link's %.0f", last.plan, last.goodput/1e6, l.rate/1e6)
	}
}

// TestBuffersBindProbesConnections: on a path faster than the start's
// connections' buffers carry, the probe adds connections; channels on
// connections whose buffers are full would carry nothing more.
func TestBuffersBindProbesConnections(t *testing.T) {
	l := link{rate: 10 * gbit, rtt: 100 * time.Millisecond, connBytes: stockConn}
	c := New(Config{ConnBytes: stockConn})
	steps := sim(t, c, &l, 100, nil)
	for i := 1; i < len(steps); i++ {
		a, b := steps[i-1].plan, steps[i].plan
		if b.Conns == a.Conns && b.Streams > a.Streams {
			t.Errorf("interval %d: %v to %v adds channels to connections whose buffers bind", i, a, b)
		}
	}
	if last := steps[len(steps)-1].plan; last.Conns != c.cfg.MaxConns {
		t.Errorf("holding %v, want all %d connections", last, c.cfg.MaxConns)
	}
}

// TestSettlesFromWhenStreamsRun: a plan's settling time starts when its
// streams are all open, not at the change. On a long path the first
// plan's connections take a second and more to open, and the slow
// starts that follow are no measurement of the plan: taken for one, they
// made the controller probe a full link.
func TestSettlesFromWhenStreamsRun(t *testing.T) {
	const rtt = 100 * time.Millisecond
	c := New(Config{ConnBytes: stockConn})
	p := c.Start(rtt)
	start := p
	// Four intervals while the connections dial and the files open.
	for range 4 {
		p = c.Observe(Sample{Elapsed: p.Interval, RTT: rtt, AppLimited: true, Opening: p.Streams})
	}
	// Then slow start, and the link full with a queue of 15 ms.
	rates := []float64{4e6, 30e6, 80e6}
	for i := range 40 {
		r, q := 120e6, 15*time.Millisecond
		if i < len(rates) {
			r, q = rates[i], 0
		}
		p = c.Observe(Sample{Elapsed: p.Interval, Bytes: int64(r * p.Interval.Seconds()), RTT: rtt + q})
		if p.Streams > start.Streams || p.Conns > start.Conns {
			t.Fatalf("interval %d: %v; the slow start after opening was taken for the plan's goodput", i, p)
		}
	}
}

// TestSmallCopiesKeepTheConnections: a copy too small to pay for new
// connections starts on what the windows ask for, even where one
// connection's buffers cannot carry the path; a large one, or one of
// unknown size, opens the connections at once.
func TestSmallCopiesKeepTheConnections(t *testing.T) {
	for _, tc := range []struct {
		size  int64
		share int
		conns int
	}{
		{0, 0, 5},
		{1 << 30, 0, 5},
		{10 << 20, 0, 2},
		{10 << 20, 5, 1},  // five 10 MiB files side by side: 50 MiB
		{100 << 20, 5, 3}, // five 100 MiB files: 3 streams each
	} {
		c := New(Config{ConnBytes: stockConn})
		c.Share(tc.share)
		c.Size(tc.size)
		if p := c.Start(100 * time.Millisecond); p.Conns != tc.conns {
			t.Errorf("Size(%d), Share(%d): start %v, want %d connections", tc.size, tc.share, p, tc.conns)
		}
	}
}

// TestLossyPathGetsMoreConnections: where each connection's congestion
// control, not its windows or buffers, holds it (a long path with a
// little loss: each cubic connection recovers for seconds from every
// loss), connections are probed for beyond the host's cores, up to
// MaxConns, while goodput rises.
func TestLossyPathGetsMoreConnections(t *testing.T) {
	// 7 MB/s per connection: 16 carry 112 MB/s of the 125.
	l := link{rate: 1 * gbit, rtt: 100 * time.Millisecond, connBytes: stockConn, connCap: 7e6}
	c := New(Config{ConnBytes: stockConn, Cores: 2})
	steps := sim(t, c, &l, 200, nil)
	last := steps[len(steps)-1]
	if last.plan.Conns != c.cfg.MaxConns || last.goodput < 0.95*16*7e6 {
		t.Errorf("holding %v at %.0f MB/s, want %d connections carrying %.0f", last.plan, last.goodput/1e6, c.cfg.MaxConns, 16*7e6/1e6)
	}
	// On a LAN the same shortfall is the CPU's: connections stop at the cores.
	l = link{rate: 10 * gbit, rtt: 200 * time.Microsecond, connCap: 300e6, cpuCap: 300e6}
	c = New(Config{ConnBytes: stockConn, Cores: 2})
	steps = sim(t, c, &l, 200, nil)
	for _, st := range steps {
		if st.plan.Conns > 2 {
			t.Fatalf("%v on a LAN with 2 cores", st.plan)
		}
	}
}

// TestLossyPathGrowsPastTheLossyPlan: at a higher loss rate (0.1 % at
// 100 ms: each cubic connection carries under 1 MB/s) the lossy plan's
// connections leave the path mostly empty, and probes add half as many
// again while goodput rises, up to LossyMaxConns; at a lower one, where
// the lossy plan's connections nearly fill the link, a probe gains less
// than the margin and the lossy plan is held.
func TestLossyPathGrowsPastTheLossyPlan(t *testing.T) {
	for _, tc := range []struct {
		name    string
		connCap float64
		conns   int // the plan held at the end
	}{
		{"0.1 % loss", 0.6e6, 2 * defaultLossyConns},
		{"0.01 % loss", 5e6, defaultLossyConns},
	} {
		l := link{rate: 1 * gbit, rtt: 100 * time.Millisecond, connBytes: stockConn, connCap: tc.connCap,
			limitedBy: "loss", noise: 0.03}
		c := New(Config{ConnBytes: stockConn, Cores: 2})
		steps := sim(t, c, &l, 150, nil)
		last := steps[len(steps)-1]
		if last.plan.Conns != tc.conns || last.plan.Streams < last.plan.Conns {
			t.Errorf("%s: holding %v, want %d connections, a stream each at least", tc.name, last.plan, tc.conns)
		}
		if want := 0.95 * l.goodput(Plan{Streams: tc.conns, Conns: tc.conns, InFlight: c.cfg.ChannelWindow}); last.goodput < want {
			t.Errorf("%s: %.1f MB/s at the end, want %.1f", tc.name, last.goodput/1e6, want/1e6)
		}
	}
	// The connections the user bounded, and bbr's (job), stay bounded.
	l := link{rate: 1 * gbit, rtt: 100 * time.Millisecond, connBytes: stockConn, connCap: 0.6e6, limitedBy: "loss"}
	c := New(Config{ConnBytes: stockConn, Cores: 2, LossyConns: 16, LossyMaxConns: 16})
	for _, st := range sim(t, c, &l, 150, nil) {
		if st.plan.Conns > 16 {
			t.Fatalf("%v with LossyMaxConns 16", st.plan)
		}
	}
}

func TestCongestedShare(t *testing.T) {
	for _, tc := range []struct {
		conns []ConnSample
		share float64
		ok    bool
	}{
		{nil, 0, false},
		{[]ConnSample{{LimitedBy: "", Bytes: 0}}, 0, false},
		{[]ConnSample{{LimitedBy: "loss", Bytes: 3}, {LimitedBy: "cwnd", Bytes: 1}, {LimitedBy: "sndbuf", Bytes: 4}}, 0.5, true},
		{[]ConnSample{{LimitedBy: "recv", Bytes: 10}}, 0, true},
	} {
		if share, ok := congestedShare(tc.conns); share != tc.share || ok != tc.ok {
			t.Errorf("congestedShare(%v) = %v, %v; want %v, %v", tc.conns, share, ok, tc.share, tc.ok)
		}
	}
}

// TestLossyPathOpensConnectionsAtOnce: where the connections lose
// segments from the start on a long path, the plan after two such
// intervals past the start's settling opens every connection at once,
// and keeps them even though the start, measured during the slow starts,
// looked faster; the same path telling no loss doubles its connections a
// probe at a time, and a LAN telling loss stays at its cores.
func TestLossyPathOpensConnectionsAtOnce(t *testing.T) {
	// 3 MB/s per connection once the loss has brought each down, four
	// times that for the first intervals: the start's five connections
	// measure more than sixteen do later.
	lossy := func() link {
		return link{rate: 1 * gbit, rtt: 100 * time.Millisecond, connBytes: stockConn, connCap: 3e6,
			burst: 8, limitedBy: "loss"}
	}
	l := lossy()
	c := New(Config{ConnBytes: stockConn, Cores: 2})
	steps := sim(t, c, &l, 60, nil)
	first := -1
	for i := 1; i < len(steps); i++ {
		if steps[i].plan.Conns != steps[0].plan.Conns {
			first = i
			break
		}
	}
	if first < 0 || steps[first].plan.Conns != c.cfg.LossyConns || c.cfg.LossyConns <= c.cfg.MaxConns {
		t.Fatalf("first change %d: %v, want %d connections at once, more than the %d of a path without loss",
			first, steps[max(first, 0)].plan, c.cfg.LossyConns, c.cfg.MaxConns)
	}
	// The start settles for 12 round trips (three intervals of 4), then
	// two intervals with loss decide.
	if first > 5 {
		t.Errorf("the connections opened at interval %d, want by 5", first)
	}
	// The first of them asked for the lossy plan's connections on standby.
	if sb := steps[first-1].plan.Standby; sb != c.cfg.LossyConns || steps[first-2].plan.Standby != 0 {
		t.Errorf("standby %d, then %d before the lossy plan; want 0, then %d", steps[first-2].plan.Standby, sb, c.cfg.LossyConns)
	}
	for _, st := range steps[first:] {
		if st.plan.Conns < c.cfg.LossyConns {
			t.Fatalf("%v after opening %d connections for the loss", st.plan, c.cfg.LossyConns)
		}
		// What the streams keep in flight is at most twice the path's
		// product, not a window each.
		bdp := l.rate * l.rtt.Seconds()
		if total := float64(st.plan.Streams * int(st.plan.InFlight)); st.plan.InFlight >= c.cfg.ChannelWindow || total > lossyInFlight*bdp {
			t.Fatalf("%v: %.0f bytes in flight, want at most %d times the product, %.0f", st.plan, total, lossyInFlight, bdp)
		}
	}

	// Connections the user bounded (--connections 8) stay bounded.
	l = lossy()
	c = New(Config{ConnBytes: stockConn, Cores: 2, MaxConns: 8})
	most := 0
	for _, st := range sim(t, c, &l, 60, nil) {
		most = max(most, st.plan.Conns)
	}
	if most != 8 {
		t.Errorf("with MaxConns 8 the lossy path's plans reached %d connections, want 8", most)
	}
	for _, st := range sim(t, New(Config{ConnBytes: stockConn, Cores: 2, MaxConns: 8}), &l, 60, nil) {
		if st.plan.Standby != 0 {
			t.Fatalf("%v asks for %d connections on standby where a lossy plan takes no more than others", st.plan, st.plan.Standby)
		}
	}

	// No loss told: the probes double.
	l = lossy()
	l.limitedBy = "cwnd"
	c = New(Config{ConnBytes: stockConn, Cores: 2})
	steps = sim(t, c, &l, 60, nil)
	for _, st := range steps {
		if st.plan.Standby != 0 {
			t.Fatalf("%v asks for %d connections on standby without loss", st.plan, st.plan.Standby)
		}
	}
	for i := 1; i < len(steps); i++ {
		if steps[i].plan.Conns != steps[0].plan.Conns {
			if want := 2 * steps[0].plan.Conns; steps[i].plan.Conns != want {
				t.Errorf("without loss the first probe opened %v, want %d connections", steps[i].plan, want)
			}
			break
		}
	}

	// A copy too small to pay for connections probes as before.
	l = lossy()
	c = New(Config{ConnBytes: stockConn, Cores: 2})
	c.Size(10 << 20)
	for _, st := range sim(t, c, &l, 60, nil) {
		if strings.Contains(st.plan.Reason, "lose segments") {
			t.Fatalf("%v for a 10 MiB copy", st.plan)
		}
	}

	// A full link that drops from its queue: its losses are no reason
	// for more connections.
	l = lossy()
	l.rate = 100 * mbit
	c = New(Config{ConnBytes: stockConn, Cores: 2})
	for _, st := range sim(t, c, &l, 60, nil) {
		if strings.Contains(st.plan.Reason, "lose segments") {
			t.Fatalf("%v on a full 100 Mbit/s link", st.plan)
		}
	}

	// A LAN: the loss is no reason to pass the cores.
	l = link{rate: 10 * gbit, rtt: 200 * time.Microsecond, connCap: 300e6, cpuCap: 300e6, limitedBy: "loss"}
	c = New(Config{ConnBytes: stockConn, Cores: 2})
	for _, st := range sim(t, c, &l, 100, nil) {
		if st.plan.Conns > 2 {
			t.Fatalf("%v on a LAN with 2 cores", st.plan)
		}
	}
}

// TestFullPathKeepsItsConnections: where the kernel tells that the
// connections were held by neither congestion control nor loss, and the
// start's connections, bound by their buffers, carry well short of what
// those allow, the path is full, even with no queue in the round trips:
// no connection probe. A faster link,
// where the buffers are what binds, is probed; and so is the full path
// where the kernel tells nothing.
func TestFullPathKeepsItsConnections(t *testing.T) {
	full := func() link {
		return link{rate: 1 * gbit, rtt: 100 * time.Millisecond, connBytes: stockConn, limitedBy: "recv", flatRTT: true}
	}
	conns := func(l link) int {
		c := New(Config{ConnBytes: stockConn, Cores: 2})
		most := 0
		for _, st := range sim(t, c, &l, 60, nil) {
			most = max(most, st.plan.Conns)
		}
		return most
	}
	if n := conns(full()); n != 5 {
		t.Errorf("a full 1 Gbit/s path at 100 ms went to %d connections, want the start's 5", n)
	}
	fast := full()
	fast.rate = 10 * gbit
	if n := conns(fast); n <= 5 {
		t.Errorf("a 10 Gbit/s path at 100 ms stayed at %d connections, where their buffers bind", n)
	}
	untold := full()
	untold.limitedBy = ""
	if n := conns(untold); n <= 5 {
		t.Errorf("a full path the kernel told nothing of stayed at %d connections: its probes are as before", n)
	}
}

// TestQueueMatrix runs the controller over the bench's emulator matrix at
// 100 ms and 1 Gbit/s: drop-tail queues of a quarter, a half, one and two
// bandwidth-delay products (bench/wanem --queue); stock socket buffers
// (about 3.6 MB in flight a connection, an ordinary user's), so that the
// plan must spread over connections, or buffers that leave the channels'
// windows the only bound (root's tuned kernel); the queue showing in the
// round trip (an upload's sender sees it) or not (a download's client
// times its requests). What a copy gets is what the link delivered, the
// plan changes' ramps included: over the first 10 s (a 1 GiB copy) it
// must be 90 % of the best any plan achieves there, and the plan must
// hold 95 % of it from then on.
func TestQueueMatrix(t *testing.T) {
	for _, flat := range []bool{false, true} {
		for _, connBytes := range []float64{3.6e6, 0} {
			for _, q := range []float64{0.25, 0.5, 1, 2} {
				name := fmt.Sprintf("queue %gbdp, %g MB a connection, flat RTT %v", q, connBytes/1e6, flat)
				t.Run(name, func(t *testing.T) {
					l := &link{rate: 1 * gbit, rtt: 100 * time.Millisecond, connBytes: connBytes, queue: q, flatRTT: flat}
					c := New(Config{ConnBytes: int64(connBytes)})
					want := l.achievable(c)
					p := c.Start(l.rtt)
					var elapsed time.Duration
					var early float64 // bytes delivered in the first 10 s
					var late []step
					for elapsed < time.Minute {
						checkPlan(t, c, p)
						got := l.deliver(p) * p.Interval.Seconds()
						if elapsed < 10*time.Second {
							early += got
						} else {
							late = append(late, step{p, l.goodput(p)})
						}
						elapsed += p.Interval
						s := Sample{Elapsed: p.Interval, Bytes: int64(got), RTT: l.rttUnder(p)}
						if by := l.limits(p); by != "" {
							s.Conns = []ConnSample{{Conn: 0, Bytes: s.Bytes, LimitedBy: by}}
						}
						p = c.Observe(s)
					}
					last := late[len(late)-1]
					t.Logf("first 10 s: %.1f MB/s of %.1f achievable; then from %d of %d intervals at 95%%; holding %v",
						early/10/1e6, want/1e6, converged(late, want, 0.95), len(late), last.plan)
					if early/10 < 0.9*want {
						t.Errorf("first 10 s at %.1f MB/s, below 90%% of the achievable %.1f", early/10/1e6, want/1e6)
					}
					if converged(late, want, 0.95) != 0 {
						t.Errorf("after 10 s the plan fell below 95%% of the achievable %.1f MB/s", want/1e6)
					}
				})
			}
		}
	}
}

// TestLinkShallowQueue pins the simulated link's queue model the matrix
// relies on.
func TestLinkShallowQueue(t *testing.T) {
	l := &link{rate: 1 * gbit, rtt: 100 * time.Millisecond, queue: 0.25}
	// 16 windows of 2 MiB on one connection: 33.6 MB in flight against a
	// BDP of 12.5 MB and 15.6 MB of room. The one connection saws from
	// 0.875 to 1.25 BDPs: the link idles an eighth of a third of each
	// tooth, about 2 % of the time.
	one := Plan{Streams: 16, Conns: 1, InFlight: 2 << 20}
	if use, queued, over := l.overflow(one); !over || math.Abs(use-0.979) > 0.001 || math.Abs(queued-0.0833) > 0.001 {
		t.Errorf("one connection over a quarter-BDP queue: use %.4f, queue %.4f BDP, over %v; want 0.979, 0.083, true", use, queued, over)
	}
	if g := l.goodput(one); math.Abs(g/l.rate-0.979) > 0.001 {
		t.Errorf("goodput %.1f MB/s, want 97.9 %% of the link", g/1e6)
	}
	if r := l.rttUnder(one); r < 100*time.Millisecond || r > 125*time.Millisecond {
		t.Errorf("round trip %v, want within the queue's 125 ms", r)
	}
	// Spread over 16 connections the cuts are shallower: the link stays full.
	many := Plan{Streams: 16, Conns: 16, InFlight: 2 << 20}
	if use, _, over := l.overflow(many); !over || use != 1 {
		t.Errorf("16 connections: use %.4f, over %v; want a full link that overflows", use, over)
	}
	if by := l.limits(many); by != "loss" {
		t.Errorf("an overflowing queue tells %q, want loss", by)
	}
	// Windows within the BDP plus the queue lose nothing and queue what
	// exceeds the BDP.
	fits := Plan{Streams: 7, Conns: 1, InFlight: 2 << 20} // 14.7 MB
	if _, _, over := l.overflow(fits); over || l.limits(fits) != "" {
		t.Errorf("14.7 MB in flight overflows a 15.6 MB path")
	}
	if r := l.rttUnder(fits); r != time.Duration(7*(2<<20)/l.rate*float64(time.Second)) {
		t.Errorf("round trip %v with 14.7 MB in flight, want 117 ms", r)
	}
}

// TestInFlightSharesTheProduct: a start sized by its connections' buffers
// keeps 1.25 times the guessed product in flight, not a window for each
// of its streams; a short path's streams keep a window each; a plan of
// more streams than the best measured keeps the best one's share each.
func TestInFlightSharesTheProduct(t *testing.T) {
	const w = defaultChannelWindow
	c := New(Config{ConnBytes: 3_600_000})
	p := c.Start(100 * time.Millisecond)
	total := float64(p.Streams) * float64(p.InFlight)
	if bdp := guessRate * 0.1; p.Streams*w <= int(2*bdp) || total < bdp || total > 1.5*bdp {
		t.Errorf("start %v: %.0f bytes in flight in all, want the product %.0f and at most half as much again", p, total, bdp)
	}
	if p.InFlight >= w {
		t.Errorf("start %v: a window for each stream", p)
	}

	// A product under a window: the server's work, not the round trip,
	// sets a request's time there.
	if p := New(Config{}).Start(10 * time.Millisecond); p.InFlight != w {
		t.Errorf("10 ms: %v, want a window for each stream", p)
	}

	c = New(Config{ConnBytes: 3_600_000})
	c.Start(100 * time.Millisecond)
	c.minRTT = 100 * time.Millisecond
	c.measured = []measurement{{sh: shape{15, 5}, rate: 130e6}}
	c.cur = shape{15, 5}
	best := c.inFlightPerStream()
	c.cur = shape{30, 10}
	if probe := c.inFlightPerStream(); probe != best {
		t.Errorf("twice the best plan's streams keep %d bytes each, the best %d", probe, best)
	}
	c.cur = shape{5, 5}
	if fewer := c.inFlightPerStream(); fewer <= best {
		t.Errorf("a third of the best plan's streams keep %d bytes each, no more than its %d", fewer, best)
	}
}

// TestProbeKeptAtTheEnd: when the copy ends before another probe could
// be measured, a probe that moved about what its base did is kept; one
// that moved clearly less is given up for the base.
func TestProbeKeptAtTheEnd(t *testing.T) {
	for _, tc := range []struct {
		probeRate float64
		keep      bool
	}{{108e6, true}, {80e6, false}} {
		rtt := 100 * time.Millisecond
		c := New(Config{ConnBytes: 3_600_000})
		p := c.Start(rtt)
		base := p
		observe := func(rate float64, remaining int64) {
			p = c.Observe(Sample{Elapsed: p.Interval, Bytes: int64(rate * p.Interval.Seconds()), RTT: rtt, Remaining: remaining})
		}
		for i := 0; i < 20 && !strings.HasPrefix(p.Reason, "probing"); i++ {
			observe(117e6, 1<<30)
		}
		if !strings.HasPrefix(p.Reason, "probing") {
			t.Fatalf("no probe from %v: %v", base, p)
		}
		probe := p
		for i := 0; i < 20 && p.Reason == probe.Reason; i++ {
			observe(tc.probeRate, 100<<20)
		}
		kept := p.Streams == probe.Streams && p.Conns == probe.Conns
		if !strings.Contains(p.Reason, "holding") || kept != tc.keep {
			t.Errorf("probe %v measured at %.0f MB/s against %.0f with 100 MiB left: %v, want the probe kept %v",
				probe, tc.probeRate/1e6, 117.0, p, tc.keep)
		}
	}
}
