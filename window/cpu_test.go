package window

import (
	"slices"
	"testing"
	"time"
)

// simWith is simHooked from Start, with hook filling in what link does
// not model (Sample.Conns, Sample.CPU) for each interval's plan and
// sample.
func simWith(t *testing.T, c *Controller, l *link, n int, hook func(p Plan, s *Sample)) []step {
	t.Helper()
	return simHooked(t, c, l, c.Start(l.rtt), n, func(_ int, p Plan, s *Sample) { hook(p, s) })
}

// cpuHost is a copy bound by CPU: both ends' crypto and copies on the
// cores of one host (loopback), or of this end alone. Each connection
// and each stream beyond the first raises the CPU per byte of both ends
// (more sshd processes, context switches, smaller writes), so past one
// connection more of them carry less.
type cpuHost struct {
	cores float64 // the host's CPUs
	// own and far are the CPU seconds per byte of this process and of
	// the far end with one stream on one connection; far is 0 where the
	// far end runs elsewhere, and counted in cpu where it runs in this
	// process (hpncp bench --embedded).
	own, far float64
	inProc   bool // the far end runs in this process: its CPU is this process's
	// connCores is how many cores one connection's end can keep busy (1
	// where 0): its crypto runs on one, its reads and writes beside it.
	connCores float64
	perConn   float64       // share added to the CPU per byte by each connection beyond the first
	perStrm   float64       // share added by each stream beyond the first
	window    float64       // what one stream carries (its window per round trip), bytes/s; 0: no limit
	rtt       time.Duration // the round trip the ends report
	// hop is the round trip TCP tells of each connection
	// (ConnSample.MinRTT); 0: the kernel tells nothing.
	hop   time.Duration
	noise float64
	state uint64
}

// cost is the factor plan p multiplies the CPU per byte by.
func (h *cpuHost) cost(p Plan) float64 {
	return 1 + h.perConn*float64(p.Conns-1) + h.perStrm*float64(p.Streams-1)
}

func (h *cpuHost) goodput(p Plan) float64 {
	g := h.cores / ((h.own + h.far) * h.cost(p))
	if !h.inProc && h.far == 0 {
		g = h.cores / (h.own * h.cost(p))
	}
	g = min(g, float64(p.Conns)*max(h.connCores, 1)/(h.own*h.cost(p)))
	if h.window > 0 {
		g = min(g, float64(p.Streams)*h.window)
	}
	return g
}

// cpu is the cores this process keeps busy running p at goodput g.
func (h *cpuHost) cpu(p Plan, g float64) float64 {
	c := g * h.own * h.cost(p)
	if h.inProc {
		c += g * h.far * h.cost(p)
	}
	return c
}

func (h *cpuHost) jitter() float64 {
	if h.noise == 0 {
		return 1
	}
	h.state = h.state*6364136223846793005 + 1442695040888963407
	return 1 + h.noise*(2*float64(h.state>>11)/(1<<53)-1)
}

// simCPU drives c on h for n intervals, and returns the steps and the
// bytes moved per CPU second of this process over the run.
func simCPU(t *testing.T, c *Controller, h *cpuHost, n int) []step {
	t.Helper()
	return simCPUFrom(t, c, h, c.Start(h.rtt), n)
}

// simCPUFrom is simCPU from plan p.
func simCPUFrom(t *testing.T, c *Controller, h *cpuHost, p Plan, n int) []step {
	t.Helper()
	var steps []step
	for range n {
		checkPlan(t, c, p)
		g := h.goodput(p)
		steps = append(steps, step{p, g})
		got := g * h.jitter()
		s := Sample{
			Elapsed: p.Interval,
			Bytes:   int64(got * p.Interval.Seconds()),
			RTT:     h.rtt,
			CPU:     time.Duration(h.cpu(p, got) * float64(p.Interval)),
		}
		if h.hop > 0 {
			for i := range p.Conns {
				s.Conns = append(s.Conns, ConnSample{Conn: i, SRTT: h.hop, MinRTT: h.hop,
					Bytes: s.Bytes / int64(p.Conns), LimitedBy: "app"})
			}
		}
		p = c.Observe(s)
	}
	return steps
}

// TestCPUBoundEndsOnOneConnection: on a 2-core loopback, where sshd
// shares the cores, more streams and connections carry less, whatever
// the round trip the ends report (the request timed at the start waits
// for a CPU: 47 ms was seen on loopback). The controller ends at the
// single-connection plan, never below what one stream carries, and
// spends few intervals away from it.
func TestCPUBoundEndsOnOneConnection(t *testing.T) {
	for _, tc := range []struct {
		name     string
		rtt, hop time.Duration
		own      float64 // the cores this process keeps busy with one stream; the far end the rest
	}{
		{"loopback", 50 * time.Microsecond, 20 * time.Microsecond, 0.4},
		{"loopback, its RTT taken from a request queued behind the CPU", 47 * time.Millisecond, 20 * time.Microsecond, 0.4},
		{"a LAN", 400 * time.Microsecond, 400 * time.Microsecond, 0.4},
		// No TCP_INFO: this process's CPU alone tells.
		{"loopback, the kernel telling nothing", 47 * time.Millisecond, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// One stream: 250 MB/s, both ends' CPU on two cores.
			h := &cpuHost{cores: 2, own: tc.own / 250e6, far: (2 - tc.own) / 250e6, perConn: 0.15, perStrm: 0.03,
				rtt: tc.rtt, hop: tc.hop, noise: 0.05, state: 7}
			one := h.goodput(Plan{Streams: 1, Conns: 1})
			// Stock socket buffers: at 47 ms the start opens 9 streams
			// on 3 connections, as on loopback.
			c := New(Config{Cores: 2, ConnBytes: stockConn})
			steps := simCPU(t, c, h, 120)
			last := steps[len(steps)-1].plan
			if last.Conns != 1 || h.goodput(last) < one {
				t.Fatalf("holding %v (%.0f MB/s), want one connection at %.0f MB/s or more", last, h.goodput(last)/1e6, one/1e6)
			}
			if n := changes(steps[len(steps)/2:]); n != 0 {
				t.Errorf("%d plan changes in the second half, want a plateau", n)
			}
			// Another job takes half the CPU: more streams cannot win it
			// back, and the plateau stays.
			h.cores = 1
			if n := changes(simCPUFrom(t, c, h, last, 60)); n != 0 {
				t.Errorf("%d plan changes after the CPU was taken, want none", n)
			}
			// The copy's bytes against one stream's all along.
			var moved float64
			for _, st := range steps {
				moved += st.goodput * st.plan.Interval.Seconds()
			}
			var d time.Duration
			for _, st := range steps {
				d += st.plan.Interval
			}
			if avg := moved / d.Seconds(); avg < 0.9*one {
				t.Errorf("moved %.0f MB/s on average, want within 10 %% of one stream's %.0f", avg/1e6, one/1e6)
			}
		})
	}
}

// TestCPUFullHoldsTheStart: a process that keeps every core busy with
// one stream (a LAN to a fast server, the far end's CPU elsewhere)
// probes nothing: no plan can have more CPU.
func TestCPUFullHoldsTheStart(t *testing.T) {
	h := &cpuHost{cores: 2, own: 1 / 500e6, connCores: 2, rtt: 300 * time.Microsecond, perConn: 0.02}
	c := New(Config{Cores: 2})
	steps := simCPU(t, c, h, 60)
	if n := changes(steps); n != 0 || maxStreams(steps) != 1 {
		t.Errorf("%d plan changes, up to %d streams, with every core busy from the start; want none", n, maxStreams(steps))
	}
	if last := steps[len(steps)-1].plan; last.Reason == "" || last.Streams != 1 {
		t.Errorf("holding %v", last)
	}
}

// TestCPUBoundLongPathKeepsWhatCarries: the embedded demo, a relayed 50
// ms path whose server runs in this process: each stream carries its
// window per round trip, and the two cores bound both ends together.
// The controller stops adding streams once the process has every core,
// keeps a plan within the margin of the best, and never falls to one
// stream's window.
func TestCPUBoundLongPathKeepsWhatCarries(t *testing.T) {
	h := &cpuHost{cores: 2, own: 1 / 250e6, far: 1 / 250e6, inProc: true, perConn: 0.05, perStrm: 0.01,
		window: 2 << 20 / 0.055, rtt: 50 * time.Millisecond, noise: 0.05, state: 11}
	c := New(Config{Cores: 2, ConnBytes: stockConn})
	steps := simCPU(t, c, h, 80)
	best := 0.0
	for _, st := range steps {
		best = max(best, st.goodput)
	}
	last := steps[len(steps)-1].plan
	if g := h.goodput(last); g < best/(1+margin) || g <= h.goodput(Plan{Streams: 1, Conns: 1}) {
		t.Errorf("holding %v at %.0f MB/s, want within the margin of the best plan's %.0f", last, g/1e6, best/1e6)
	}
	if m := maxStreams(steps); m > 2*steps[0].plan.Streams {
		t.Errorf("reached %d streams from the start's %d with every core busy", m, steps[0].plan.Streams)
	}
}

// TestCPUToldLongPathUnchanged: on long paths, where a copy's CPU is a
// small share of the cores, the CPU told changes no plan.
func TestCPUToldLongPathUnchanged(t *testing.T) {
	for _, tc := range []struct {
		mk    func() link
		cores int
	}{
		{func() link { return link{rate: 1 * gbit, rtt: 100 * time.Millisecond, connBytes: stockConn} }, 2},
		{func() link { return link{rate: 1 * gbit, rtt: 50 * time.Millisecond, noise: 0.05, state: 5} }, 2},
		// 800 MB/s of crypto: a host of 8 cores.
		{func() link { return link{rate: 10 * gbit, rtt: 20 * time.Millisecond, connCap: 200e6, cpuCap: 800e6} }, 8},
		{func() link {
			return link{rate: 1 * gbit, rtt: 100 * time.Millisecond, connBytes: stockConn, connCap: 3e6, burst: 8, limitedBy: "loss"}
		}, 2},
	} {
		mk := tc.mk
		plans := func(cpu bool) []Plan {
			l := mk()
			c := New(Config{ConnBytes: int64(l.connBytes), Cores: tc.cores})
			var out []Plan
			for _, st := range simWith(t, c, &l, 80, func(p Plan, s *Sample) {
				if l.limitedBy != "" && s.Bytes > 0 {
					s.Conns = []ConnSample{{Bytes: s.Bytes, LimitedBy: l.limitedBy}}
				}
				if cpu {
					// 4 CPU seconds a GiB: a quarter core at 120 MB/s.
					s.CPU = time.Duration(float64(s.Bytes) * 4 / (1 << 30) * float64(time.Second))
				}
			}) {
				out = append(out, st.plan)
			}
			return out
		}
		without, with := plans(false), plans(true)
		if !slices.Equal(without, with) {
			l := mk()
			for i := range without {
				if without[i] != with[i] {
					t.Errorf("rtt %v: interval %d: %v with the CPU told, %v without", l.rtt, i, with[i], without[i])
					break
				}
			}
		}
	}
}
