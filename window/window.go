// Package window is hpncp's dynamic window controller.
//
// A stock sshd gives every SSH channel a fixed 2 MiB flow-control window, so
// one stream (an SFTP session on its own channel) moves at most
// ChannelWindow / RTT: about 21 MiB/s at 100 ms whatever the link. hpncp
// fills long fat paths by running several streams, spread over one or more
// SSH connections (each connection's crypto runs on one core at both ends).
// The Controller decides how many, from what the pipeline measures; it does
// no I/O and reads no clock, so it is tested against a simulated link.
//
// # Control law
//
// The pipeline calls Start with the first RTT it knows (the ends' estimate,
// as Sample.RTT), then Observe once per interval with the bytes it
// completed. Each call returns the Plan to run until the next one.
//
//   - Start. The link rate is unknown, so the first plan sizes the streams
//     for the bandwidth-delay product of an assumed 1 Gbit/s path, with up
//     to one window more for the time each window takes to cross the link
//     (see bdpStreams), and never more than two connections' worth
//     (StreamsPerConn each). Below about 8 ms RTT that is one stream, which
//     is where a LAN belongs: there the CPU, not the window, is the limit.
//     Where an earlier measurement of the path is known (Config.Start),
//     the first plan takes its stream count instead. Where one
//     connection's socket buffers cannot carry the guessed product
//     (Config.ConnBytes: stock kernels keep about 3.6 MB in flight per
//     connection), it opens the connections the product needs at once,
//     each with the channels that fill its buffers, unless the copy is
//     too small to pay for them (Size).
//   - Measure. After any change the first interval is discarded: new
//     channels ramp up within it, as intervals last 4 RTTs (at least 250 ms,
//     at most 2 s). After new connections, so is any interval that starts
//     within 12 RTTs of the change (TCP and SSH handshakes, auth, slow
//     start). Goodput is the median of the next 3 intervals, so one noisy
//     interval cannot flip a decision. Intervals the pipeline marks
//     AppLimited say nothing about the path and are skipped.
//   - Probe upward. Two probes, both doubling the streams: a channel probe
//     adds channels to the connections (opening another connection only
//     every StreamsPerConn streams), a connection probe doubles the
//     connections too, for when each connection is CPU-bound (and it is how
//     a LAN gets a second core's worth). The channel
//     probe is skipped when the streams are not window-limited (goodput below
//     half of what they keep in flight per RTT, with the smallest RTT seen,
//     the path's own without queues), since more windows cannot help then,
//     and where the connections' buffers bind. On a LAN the connection
//     probe then opens connections only up to Cores, doubling the streams
//     alone beyond (on a longer path, or where TCP_INFO says congestion
//     control held the connections, a connection adds a flow): what a connection
//     adds on a LAN is a core's worth of crypto, and connections beyond
//     the cores only contend for them and carry less. A probe is kept
//     when it raises goodput by
//     more than 10 %, and the next probe starts from it. No probe runs
//     from a plan whose round trips are 10 % or more above the path's own
//     (at 5 ms and more): the streams' windows bound what is in flight, so
//     such a queue at the bottleneck means the link is full already.
//   - Loss. Where a connection lost segments in most intervals of the
//     base (or in two in a row once the first plan's streams run) on a
//     long path without a standing queue, each connection carries what
//     the loss rate lets its congestion control carry, and only more
//     connections help: the probe opens LossyConns at once and is kept
//     whatever it measures (lossyPath). Only real loss counts: a
//     retransmit the peer reports it had already (DSACK,
//     ConnSample.Spurious: a tail-loss probe sent while a receiver on
//     the same cores waited for a CPU) is none (lost).
//   - CPU. Where the process kept 90 % of Config.Cores busy over a
//     measurement (Sample.CPU, cpuFull), or a probe that added streams
//     or connections gained less than the margin while it kept 45 % of
//     them busy (cpuBusy: about a core of two, all one end gets where
//     the far end shares the host; its cost shows only as goodput that
//     stays flat while streams grow) or while TCP told a LAN's round
//     trip on every connection (ConnSample.MinRTT under 5 ms, whatever
//     the ends report: on loopback the request timed at the start waits
//     for a CPU), or no probe is left over such connections, the CPU
//     holds the copy: no probe adds streams or connections. The
//     controller measures the single-connection plan (1 stream), then,
//     if that falls short of the best goodput by the margin, half of the
//     base, and holds, of the plans measured within the margin of the
//     best goodput, the one that moved the most bytes per CPU second
//     (the smaller where within 5 %: fewer connections cost the far end
//     less). A long path's copy keeps a fraction of a core busy over
//     connections of a long round trip: nothing changes there.
//   - Hold. When no probe gains (or every candidate is no larger than one
//     that already failed, goodput being monotonic in streams and
//     connections), the controller settles on the best plan. If that plan
//     has more streams than the bandwidth-delay product needs (goodput ×
//     smallest RTT / ChannelWindow, plus 15 %, plus up to one window for
//     the time each window takes to cross the bottleneck: the start was a
//     guess and probes double), it tries that many, keeping the
//     connections, and
//     keeps them unless goodput drops by the margin; surplus windows would
//     only queue at the bottleneck. Then it holds. It does not re-probe
//     on a timer: a plateau never oscillates. It re-probes only when the
//     held plan's goodput moves by more than 20 % for a whole measurement
//     (competing traffic left or arrived, the route changed, the CPU
//     was freed, which the rules above tell again; a CPU-bound plateau
//     re-probes only when it rises): probes find
//     what a faster path takes, and a slower one ends in a trim to its
//     smaller bandwidth-delay product.
//   - Back off. Transport errors halve the streams (and the connections)
//     at once, and cap further growth below the count that failed. Errors
//     reported while the back-off settles are counted against the old plan,
//     not again. The cap lifts after 30 s without errors (doubling with
//     every back-off, up to 8 min), and a held plan then re-probes.
//
// Bytes in flight: the plan keeps 1.25 times the bandwidth-delay product
// (at the best rate measured, at least the guessed 1 Gbit/s), and at least
// the product and a window, in flight, shared by its streams, each
// keeping from half a channel window to a whole one, the most its channel
// can carry per round trip; a plan of more streams than the best measured
// keeps the best one's share per stream, so that a probe adds what it
// asks about, and where the product is under a window each stream keeps
// a window (cleanProduct). On a lossy path, whose connections are many
// for their congestion windows, the plan keeps twice the measured product
// (inFlightPerStream).
//
// The size flags are read by package units; the TCP sockets' buffers and
// the kernel's RTT estimate are sshconn's (SetBuffers, TCPRTT), beside
// the dialing that opens them.
package window

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"time"

	"github.com/hpncp/hpncp/internal/units"
)

// defaultChannelWindow is the channel window of stock OpenSSH
// (CHAN_SES_WINDOW_DEFAULT) and of golang.org/x/crypto/ssh.
const defaultChannelWindow = 2 << 20

// DefaultMaxConns is Config.MaxConns's default.
const DefaultMaxConns = 16

const (
	defaultMaxStreams     = 32
	defaultStreamsPerConn = 4
	// Sixteen connections: on a long path with a little loss each cubic
	// connection spends most of its time recovering from the last loss,
	// and TCP itself needs about 16 to fill the path: with 8, even plain
	// TCP leaves it part empty. Probes reach them only while goodput
	// rises.
	defaultMaxConns = DefaultMaxConns
	// A lossy path's plan takes more: each loss cuts one cubic
	// connection for seconds, so sixteen fill the path only until the
	// losses start, where twenty-four keep it full through a large copy;
	// thirty-two gain nothing over twenty-four (figures in
	// bench/results-design.md).
	defaultLossyConns = 24

	// guessRate is the link rate assumed before any measurement (1 Gbit/s):
	// it picks the first plan only, probing finds the real one.
	guessRate = 125e6

	margin         = 0.10 // a probe must raise goodput by more than this
	headroom       = 0.15 // added to the bandwidth-delay product when trimming
	windowShare    = 0.5  // goodput / (streams × window / RTT) above which streams are window-limited
	queueShare     = 0.1  // RTT above the path's own by this share: a standing queue
	queueMinRTT    = 5 * time.Millisecond
	changeTrigger  = 2 * margin
	measureSamples = 3
	// A held plan's goodput must stay down for fallSamples intervals, twice
	// as long as it must stay up, before the controller probes again: a
	// loss on one of the sender's connections (a download's sender is the
	// server, whose cubic halves its window) dips the goodput for a second
	// or two, and the probe's extra connections then fill the very
	// queue that had overflowed, and carry less than the plan they were
	// added to.
	fallSamples = 2 * measureSamples

	// New connections need TCP, key exchange, auth, channel and SFTP set-up
	// and TCP slow start before they carry their share.
	settleRTTsConns = 12

	minInterval  = 250 * time.Millisecond
	maxInterval  = 2 * time.Second
	intervalRTTs = 4

	capHoldInitial = 30 * time.Second
	capHoldMax     = 8 * time.Minute
)

// Config bounds the controller. Zero fields take their defaults.
type Config struct {
	// MinStreams and MaxStreams bound the stream count (defaults 1 and 32).
	// MaxStreams is lowered to MaxConns × StreamsPerConn, and MinStreams to
	// MaxStreams.
	MinStreams, MaxStreams int
	// StreamsPerConn is how many channels one connection carries before
	// another connection is opened (default 4). Keep it at or below the
	// server's MaxSessions (10 by default in sshd).
	StreamsPerConn int
	// MaxConns bounds the SSH connections (default 16); 1 where a connection
	// cannot be opened again without asking the user (password auth).
	MaxConns int
	// LossyConns bounds the connections of a lossy path's plan (see
	// lossyPath), where each connection carries only what its congestion
	// control recovers between losses. Default: 24 where MaxConns is
	// left to its default, else MaxConns; never below MaxConns.
	LossyConns int
	// LossyMaxConns bounds the connections a lossy path's probes add past
	// LossyConns's plan, half as many again at a time, each kept only
	// where goodput rose by the margin: at a higher loss rate (0.1 %)
	// each cubic connection carries under 1 MB/s at 100 ms, and the
	// lossy plan's leave the path mostly empty. Default: twice
	// LossyConns where MaxConns is left to its default, else
	// LossyConns; never below LossyConns.
	LossyMaxConns int
	// Cores bounds the connections probed for where the streams are not
	// window-limited (a LAN), where connections only add CPU. Default: the
	// CPUs of this host, and at least 2, since a second connection may
	// still gain a core at the far end.
	Cores int
	// ChannelWindow is the flow-control window of one channel in bytes
	// (default defaultChannelWindow).
	ChannelWindow int64
	// Fixed, when above zero, fixes the stream count (--streams N): the
	// controller then only reports goodput and RTT, ignoring the bounds
	// and errors, and spreads the streams StreamsPerConn to a connection.
	Fixed int
	// Start, when above zero, is the first plan's stream count, known from
	// an earlier measurement of the path (hpncp bench's recommendation)
	// rather than guessed from the RTT; the controller probes and trims
	// from it as from a guess. Connections follow StreamsPerConn.
	Start int
	// ConnBytes, when above zero, is the most payload one TCP connection
	// keeps in flight: its socket buffers' share (the sender's send
	// buffer, the receiver's window), whatever the windows of its
	// channels. With a distribution's stock buffers (tcp_wmem max 4 MiB)
	// a connection carries at most ConnBytes / RTT, 42 MB/s at 100 ms:
	// the start then opens the connections the guessed path needs at
	// once, and the probes add connections, not channels, once the
	// buffers bind. 0: unknown, the windows alone bound a connection.
	ConnBytes int64
}

// Sample is what the pipeline measured over one interval.
type Sample struct {
	// Elapsed is the length of the interval.
	Elapsed time.Duration
	// Bytes is the payload completed (acknowledged by the far side or
	// received) in the interval.
	Bytes int64
	// RTT is the current round-trip estimate: the larger of what the two
	// ends tell, where an SFTP end tells the larger of its smallest
	// connection's tcpi_rtt (sshconn.TCPRTT) and the round trip of a
	// request at its start; 0 if unknown.
	RTT time.Duration
	// Errors counts streams that failed for transport reasons: channel or
	// connection refused or closed, timeouts. Not per-file errors such as
	// permission denied.
	Errors int
	// AppLimited reports that the pipeline could not keep every stream
	// busy during the interval (small files, a slow source disk, the tail
	// of the transfer), so the interval says nothing about the path.
	AppLimited bool
	// Conns is what the kernel told of each SSH connection over the
	// interval, where it tells (Linux TCP_INFO); nil otherwise. The
	// control law does not read it yet: --trace records it.
	Conns []ConnSample
	// Opening counts the plan's streams still being opened at the end of
	// the interval (their connections dialing, their channels and files
	// opening). Until they all run, the plan is not yet in force: its
	// settling time starts when they do, not at the change. On a long
	// path the connections a plan adds take a second or more to open.
	Opening int
	// CPU is the CPU time (user and system) this process spent in the
	// interval, its own and not the far end's; 0 when unknown.
	CPU time.Duration
	// Remaining is the payload still to copy after the interval; 0 when
	// unknown. A probe that could not be measured before the copy ends
	// is not started: it would cost the copy its new streams' set-up and
	// tell nothing.
	Remaining int64
}

// ConnSample is one connection's TCP state at the end of an interval, and
// what limited it during the interval (sshconn.TCPInfo, sshconn.LimitedBy).
type ConnSample struct {
	// Conn numbers the run's connections from 0 in the order they were
	// opened; a connection keeps its number while it lives.
	Conn         int
	SRTT, MinRTT time.Duration
	Cwnd         int     // congestion window, segments
	DeliveryRate float64 // the kernel's latest estimate, bytes/s
	Bytes        int64   // bytes it moved in the interval: acknowledged by the peer, or received
	Retrans      int64   // segments retransmitted in the interval
	// Spurious is how many of Retrans the peer reported it had already
	// (DSACK, tcpi_dsack_dups): tail-loss probes sent while an
	// acknowledgement was late, retransmits of segments only reordered.
	// They are not loss; the kernel undoes their congestion window cut.
	Spurious int64
	// Lost is the segments the kernel presumed lost at the end of the
	// interval (tcpi_lost), for --trace: they are retransmitted, and
	// counted in Retrans, as the congestion window allows.
	Lost       int
	NotSent    int // bytes queued in the send buffer, not yet sent
	SndBuf     int // usable send buffer, bytes
	PeerWindow int // the peer's advertised receive window, bytes
	// LimitedBy is "rwnd", "sndbuf", "loss", "cwnd", "app", "recv", or "" when
	// the connection moved nothing.
	LimitedBy string
}

// Plan is what the pipeline should run until the next Observe.
type Plan struct {
	// Streams is the number of SFTP sessions (channels) to keep busy.
	Streams int
	// Conns is the number of SSH connections to spread them over, as evenly
	// as possible; never more than Streams.
	Conns int
	// InFlight is the bytes of requests to keep outstanding per stream.
	InFlight int64
	// Interval is when to call Observe again.
	Interval time.Duration
	// Goodput is the median goodput of the last intervals in bytes per
	// second, 0 before the first one.
	Goodput int64
	// RTT is the latest round-trip estimate, 0 if unknown.
	RTT time.Duration
	// Reason says why the plan is what it is, for verbose output.
	Reason string
	// Standby, when above zero, is how many connections the copy should
	// have dialed, live or on standby, ahead of a plan that may ask for
	// them: set at the first plan's first interval with a loss on a
	// route where a lossy plan (LossyConns, above MaxConns) could
	// follow. That plan comes an interval later, and its connections,
	// dialed only then, take seconds to come up on a long path (a few
	// dials at a time, some ten round trips each). Dialed at the copy's
	// start on every long path instead, their handshakes would slow the
	// first plan's slow starts on the paths that see no loss.
	Standby int
}

// String formats p for verbose output.
func (p Plan) String() string {
	rtt := "unknown"
	if p.RTT > 0 {
		rtt = p.RTT.Round(10 * time.Microsecond).String()
	}
	return fmt.Sprintf("%s on %s, %s in flight each, %s, rtt %s: %s",
		plural(p.Streams, "stream"), plural(p.Conns, "connection"), units.FormatSize(p.InFlight),
		formatRate(float64(p.Goodput)), rtt, p.Reason)
}

type phase int

const (
	phaseBaseline phase = iota // measuring the plan in force before probing from it
	phaseProbe                 // measuring a candidate
	phaseTrim                  // measuring the plan trimmed to the bandwidth-delay product
	phaseHold                  // plateau: watching for the path to change
	phaseShrink                // CPU-bound: measuring a smaller plan, for its bytes per CPU second
)

// shape is a stream count and the connections carrying it.
type shape struct{ streams, conns int }

// Controller turns measurements into plans. It is driven by one goroutine
// and is not safe for concurrent use.
type Controller struct {
	cfg Config

	cur   shape
	phase phase

	base     shape   // best plan measured, the one probes start from
	baseRate float64 // its goodput
	baseRTT  float64 // the median RTT (seconds) while base was measured; 0 if unknown
	// baseCongested says the connections the kernel told of were mostly
	// held by their congestion windows or by loss while base was measured.
	baseCongested bool
	baseTold      bool // the kernel told of base's connections (Sample.Conns)
	// baseLossy says a connection lost segments in most of base's
	// intervals (lossy); probeLossy that the probe under way opened
	// connections for that reason. Such a probe is kept whatever it
	// measured: its base was measured while the connections were still
	// coming down from their slow starts' windows to what the loss
	// allows, and the probe's new connections' slow starts into the full
	// link can overflow its queue and crawl for a second; kept with the
	// fewer connections, the copy would run well below what the path
	// carries.
	baseLossy, probeLossy bool
	lossRun               int     // lossyStart's intervals with loss in a row
	standby               int     // Plan.Standby
	probed                bool    // a probe was started: the start is over
	failed                []shape // probes from base that did not gain
	holdRate              float64 // phaseHold: goodput the plateau was decided on
	// measured holds the plans measured since the start or the last
	// re-probe, with the CPU each used: where the CPU binds, the one to
	// hold is chosen from them (cpuSettle).
	measured []measurement
	// cpuBound says the CPU, not the path, holds the copy (cpuFull,
	// cpuBusy, hopShort): no probe adds streams or connections, and
	// smaller plans are measured for their bytes per CPU second.
	cpuBound bool
	shrunk   int // phaseShrink: smaller plans measured since cpuBound

	sinceChange time.Duration
	sampleCount int           // samples since the last change
	connsAdded  bool          // the last change opened connections
	samples     []float64     // measurement of the current phase; a hold's last fallSamples
	sampleRTTs  []float64     // their RTTs in seconds, where known
	sampleCong  []float64     // their share of bytes moved by congestion-held connections, where told
	sampleLoss  []bool        // whether a connection lost segments in them, where told
	sampleCPU   []float64     // the cores this process kept busy in them, where told
	sampleHop   []bool        // whether every connection told had a short round trip in TCP (shortHop)
	hop         bool          // the last interval that told had a short round trip in TCP on every connection
	recent      []float64     // last samples, for Plan.Goodput
	rtt         time.Duration // latest estimate: what new streams take to ramp up
	minRTT      time.Duration // the path's own round trip, without queues
	backingOff  bool          // the last change was a back-off
	errCap      int           // 0, or the most streams allowed after errors
	capHold     time.Duration
	sinceErrors time.Duration
	reason      string
	startedOnce bool
	share       int   // files starting their plans beside each other (Share)
	size        int64 // bytes the copy moves (Size); 0 when unknown
}

// New returns a controller for cfg; call Start before Observe.
func New(cfg Config) *Controller {
	if cfg.StreamsPerConn <= 0 {
		cfg.StreamsPerConn = defaultStreamsPerConn
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = defaultMaxConns
		if cfg.LossyConns <= 0 {
			cfg.LossyConns = defaultLossyConns
		}
		if cfg.LossyMaxConns <= 0 {
			cfg.LossyMaxConns = 2 * cfg.LossyConns
		}
	}
	cfg.LossyConns = max(cfg.LossyConns, cfg.MaxConns)
	cfg.LossyMaxConns = max(cfg.LossyMaxConns, cfg.LossyConns)
	if cfg.ChannelWindow <= 0 {
		cfg.ChannelWindow = defaultChannelWindow
	}
	if cfg.MaxStreams <= 0 {
		cfg.MaxStreams = defaultMaxStreams
	}
	if cfg.Cores <= 0 {
		cfg.Cores = max(runtime.NumCPU(), 2)
	}
	cfg.MaxStreams = min(cfg.MaxStreams, cfg.MaxConns*cfg.StreamsPerConn)
	cfg.MinStreams = min(max(cfg.MinStreams, 1), cfg.MaxStreams)
	cfg.Fixed = max(cfg.Fixed, 0)
	return &Controller{cfg: cfg}
}

// Start begins a transfer with rtt, the first round-trip time known (the
// SSH handshake's or the first request's; 0 if unknown), and returns the
// first plan. Calling it again starts over.
func (c *Controller) Start(rtt time.Duration) Plan {
	*c = Controller{cfg: c.cfg, startedOnce: true, rtt: max(rtt, 0), share: c.share, size: c.size}
	c.minRTT = c.rtt
	if c.cfg.Fixed > 0 {
		c.cur = shape{c.cfg.Fixed, ceilDiv(c.cfg.Fixed, c.cfg.StreamsPerConn)}
		c.reason = "fixed stream count"
		return c.plan()
	}
	if c.cfg.Start > 0 {
		c.change(c.normalize(shape{c.cfg.Start, 1}), phaseBaseline)
		c.reason = fmt.Sprintf("start: %s, from an earlier measurement of this path", plural(c.cur.streams, "stream"))
		return c.plan()
	}
	streams, conns := 1, 1
	if c.rtt > 0 {
		// As bdpStreams, without the headroom: the windows the guessed
		// rate needs, each also crossing the link.
		windows := guessRate * c.rtt.Seconds() / float64(c.cfg.ChannelWindow)
		streams = int(math.Ceil(windows + min(1, windows)))
	}
	// Up to two connections' worth: probing up to the product from one
	// connection's worth costs a long path several seconds of measuring.
	streams = min(streams, 2*c.cfg.StreamsPerConn)
	if n := c.bufferConns(); n > 1 {
		// One connection's buffers cannot carry the guessed product: open
		// the connections it needs at once, each with the channels that
		// fill its buffers. Their slow starts then run side by side;
		// connections added by probes later start into a queue the
		// others keep, and cubic's HyStart leaves them at a small
		// fraction of their share for seconds.
		conns = n
		streams = max(streams, n*(c.connStreams()+1))
	}
	if c.share > 1 {
		// The connections are the pool's, shared by the files.
		streams = max(1, ceilDiv(streams, c.share))
	}
	c.change(c.normalize(shape{streams, conns}), phaseBaseline)
	switch {
	case c.rtt > 0 && conns > 1:
		c.reason = fmt.Sprintf("start: rtt %s, sized for an assumed 1 Gbit/s over connections of %s in flight",
			c.rtt, units.FormatSize(c.cfg.ConnBytes))
	case c.rtt > 0:
		c.reason = fmt.Sprintf("start: rtt %s, sized for an assumed 1 Gbit/s", c.rtt)
	default:
		c.reason = "start: rtt unknown"
	}
	return c.plan()
}

// connHeadroom is how much more than the guessed bandwidth-delay product
// the start's connections may keep in flight: round trips grow under
// load, and a connection's buffers are never all payload.
const connHeadroom = 1.25

// connsWorth is how many times one connection's buffers a copy must
// move for the start to open more connections for it: a connection
// costs about ten round trips (TCP, key exchange, auth, channels, slow
// start) before it carries its share, and what moves in a few dozen
// round trips is better left to the connections there are: by the time
// a new connection carries its share, the copy is over.
const connsWorth = 20

// bufferConns is how many connections the start needs for the guessed
// rate when each carries at most ConnBytes per round trip; 0 when
// ConnBytes or the round trip is unknown, or the copy is too small to
// pay for more connections.
func (c *Controller) bufferConns() int {
	if c.cfg.ConnBytes <= 0 || c.rtt <= 0 {
		return 0
	}
	if c.small() {
		return 0
	}
	bdp := guessRate * c.rtt.Seconds() * connHeadroom
	return min(int(math.Ceil(bdp/float64(c.cfg.ConnBytes))), c.cfg.MaxConns)
}

// small reports whether the copy is too small to pay for connections
// opened for it: under connsWorth times one connection's buffers,
// counting the files beside it.
func (c *Controller) small() bool {
	return c.size > 0 && c.size*int64(max(c.share, 1)) < connsWorth*c.cfg.ConnBytes
}

// connStreams is how many channel windows fill one connection's buffers,
// 0 when ConnBytes is unknown.
func (c *Controller) connStreams() int {
	if c.cfg.ConnBytes <= 0 {
		return 0
	}
	return int(ceilDiv(c.cfg.ConnBytes, c.cfg.ChannelWindow))
}

// inFlight is the most sh keeps in flight: its streams' windows, or
// its connections' buffers where those are smaller.
func (c *Controller) inFlight(sh shape) float64 {
	b := float64(sh.streams) * float64(c.cfg.ChannelWindow)
	if c.cfg.ConnBytes > 0 {
		b = min(b, float64(sh.conns)*float64(c.cfg.ConnBytes))
	}
	return b
}

// buffersBind reports whether sh's connections' buffers, not its
// channels' windows, bound what it keeps in flight: more channels on the
// same connections then carry nothing more.
func (c *Controller) buffersBind(sh shape) bool {
	return c.inFlight(sh) < float64(sh.streams)*float64(c.cfg.ChannelWindow)
}

// Share tells the controller, before Start, that n files (its own among
// them) run on the parallel pipeline at once: a tree's large files go
// beside each other. The guessed first plan is then split between them,
// at least one stream each; n plans of the whole guess would ask the
// server for n times the sessions the path needs, and what it refuses
// (MaxSessions) costs round trips and new connections. Fixed and
// Config.Start plans are left as they are.
func (c *Controller) Share(n int) { c.share = n }

// Size tells the controller, before Start, how many bytes the copy it
// plans moves (0: unknown). A copy too small to pay for the connections
// its path's socket buffers would want starts on what the windows alone
// ask for.
func (c *Controller) Size(n int64) { c.size = n }

// Observe takes the measurement of the interval that just ended and returns
// the plan for the next one. Called before Start, it starts with s.RTT.
func (c *Controller) Observe(s Sample) Plan {
	if !c.startedOnce {
		c.Start(s.RTT)
	}
	if s.RTT > 0 {
		c.rtt = s.RTT
		if c.minRTT == 0 || s.RTT < c.minRTT {
			c.minRTT = s.RTT
		}
	}
	if short, ok := shortHop(s.Conns); ok {
		c.hop = short
	}
	if s.Elapsed <= 0 || s.Bytes < 0 {
		return c.plan()
	}
	rate := float64(s.Bytes) / s.Elapsed.Seconds()
	if !s.AppLimited {
		c.recent = appendLast(c.recent, rate, measureSamples)
	}
	if c.cfg.Fixed > 0 {
		return c.plan()
	}

	c.sinceChange += s.Elapsed
	c.sampleCount++
	if s.Opening > 0 {
		// The change is not in force yet: measure from when it is.
		c.sinceChange, c.sampleCount = 0, 0
	}
	settling := c.sampleCount == 1 ||
		(c.connsAdded && c.sinceChange-s.Elapsed < settleRTTsConns*c.rtt)
	if s.Errors > 0 {
		if !(c.backingOff && settling) {
			c.backOff(s.Errors)
		}
		return c.plan()
	}
	c.sinceErrors += s.Elapsed
	if c.errCap > 0 && c.sinceErrors >= c.capHold {
		c.errCap = 0
		if c.phase == phaseHold {
			c.reprobe(c.holdRate, "no errors for "+c.capHold.String())
			return c.plan()
		}
	}
	if c.lossyStart(s, rate) {
		return c.plan()
	}
	if settling || s.AppLimited {
		return c.plan()
	}

	if c.phase == phaseHold {
		c.samples = appendLast(c.samples, rate, fallSamples)
		if s.RTT > 0 {
			c.sampleRTTs = appendLast(c.sampleRTTs, s.RTT.Seconds(), measureSamples)
		}
		if share, ok := congestedShare(s.Conns); ok {
			c.sampleCong = appendLast(c.sampleCong, share, measureSamples)
			// A reprobe from here keeps a lossy plan's loss in mind
			// (accept): its connections, above MaxConns, stay allowed.
			c.sampleLoss = appendLast(c.sampleLoss, lossSeen(s.Conns), measureSamples)
		}
		if s.CPU > 0 {
			c.sampleCPU = appendLast(c.sampleCPU, s.CPU.Seconds()/s.Elapsed.Seconds(), measureSamples)
		}
		if n := len(c.samples); n >= measureSamples {
			med := median(c.samples[n-measureSamples:])
			r := ratio(med, c.holdRate)
			fell := r <= 1/(1+changeTrigger) && n == fallSamples &&
				ratio(median(c.samples), c.holdRate) <= 1/(1+changeTrigger)
			// A CPU-bound plateau that falls lost CPU to other work,
			// which more streams cannot win back.
			if (r >= 1+changeTrigger || (fell && !c.cpuBound)) && !c.endsSoon(s.Remaining, med) {
				c.reprobe(med, fmt.Sprintf("goodput moved from %s to %s",
					formatRate(c.holdRate), formatRate(med)))
			}
		}
		return c.plan()
	}
	c.samples = append(c.samples, rate)
	if s.RTT > 0 {
		c.sampleRTTs = append(c.sampleRTTs, s.RTT.Seconds())
	}
	if share, ok := congestedShare(s.Conns); ok {
		c.sampleCong = append(c.sampleCong, share)
		c.sampleLoss = append(c.sampleLoss, lossSeen(s.Conns))
	}
	if s.CPU > 0 {
		c.sampleCPU = append(c.sampleCPU, s.CPU.Seconds()/s.Elapsed.Seconds())
	}
	if short, ok := shortHop(s.Conns); ok {
		c.sampleHop = append(c.sampleHop, short)
	}
	if len(c.samples) < measureSamples {
		return c.plan()
	}
	med := median(c.samples)
	m := c.note(med)
	switch c.phase {
	case phaseBaseline:
		c.accept(c.cur, med)
		c.cpuBound = c.cpuBound || c.cpuFull(m)
	case phaseProbe:
		if c.probeLossy || ratio(med, c.baseRate) >= 1+margin {
			c.accept(c.cur, med)
			c.cpuBound = c.cpuBound || c.cpuFull(m)
		} else {
			c.failed = append(c.failed, c.cur)
			// Streams or connections added for no gain, while this
			// process kept about a core busy or more, or over TCP
			// connections of a LAN's round trip: the CPU, here or at
			// the far end, holds the copy.
			c.cpuBound = c.cpuBound || c.cpuFull(m) ||
				(m.cpu > 0 && (m.cpu >= cpuBusy*float64(c.cfg.Cores) || c.hopShort()))
		}
	case phaseShrink:
		c.shrunk++
		if c.shrunk == 1 && med < c.bestRate()/(1+margin) && c.shrinkHalf() {
			return c.plan()
		}
		c.cpuSettle()
		return c.plan()
	case phaseTrim:
		if med >= c.baseRate/(1+margin) {
			c.accept(c.cur, med)
		}
		c.hold()
		return c.plan()
	}
	if c.endsSoon(s.Remaining, c.baseRate) {
		if c.phase == phaseProbe && c.cur != c.base && med >= c.baseRate/(1+margin) {
			// A probe that moved about what its base did keeps the
			// copy's last seconds: going back stops its connections,
			// and the base's, whose windows its losses may have cut
			// on a shallow queue, carry the rest at a fraction of the
			// link (100 ms, a quarter-BDP queue: 60-80 MB/s for the
			// last 2 s after a probe measured at 108 against 117).
			c.accept(c.cur, med)
		}
		c.hold()
		c.reason = fmt.Sprintf("holding: the last %s go faster than a probe is measured", units.FormatSize(s.Remaining))
		return c.plan()
	}
	c.probeNext()
	return c.plan()
}

// endsSoon reports whether remaining bytes, at rate, are copied before a
// probe started now could be measured: its first interval discarded, then
// measureSamples more (the intervals of a 10 MiB file at 50 ms are
// about all it has).
func (c *Controller) endsSoon(remaining int64, rate float64) bool {
	if remaining <= 0 || rate <= 0 {
		return false
	}
	interval := min(max(intervalRTTs*c.rtt, minInterval), maxInterval)
	probe := time.Duration(1+measureSamples) * interval
	return time.Duration(float64(remaining)/rate*float64(time.Second)) < probe
}

// accept makes sh, measured at rate, the plan probes start from.
func (c *Controller) accept(sh shape, rate float64) {
	c.base, c.baseRate = sh, rate
	c.baseRTT = 0
	c.baseTold = len(c.sampleCong) > 0
	c.baseCongested = c.baseTold && median(c.sampleCong) > 0.5
	c.baseLossy = lossy(c.sampleLoss)
	if len(c.sampleRTTs) > 0 {
		c.baseRTT = median(c.sampleRTTs)
	}
	c.failed = c.failed[:0]
}

// queued reports whether base ran with a standing queue at the path's
// bottleneck: its round trips well above the path's own. The streams'
// windows bound what is in flight, so a queue forms only once they hold
// more than the link carries in a round trip: the link is full, and
// neither more windows nor more connections can carry more. Probing then
// would only deepen the queue until the router drops, and the drops cost
// goodput for seconds. Below queueMinRTT the test is left out: there a
// millisecond of buffering is a large share of the round trip, and the
// CPU, which connections add, is the limit.
func (c *Controller) queued() bool { return c.queuedAt(c.baseRTT) }

// queuedAt is queued for a plan measured at rtt seconds (0: unknown).
func (c *Controller) queuedAt(rtt float64) bool {
	if c.minRTT < queueMinRTT || rtt <= 0 {
		return false
	}
	return rtt >= (1+queueShare)*c.minRTT.Seconds()
}

// reprobe probes again from the plan in force, measured at rate, for the
// reason why.
func (c *Controller) reprobe(rate float64, why string) {
	c.measured, c.cpuBound = c.measured[:0], false
	c.note(rate)
	c.accept(c.cur, rate)
	c.probeNext()
	c.reason = why + "; " + c.reason
}

// probeNext switches to the next candidate from base, or holds base.
func (c *Controller) probeNext() {
	if c.cpuBound {
		c.shrink()
		return
	}
	for _, cand := range c.candidates() {
		if c.dominated(cand) {
			continue
		}
		c.change(cand, phaseProbe)
		c.probed = true
		// The lossy plan is kept whatever it measures; the probes past
		// it, like any other, only for the margin.
		c.probeLossy = c.lossyPath() && cand.conns > c.base.conns && c.base.conns < c.cfg.LossyConns
		c.reason = fmt.Sprintf("probing %s on %s from %s",
			plural(cand.streams, "stream"), plural(cand.conns, "connection"), formatRate(c.baseRate))
		if c.probeLossy {
			c.reason += ": connections lose segments"
		}
		return
	}
	// No probe left, over TCP connections of a LAN's round trip however
	// long the ends' round trip: what holds the copy is the ends, the
	// CPU (or a disk), not a path that more windows would fill.
	if len(c.sampleCPU) > 0 && c.hopShort() && c.base != c.normalize(shape{1, 1}) {
		c.cpuBound = true
		c.shrink()
		return
	}
	// The first plan was sized for a guessed rate, and probes double: the
	// plateau may hold more windows than the path's bandwidth-delay product
	// needs, which only queue at the bottleneck. Try the plan the BDP asks
	// for, keeping the connections, whose CPU may be what the goodput needs.
	if need := c.bdpStreams(c.baseRate); need < c.base.streams {
		// Never below the windows that fill the connections' buffers, as
		// many as the start gives each: fewer leave a connection waiting
		// on its windows, and where buffers bind, they, not the windows,
		// bound the queue, and trimming below them costs goodput.
		if n := c.connStreams(); n > 0 {
			need = max(need, c.base.conns*(n+1))
		}
		t := c.normalize(shape{max(need, c.base.conns), c.base.conns})
		if t.streams < c.base.streams {
			c.change(t, phaseTrim)
			c.reason = fmt.Sprintf("trying %s, enough for the %s bandwidth-delay product",
				plural(t.streams, "stream"), units.FormatSize(int64(c.baseRate*c.minRTT.Seconds())))
			return
		}
	}
	c.hold()
}

// bdpStreams is how many windows carry rate over the path's round trip,
// with headroom; MaxInt when the round trip or the rate is unknown.
//
// A stream's cycle is not one round trip but a round trip plus the time
// its window takes to cross the bottleneck (2 MiB at 1 Gbit/s: 17 ms),
// so a window carries less than window / RTT: one stream moves about 30
// MB/s at 50 ms, not 42. Where the path holds at least a window, that is
// up to one window more than the bandwidth-delay product alone asks for;
// on a LAN, where the product is a sliver of a window, next to nothing.
func (c *Controller) bdpStreams(rate float64) int {
	if c.minRTT <= 0 || rate <= 0 {
		return math.MaxInt
	}
	windows := rate * c.minRTT.Seconds() / float64(c.cfg.ChannelWindow)
	return int(math.Ceil(windows*(1+headroom) + min(1, windows)))
}

// hold settles on base until the path changes.
func (c *Controller) hold() {
	c.change(c.base, phaseHold)
	c.holdRate = c.baseRate
	c.reason = "plateau at " + formatRate(c.baseRate)
	if c.errCap > 0 && c.base.streams >= c.errCap {
		c.reason += ", capped after errors"
	}
}

// candidates lists the probes worth trying from base, best first.
func (c *Controller) candidates() []shape {
	limit := c.cfg.MaxStreams
	if c.errCap > 0 {
		limit = min(limit, c.errCap)
	}
	b := c.base
	if c.queued() {
		return nil
	}
	streams := min(2*b.streams, limit)
	windowLimited := c.windowLimited(b, c.baseRate)
	var out []shape
	// Where the connections' buffers bind, channels on them add nothing:
	// only the connection probe can carry more.
	if streams > b.streams && windowLimited && !c.buffersBind(b) {
		out = append(out, c.normalize(shape{streams, b.conns}))
	}
	conns := min(2*b.conns, c.cfg.MaxConns, max(streams, b.streams))
	capped := false
	// Streams short of their windows on a LAN are held by the CPU, which
	// connections add only up to the cores. On a long path they are held
	// by congestion control (a loss halves a cubic connection's window,
	// and at 100 ms it takes seconds to grow back), where each connection
	// adds a flow: TCP itself needs about 16 to fill a 100 ms path with
	// 0.01 % loss. What the kernel tells of the connections says so
	// directly, where it tells.
	lan := c.minRTT > 0 && c.minRTT < queueMinRTT
	if c.lossyPath() && b.conns < c.cfg.LossyConns {
		// Each connection's congestion control holds it to what the
		// loss rate allows, a small share of the path once the first
		// losses are past, so only more connections
		// carry more, and doubling them a probe at a time spends seconds
		// per step: open them all at once.
		return []shape{c.normalize(shape{limit, c.cfg.LossyConns})}
	}
	if c.lossyPath() && b.conns < c.cfg.LossyMaxConns && c.baseRate*c.minRTT.Seconds() < lossyGrowWindow*float64(b.conns) {
		// Where each connection keeps little in flight, the loss rate
		// holds it (0.1 % at 100 ms: some 50 KB each, cubic), and the
		// lossy plan's connections leave most of the path empty: half
		// as many again, a stream each at least. Where they keep more
		// (0.01 %: 500 KB; or a full link's queue overflowing), more
		// connections only add losses.
		k := min(b.conns+(b.conns+1)/2, c.cfg.LossyMaxConns)
		return []shape{c.normalize(shape{max(b.streams, k), k})}
	}
	if !windowLimited && lan && !c.baseCongested && conns > max(c.cfg.Cores, b.conns) {
		conns, capped = max(c.cfg.Cores, b.conns), true
	}
	if !lan && c.pathHolds(b) {
		return out
	}
	// Capped at the cores, the probe still doubles the streams: a server
	// slow to answer each request gains from more of them at once.
	if conns > b.conns || (capped && streams > b.streams) {
		out = append(out, c.normalize(shape{max(streams, b.streams), conns}))
	}
	return out
}

// bufferShare is the share of what its connections' buffers carry per
// round trip that a base whose buffers bind must move for a connection
// probe to start from it.
const bufferShare = 0.85

// pathHolds reports whether the kernel told that base's connections were
// held neither by their congestion windows nor by loss, and base, bound
// by its connections' buffers, carried well short of what they allow per
// round trip: the path, full, holds it, not the buffers. More
// connections then only start slow starts into the full link's queue,
// overflow it, and cost more in the trim back than they could gain.
func (c *Controller) pathHolds(sh shape) bool {
	if !c.baseTold || c.baseCongested || !c.buffersBind(sh) || c.minRTT <= 0 {
		return false
	}
	return c.baseRate < bufferShare*c.inFlight(sh)/c.minRTT.Seconds()
}

// windowLimited reports whether sh's streams carry close to what they
// keep in flight (their windows, or their connections' buffers where
// those bind) per round trip at rate, so that more windows or buffers
// could carry more. Without an RTT the answer is yes: let the probe
// decide.
func (c *Controller) windowLimited(sh shape, rate float64) bool {
	if c.minRTT <= 0 {
		return true
	}
	ceiling := c.inFlight(sh) / c.minRTT.Seconds()
	return rate >= windowShare*ceiling
}

// dominated reports whether a probe at least as large as sh already failed
// from base: goodput does not fall when streams or connections are added.
func (c *Controller) dominated(sh shape) bool {
	for _, f := range c.failed {
		if sh.streams <= f.streams && sh.conns <= f.conns {
			return true
		}
	}
	return false
}

// backOff halves the plan after errors and caps growth below the count
// that failed.
func (c *Controller) backOff(n int) {
	old := c.cur
	next := c.normalize(shape{old.streams / 2, (old.conns + 1) / 2})
	c.errCap = max(c.cfg.MinStreams, old.streams-1)
	if c.capHold == 0 {
		c.capHold = capHoldInitial
	} else {
		c.capHold = min(2*c.capHold, capHoldMax)
	}
	c.sinceErrors = 0
	c.failed = c.failed[:0]
	c.measured, c.cpuBound = c.measured[:0], false
	c.change(next, phaseBaseline)
	c.backingOff = true
	c.reason = fmt.Sprintf("backing off after %s: %d to %s",
		plural(n, "stream error"), old.streams, plural(next.streams, "stream"))
}

// change puts sh in force and starts measuring it in phase p.
func (c *Controller) change(sh shape, p phase) {
	old := c.cur
	c.cur, c.phase = sh, p
	c.sinceChange, c.sampleCount = 0, 0
	c.samples = c.samples[:0]
	c.sampleRTTs = c.sampleRTTs[:0]
	c.sampleCong = c.sampleCong[:0]
	c.sampleLoss = c.sampleLoss[:0]
	c.sampleCPU = c.sampleCPU[:0]
	c.sampleHop = c.sampleHop[:0]
	c.probeLossy = false
	c.lossRun = 0
	c.backingOff = false
	c.connsAdded = sh.conns > old.conns
}

// normalize clamps sh to the configured bounds: streams within Min and Max
// (and the error cap), enough connections for StreamsPerConn, no more
// connections than streams.
func (c *Controller) normalize(sh shape) shape {
	limit := c.maxStreams()
	if c.errCap > 0 {
		limit = min(limit, c.errCap)
	}
	s := min(max(sh.streams, c.cfg.MinStreams), max(limit, c.cfg.MinStreams))
	k := max(sh.conns, ceilDiv(s, c.cfg.StreamsPerConn))
	k = max(min(k, s, c.maxConns()), 1)
	return shape{s, k}
}

// maxStreams is the most streams a plan may have: MaxStreams, and a
// stream for each of a lossy path's connections.
func (c *Controller) maxStreams() int {
	if c.lossyPath() {
		return max(c.cfg.MaxStreams, c.cfg.LossyMaxConns)
	}
	return c.cfg.MaxStreams
}

// maxConns is the most connections a plan may have: LossyMaxConns on a
// lossy path, MaxConns elsewhere.
func (c *Controller) maxConns() int {
	if c.lossyPath() {
		return c.cfg.LossyMaxConns
	}
	return c.cfg.MaxConns
}

func (c *Controller) plan() Plan {
	interval := min(max(intervalRTTs*c.rtt, minInterval), maxInterval)
	var goodput int64
	if len(c.recent) > 0 {
		goodput = int64(median(c.recent))
	}
	return Plan{
		Streams:  c.cur.streams,
		Conns:    c.cur.conns,
		InFlight: c.inFlightPerStream(),
		Interval: interval,
		Goodput:  goodput,
		RTT:      c.rtt,
		Reason:   c.reason,
		Standby:  c.standby,
	}
}

// lossyGrowWindow is what a lossy path's connections keep in flight
// each, on average, below which probes add connections past the lossy
// plan (Config.LossyMaxConns).
const lossyGrowWindow = 128 << 10

// lossyInFlight is how many times the path's bandwidth-delay product a
// lossy path's plan keeps in flight, over all its streams.
const lossyInFlight = 2

// cleanInFlight is the same for a clean path, whose product is taken at
// the best rate measured, at least the guessed 1 Gbit/s (or what a start
// from an earlier measurement carried, Config.Start): enough to fill
// the path with a quarter to spare for the round trips that grow under
// load, and never less than the product and one window more, the window
// that crosses the link as the others wait (Start).
const cleanInFlight = 1.25

// inFlightPerStream is what each stream of the plan keeps in flight: its
// share of the clean path's product (cleanProduct), from half a channel
// window to a whole one (a quarter lost a loopback download 18 %); on a
// lossy path (lossyPath), its share of lossyInFlight times the product
// measured, from an eighth of a window.
//
// A plan sized by its connections' buffers has more channels than the
// product asks for (Start: a connection's buffers and one channel more),
// and a window for each kept twice the product in flight at 100 ms.
// What the path cannot carry waits in the server's channel buffers, which
// stock sshd grows 32 KiB at a time by copying them whole: the server
// stalled for seconds at the start of an upload, and the lanes with it.
// On a lossy path the connections are many because each carries only
// what its congestion window, cut by the losses, allows: a window for
// each queued several times the product at the server behind the slow
// connections' windows. Chunks waited there for seconds, the copy's
// watermark trailed far behind, and the spread bound stopped every lane
// until those chunks were copied again.
func (c *Controller) inFlightPerStream() int64 {
	w := c.cfg.ChannelWindow
	if c.minRTT <= 0 || c.cur.streams <= 0 {
		return w
	}
	if c.lossyPath() && c.baseRate > 0 {
		share := int64(lossyInFlight * c.baseRate * c.minRTT.Seconds() / float64(c.cur.streams))
		return min(max(share, w/8), w)
	}
	share := int64(c.cleanProduct() / float64(c.cur.streams))
	return min(max(share, w/2), w)
}

// cleanProduct is what a clean path's plan keeps in flight over all its
// streams. A plan of more streams than the best measured is a probe, or
// the way to one: it asks whether more in flight moves more, so its
// streams keep the best plan's share each.
func (c *Controller) cleanProduct() float64 {
	rate, streams := guessRate, 0
	if c.cfg.Start > 0 {
		// An earlier measurement's streams each carried a window.
		rate = max(rate, float64(int64(c.cfg.Start)*c.cfg.ChannelWindow)/c.minRTT.Seconds())
	}
	for _, m := range c.measured {
		if m.rate > rate {
			rate, streams = m.rate, m.sh.streams
		}
	}
	bdp := rate * c.minRTT.Seconds()
	if bdp < float64(c.cfg.ChannelWindow) {
		// A short path, where a request's time is the server's work
		// more than the round trip: a window each, as on loopback,
		// where half of one cost downloads 3-6 %.
		return float64(c.cur.streams) * float64(c.cfg.ChannelWindow)
	}
	product := max(cleanInFlight*bdp, bdp+float64(c.cfg.ChannelWindow))
	if streams > 0 && c.cur.streams > streams {
		product *= float64(c.cur.streams) / float64(streams)
	}
	return product
}

// ratio is a/b where a zero b means no gain unless a moved.
func ratio(a, b float64) float64 {
	if b <= 0 {
		if a > 0 {
			return math.Inf(1)
		}
		return 1
	}
	return a / b
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// appendLast appends x to xs, keeping only the last n values.
func appendLast[T any](xs []T, x T, n int) []T {
	xs = append(xs, x)
	if len(xs) > n {
		xs = append(xs[:0], xs[len(xs)-n:]...)
	}
	return xs
}

func ceilDiv[T int | int64](a, b T) T { return (a + b - 1) / b }

func formatRate(bytesPerSec float64) string {
	return fmt.Sprintf("%.1f MiB/s", bytesPerSec/(1<<20))
}

// plural formats n things, for reasons read by people.
func plural(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}

// The CPU as a limit. On loopback and on a LAN the cores, not the path,
// bound a copy: both ends' crypto, and on loopback the server's sshd
// beside hpncp on the same cores. There streams and connections add no
// goodput, only cost: each connection is another sshd at the far end,
// another set of buffers to copy through, more context switches; on a
// 2-core loopback a plan of 32 streams on 16 connections ran slower than
// one stream, at 1.5 times scp's CPU per byte, the far end's share of it
// the larger.
const (
	// cpuFull is the share of Config.Cores this process kept busy over a
	// measurement at which it has every core it can have: no plan
	// carries more (the embedded demo's server is in the process too).
	cpuFull = 0.9
	// cpuBusy is the share of Config.Cores this process kept busy over a
	// probe that added streams or connections and gained less than the
	// margin, at which the CPU is taken to be what held it: about one
	// core of two, all one end gets where the other end shares the
	// host (loopback), whose cost shows only as goodput that stays flat
	// while streams grow. On a long path a copy's CPU is a fraction of
	// that: its failed probes mean a full path, as before.
	cpuBusy = 0.45
	// cpuNoise: bytes per CPU second within this share of the best are
	// taken as equal, and the smaller plan, cheaper at the far end,
	// kept.
	cpuNoise = 0.05
)

// measurement is a plan measured: its goodput and the cores this
// process kept busy (CPU seconds per second; 0 where not told).
type measurement struct {
	sh   shape
	rate float64
	cpu  float64
}

// perCPU is m's bytes per CPU second, 0 where its CPU is unknown.
func (m measurement) perCPU() float64 {
	if m.cpu <= 0 {
		return 0
	}
	return m.rate / m.cpu
}

// note records the plan in force as measured at rate, with the median of
// its samples' CPU, and returns the record.
func (c *Controller) note(rate float64) measurement {
	m := measurement{sh: c.cur, rate: rate}
	if len(c.sampleCPU) > 0 {
		m.cpu = median(c.sampleCPU)
	}
	c.measured = append(c.measured, m)
	return m
}

// shortHop reports whether every connection told of in conns had a round
// trip in TCP (ConnSample.MinRTT) under queueMinRTT: on loopback or a LAN.
// The round trip the ends report may be longer: through a relay, or on
// loopback where the request timed at the start waited for a CPU (47 ms
// was seen). ok is false when none told.
func shortHop(conns []ConnSample) (short, ok bool) {
	for _, cs := range conns {
		if cs.MinRTT <= 0 {
			continue
		}
		if cs.MinRTT >= queueMinRTT {
			return false, true
		}
		ok = true
	}
	return ok, ok
}

// hopShort reports whether the connections had a short round trip in TCP
// (shortHop) in every sample of the measurement that told.
func (c *Controller) hopShort() bool {
	return len(c.sampleHop) > 0 && !slices.Contains(c.sampleHop, false)
}

// cpuFull reports whether m kept cpuFull of the cores busy.
func (c *Controller) cpuFull(m measurement) bool {
	return m.cpu > 0 && m.cpu >= cpuFull*float64(c.cfg.Cores)
}

// bestRate is the highest goodput measured since cpuBound's epoch began.
func (c *Controller) bestRate() float64 {
	best := 0.0
	for _, m := range c.measured {
		best = max(best, m.rate)
	}
	return best
}

// shrink measures, once the CPU binds, the single-connection plan: one
// stream where the windows allow, the cheapest plan there is. If that
// plan falls short (shrinkHalf), half of base. Then cpuSettle.
func (c *Controller) shrink() {
	c.shrunk = 0
	one := c.normalize(shape{1, 1})
	if c.cfg.MinStreams > 1 || c.base == one || c.tried(one) {
		if !c.shrinkHalf() {
			c.cpuSettle()
		}
		return
	}
	c.change(one, phaseShrink)
	c.reason = fmt.Sprintf("CPU-bound at %s: trying %s on %s",
		formatRate(c.baseRate), plural(one.streams, "stream"), plural(one.conns, "connection"))
}

// shrinkHalf measures half of base's streams and connections, where that
// is a plan not measured yet; it reports whether it started one.
func (c *Controller) shrinkHalf() bool {
	half := c.normalize(shape{c.base.streams / 2, c.base.conns / 2})
	if half.streams >= c.base.streams || c.tried(half) {
		return false
	}
	c.change(half, phaseShrink)
	c.reason = fmt.Sprintf("CPU-bound at %s: trying %s on %s",
		formatRate(c.baseRate), plural(half.streams, "stream"), plural(half.conns, "connection"))
	return true
}

// tried reports whether sh was measured since the epoch began.
func (c *Controller) tried(sh shape) bool {
	for _, m := range c.measured {
		if m.sh == sh {
			return true
		}
	}
	return false
}

// cpuSettle holds, of the plans measured whose goodput came within the
// margin of the best, the one that moved the most bytes per CPU second,
// the smallest of those within cpuNoise of it.
func (c *Controller) cpuSettle() {
	floor := c.bestRate() / (1 + margin)
	var pick measurement
	bestPer := 0.0
	for _, m := range c.measured {
		if m.rate >= floor {
			bestPer = max(bestPer, m.perCPU())
		}
	}
	found := false
	for _, m := range c.measured {
		if m.rate < floor || m.perCPU() < bestPer/(1+cpuNoise) {
			continue
		}
		if !found || smaller(m.sh, pick.sh) {
			pick, found = m, true
		}
	}
	if !found {
		c.hold()
		return
	}
	c.base, c.baseRate = pick.sh, pick.rate
	c.hold()
	c.reason = fmt.Sprintf("CPU-bound: plateau at %s", formatRate(pick.rate))
	if pick.cpu > 0 {
		c.reason += fmt.Sprintf(", %s per CPU second", formatRate(pick.perCPU()))
	}
}

// smaller reports whether a costs less than b: fewer connections, then
// fewer streams.
func smaller(a, b shape) bool {
	return a.conns < b.conns || (a.conns == b.conns && a.streams < b.streams)
}

// lossyPath reports whether base's connections lost segments through
// its measurement on a path long enough for a loss to cost its
// connection seconds, with no standing queue at the bottleneck (the
// losses are the path's own, not a full link's overflow), for a copy
// large enough to pay for more connections.
func (c *Controller) lossyPath() bool { return c.baseLossy && c.lossyRoute(c.baseRTT) }

// lossyRoute is lossyPath but for the loss, for a plan measured at rtt
// seconds (0: unknown).
// Connections whose round trip in TCP is a LAN's (shortHop) recover
// from a loss within milliseconds, whatever the ends report: on
// loopback, where the ends reported 10 ms, a download's receiver saw
// segments out of order and opened 24 connections on 2 cores.
func (c *Controller) lossyRoute(rtt float64) bool {
	return c.minRTT >= queueMinRTT && !c.hop && !c.queuedAt(rtt) && !c.small()
}

// lossyEarly is how many intervals in a row in which a connection lost
// segments tell, from when the first plan's streams run, that the path
// is lossy: its connections then open at once, without waiting for the
// new connections' settling and a measurement, seconds on a long path
// and a good share of a large copy.
const lossyEarly = 2

// lossyStart counts the first plan's intervals that saw loss, and once
// lossyEarly of them came in a row, on a route lossyRoute accepts at the
// interval's round trip, makes the plan in force, at rate, the base and
// opens the lossy path's connections. It reports whether it did; the
// baseline's measurement goes on untouched when it did not.
func (c *Controller) lossyStart(s Sample, rate float64) bool {
	if c.phase != phaseBaseline || c.probed || s.AppLimited || s.Opening > 0 || c.cur.conns >= c.cfg.LossyConns {
		return false
	}
	if !lossSeen(s.Conns) {
		c.lossRun = 0
		return false
	}
	c.lossRun++
	if !c.lossyRoute(s.RTT.Seconds()) {
		return false
	}
	if c.cfg.LossyConns > c.cfg.MaxConns {
		// The lossy plan may follow at the next interval: its
		// connections are dialed now, on standby (Plan.Standby).
		c.standby = c.cfg.LossyConns
	}
	if c.lossRun < lossyEarly {
		return false
	}
	c.sampleLoss = append(c.sampleLoss[:0], true)
	c.sampleRTTs = c.sampleRTTs[:0]
	if s.RTT > 0 {
		c.sampleRTTs = append(c.sampleRTTs, s.RTT.Seconds())
	}
	c.accept(c.cur, rate)
	c.probeNext()
	return true
}

// lossy reports whether a connection lost segments in most of a
// measurement's intervals.
func lossy(seen []bool) bool {
	n := 0
	for _, l := range seen {
		if l {
			n++
		}
	}
	return len(seen) > 0 && 2*n > len(seen)
}

// lossSeen reports whether a connection lost segments in an interval
// (lost).
func lossSeen(conns []ConnSample) bool {
	for _, cs := range conns {
		if lost(cs) {
			return true
		}
	}
	return false
}

// lost reports whether cs lost segments in its interval: ConnSample.LimitedBy
// "loss" (retransmits where it sends, holes in what it received where it
// receives), unless every retransmit was one the peer reported it had
// already (Spurious). On loopback, or through a relay on it, a sender whose
// peer waits for a CPU sends tail-loss probes that arrive as duplicates;
// counted as loss, they once made a 2-core host's relayed copy open 16
// connections for a path that lost nothing, and run at half its rate.
func lost(cs ConnSample) bool {
	return cs.LimitedBy == "loss" && (cs.Retrans == 0 || cs.Retrans > cs.Spurious)
}

// congestedShare is the share of the bytes of an interval moved by
// connections the kernel said were held by their congestion windows or
// by loss (ConnSample.LimitedBy "cwnd", "loss"); ok is false when no
// connection told.
func congestedShare(conns []ConnSample) (share float64, ok bool) {
	var all, held int64
	for _, cs := range conns {
		if cs.LimitedBy == "" || cs.Bytes <= 0 {
			continue
		}
		all += cs.Bytes
		if cs.LimitedBy == "cwnd" || lost(cs) {
			held += cs.Bytes
		}
	}
	if all == 0 {
		return 0, false
	}
	return float64(held) / float64(all), true
}
