package protocol

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/hpncp/hpncp/internal/sleep"
)

// dialGap staggers new connections so that sshd's MaxStartups (10:30:100 by
// default: random refusals from the 10th unauthenticated connection on)
// never sees a burst from one client; maxDialing bounds the burst. The
// gap is short of a long path's round trip: the connections of a first
// plan start their slow starts together.
const dialGap = 25 * time.Millisecond

// maxDialing bounds connections being set up at once, for the same
// reason. It is above the connections a long path's first plan opens
// (window.Config.ConnBytes: five at 100 ms on stock buffers): one that
// waits for a slot starts its slow start into the queue the others
// keep, and carried a sixth of their share for seconds.
const maxDialing = 6

// DefaultReconnect is how long a pool whose every connection was lost
// keeps dialing again before it gives up, when its Options say nothing.
const DefaultReconnect = 30 * time.Second

// Re-dials after a lost connection wait redialFirst, then twice as long
// each time, up to redialMax: a server that is restarting, or refusing
// bursts (MaxStartups), is not asked again in a tight loop.
const (
	redialFirst = 250 * time.Millisecond
	redialMax   = 4 * time.Second
)

// pool hands out SFTP sessions (one channel each) spread over several SSH
// connections to one host. Sessions are reused once released.
type pool struct {
	dial   func(context.Context) (*ssh.Client, Readying, error)
	packet int // request size of the sessions
	logf   func(format string, args ...any)
	// logMu orders the pool's log lines before close: a dial that ends
	// after the run that made the pool has returned says nothing, since
	// the run's log may be gone by then (logClosed).
	logMu     sync.Mutex
	logClosed bool

	mu       sync.Mutex
	conns    []*pconn
	dialing  int
	lastDial time.Time
	// dialErr is the last failed dial: while a connection is alive, no more
	// are tried once one failed, and the copy goes on with what it has.
	dialErr error
	// reconnect bounds re-dialing once every connection is lost: from
	// lostAt, dials are tried again, redialWait apart, until it passes.
	reconnect time.Duration
	// silent, when not nil, tells whether a connection that ended was
	// given up because its server stopped answering.
	silent  func(*ssh.Client) error
	stopped bool // the dialer refused to dial again: the copy is given up
	// silenced is done once a connection was given up for its server's
	// silence; it ends the dials under way.
	silenced   context.Context
	silence    context.CancelFunc
	lostAt     time.Time
	redialWait time.Duration
	nextDial   time.Time // no dial before it
	closed     bool
	dialReady  chan struct{} // closed and replaced whenever a dial ends
	// preparing counts sessions being opened ahead of need (prepare);
	// prepared is closed and replaced whenever one of them is ready.
	// prepOpening counts those of them past the wait for connections,
	// their channels being opened.
	preparing   int
	prepOpening int
	prepared    chan struct{}
	// aheadConns counts the connections still to be dialed that will
	// bring aheadSessions sessions each, opened as soon as they were up
	// (Options.Ahead): prepare counts them as on their way.
	aheadConns, aheadSessions int
	// standbyTo is how many connections, live or dialing, standby keeps
	// dialing towards; standbyRunning that its dialer runs.
	standbyTo      int
	standbyRunning bool
}

type pconn struct {
	id    int // numbers the pool's connections from 0, in the order opened
	c     *ssh.Client
	owned bool // opened by the pool, so closed by it
	idle  []*rawSession
	open  int // sessions open on it, idle or not
	// held counts its sessions lent out for anything but a parallel
	// copy's streams: a temporary file's handle, a listing. They carry
	// little, and streams are spread as if they were not there.
	held int
	// readying counts its sessions being opened ahead (expectLocked),
	// not yet open.
	readying int
	full     bool // the server refused a channel: its MaxSessions is reached
	dead     bool
	// reserve marks a connection dialed on standby: no stream is placed
	// on it until a plan asks for more connections than the others.
	reserve bool
	// silent, once dead, is why the connection was given up when its
	// server stopped answering (keepalives); nil for any other end.
	silent error
}

func newPool(first *ssh.Client, firstSessions int, dial func(context.Context) (*ssh.Client, Readying, error),
	packet int, logf func(string, ...any)) *pool {
	silenced, silence := context.WithCancel(context.Background())
	p := &pool{dial: dial, packet: packet, logf: logf, reconnect: DefaultReconnect,
		silenced: silenced, silence: silence,
		dialReady: make(chan struct{}), prepared: make(chan struct{})}
	// The first sessions are the end's own, for metadata: held, as the
	// sessions lent out for such things are.
	p.watch(&pconn{c: first, open: firstSessions, held: firstSessions})
	return p
}

// adopt makes s, a session already open on the first connection, the
// first idle one.
func (p *pool) adopt(s *rawSession) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pc := p.conns[0]
	pc.open++
	pc.idle = append(pc.idle, s)
}

// watch adds a connection and marks it dead when it goes away.
func (p *pool) watch(pc *pconn) {
	pc.id = len(p.conns)
	p.conns = append(p.conns, pc)
	go func() {
		_ = pc.c.Wait()
		p.mu.Lock()
		why := p.silent
		p.mu.Unlock()
		var silent error
		if why != nil {
			silent = why(pc.c)
		}
		if silent != nil {
			// The path stopped answering: a dial on it would wait out
			// its ConnectTimeout, and the copy with it.
			p.silence()
		}
		p.mu.Lock()
		pc.dead, pc.silent = true, silent
		idle := pc.idle
		pc.idle = nil
		p.mu.Unlock()
		for _, s := range idle {
			_ = s.Close()
		}
	}()
}

// session is a session the pool lent out.
type session struct {
	*rawSession
	pc   *pconn
	held bool // counted in pc.held
}

// acquire returns a session, reusing an idle one first, else opening one
// on the least loaded connection. Until conns connections are open, a
// session that would share a busy connection waits for a new one instead,
// so that streams spread over connections (and so over CPU cores on both
// ends). When no more connections can be opened it makes do with channels
// on the ones it has.
func (p *pool) acquire(ctx context.Context, conns int) (*session, error) {
	return p.get(ctx, conns, false, false)
}

// acquireStream is acquire for a stream of a parallel copy: while the
// connections asked for are being dialed, it waits for them all (see
// get), so that the copy's streams start together, spread over them.
func (p *pool) acquireStream(ctx context.Context, conns int) (*session, error) {
	return p.get(ctx, conns, false, true)
}

// get is acquire; fresh, for prepare only, skips the idle sessions and
// those being prepared, to open a new one; together is acquireStream.
func (p *pool) get(ctx context.Context, conns int, fresh, together bool) (*session, error) {
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, errors.New("sftp session pool closed")
		}
		var best, reuse, spare *pconn
		live := 0
		// A stream is placed by the streams a connection carries: the
		// sessions held for other things leave its buffers to them.
		// Counted as streams, the first connection's temporary file and
		// probe left it one stream where the others got three or four,
		// and it carried well below its share.
		held := func(pc *pconn) int {
			if together {
				return pc.held
			}
			return 0
		}
		busy := func(pc *pconn) int { return pc.open - len(pc.idle) - held(pc) }
		for _, pc := range p.conns {
			if pc.dead {
				continue
			}
			if pc.reserve {
				// Never full: it has no session until taken.
				if spare == nil {
					spare = pc
				}
				continue
			}
			live++
			// An idle session is reused from the connection with the
			// fewest busy ones: sessions given back by streams that were
			// stopped are on any connection, and taking them in order
			// would pile a copy's streams on one connection's buffers
			// while another idles.
			if len(pc.idle) > 0 && !fresh && (reuse == nil || busy(pc) < busy(reuse)) {
				reuse = pc
			}
			if !pc.full && (best == nil || pc.open-held(pc) < best.open-held(best)) {
				best = pc
			}
		}
		// While the connections asked for are being dialed, streams wait
		// for them all, and then spread over them. Placed on the first
		// connection meanwhile, a long path's streams met its MaxSessions
		// and filled its socket buffers, and stayed there; and streams
		// started on one connection ahead of the others fill the
		// bottleneck's queue before the others' slow starts end, which
		// then, cubic's HyStart ending them early, carry a small
		// fraction of their share for seconds.
		if spare != nil && (live < conns || best == nil) {
			// A connection on standby is up: it is the one to grow to,
			// without a dial.
			spare.reserve = false
			p.mu.Unlock()
			continue
		}
		barrier := together && conns > 1 && live < conns && p.dial != nil && (p.dialing > 0 || p.dialErr == nil)
		// A stream goes where the fewest run: a session idle on a
		// busier connection is left for other things, and one is
		// opened on the other at once, unless sessions are on their way
		// to it. Taken, the idle one put a probe's second stream beside
		// the first on one connection while the connection dialed for
		// it stood idle, and the probe measured no gain.
		direct := together && reuse != nil && best != nil && best.readying == 0 && busy(best) < busy(reuse)
		if direct {
			reuse = nil
		}
		if reuse != nil && !barrier {
			n := len(reuse.idle)
			c := reuse.idle[n-1]
			reuse.idle = reuse.idle[:n-1]
			if !together {
				reuse.held++
			}
			p.mu.Unlock()
			return &session{c, reuse, !together}, nil
		}
		// A session opened ahead is on its way: the wait is shorter than
		// opening another. The streams it was opened for wait for it
		// however long it takes; a session for anything else does not
		// wait for one still waiting for the connections its copy asked
		// for, a dial of some nine round trips: the temporary files and
		// small files of a tree, which need one session on any
		// connection, would wait that long behind the large files'
		// streams.
		if p.dial != nil && p.aheadConns > p.dialing && live+p.dialing < conns {
			// A connection dialed ahead is up or nearly: taken at
			// once, without the gap between dials (it was dialed
			// beside the first) and before waiting for any sessions,
			// so that each connection's sessions are the streams' as
			// they come (the dial returns before them, see dialOne).
			p.startDial(ctx) // unlocks
			continue
		}
		if !fresh && !direct && (together && p.preparing > 0 || p.prepOpening > 0) {
			ready := p.prepared
			p.mu.Unlock()
			select {
			case <-ready:
			case <-ctx.Done():
			}
			continue
		}
		// Grow towards conns connections, and past them when every one
		// is at the server's MaxSessions. With none alive, dial again
		// whatever failed before, until the reconnect budget is spent.
		redial := live == 0 && p.dial != nil
		if redial {
			if err := p.redialDue(); err != nil {
				p.mu.Unlock()
				return nil, err
			}
		}
		growing := p.dial != nil && (p.dialErr == nil || redial) && (live+p.dialing < conns || best == nil)
		if growing && (best == nil || best.open > 0) {
			if waited, err := p.awaitDialTurn(ctx); waited {
				if err != nil {
					return nil, err
				}
				continue
			}
			p.startDial(ctx) // unlocks
			continue
		}
		if best == nil || (barrier && p.dialing > 0 && best.open > 0) {
			if p.dialing > 0 {
				p.waitDial(ctx) // unlocks
				continue
			}
			err := p.silentCause()
			if err == nil {
				err = p.dialErr
			}
			p.mu.Unlock()
			if err == nil {
				err = errors.New("no connection can take another SFTP session: all are closed or at the server's MaxSessions")
			}
			return nil, &ConnError{Err: err}
		}
		best.open++
		if fresh {
			p.prepOpening++
		}
		if !together {
			best.held++
		}
		p.mu.Unlock()

		c, err := openRawSession(best.c, p.packet)
		if err == nil {
			// prepare counts a prepared session out once it is idle.
			return &session{c, best, !together}, nil
		}
		p.mu.Lock()
		if fresh {
			p.prepOpening--
		}
		if !together {
			best.held--
		}
		best.open--
		var oce *ssh.OpenChannelError
		// sshd refuses a session beyond MaxSessions with "open failed",
		// as connect-failed; other servers say administratively prohibited.
		if errors.As(err, &oce) && (oce.Reason == ssh.Prohibited || oce.Reason == ssh.ConnectionFailed) {
			best.full = true
			p.log("the server refused channel %d on a connection: its MaxSessions is reached", best.open+1)
			p.mu.Unlock()
			continue
		}
		if connGone(err) {
			// The connection is gone and its watcher has not yet been told:
			// its channels close before its Wait returns.
			best.dead = true
			p.mu.Unlock()
			continue
		}
		why := p.silent
		p.mu.Unlock()
		if why != nil {
			if silent := why(best.c); silent != nil {
				// Given up for its server's silence: the error is the
				// keepalive's, and the connection is as gone.
				p.mu.Lock()
				best.dead, best.silent = true, silent
				p.mu.Unlock()
				p.silence()
				continue
			}
		}
		return nil, err
	}
}

// prepare opens sessions in the background, placed as acquire would place
// them among up to conns connections, until n are idle or being opened,
// so that the streams of a copy about to start find them ready. A
// session that cannot be opened is left for acquire to fail on.
func (p *pool) prepare(ctx context.Context, n, conns int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	ready := p.preparing + p.aheadConns*p.aheadSessions
	for _, pc := range p.conns {
		if !pc.dead { // one on standby has no sessions
			ready += len(pc.idle)
		}
	}
	for range n - ready {
		p.preparing++
		go func() {
			s, err := p.get(ctx, conns, true, true)
			var unused *session
			p.mu.Lock()
			p.preparing--
			if err == nil {
				p.prepOpening--
				// Made idle before the waiters are woken, for them to find.
				if s.pc.dead || p.closed {
					s.pc.open--
					unused = s
				} else {
					s.pc.idle = append(s.pc.idle, s.rawSession)
				}
			}
			p.wakePrepared()
			p.mu.Unlock()
			if unused != nil {
				_ = unused.Close()
			}
		}()
	}
}

// wakePrepared wakes those waiting for sessions being prepared: one is
// ready, or will not be; p.mu is held.
func (p *pool) wakePrepared() {
	close(p.prepared)
	p.prepared = make(chan struct{})
}

// waitDial waits, with p.mu held on entry and released, until a dial in
// progress ends or ctx is done.
func (p *pool) waitDial(ctx context.Context) {
	ready := p.dialReady
	p.mu.Unlock()
	select {
	case <-ready:
	case <-ctx.Done():
	}
}

// awaitDialTurn, with p.mu held, returns false, still holding it, when
// a dial may start now. Otherwise it releases p.mu, waits for a dial to
// end (maxDialing are under way) or out the gap between dials, and
// returns true, with ctx's error if it ended the wait: the caller looks
// again.
func (p *pool) awaitDialTurn(ctx context.Context) (bool, error) {
	if p.dialing >= maxDialing {
		p.waitDial(ctx) // unlocks
		return true, nil
	}
	if wait := time.Until(laterOf(p.lastDial.Add(dialGap), p.nextDial)); wait > 0 {
		p.mu.Unlock()
		return true, sleep.For(ctx, wait)
	}
	return false, nil
}

// countDial counts a dial about to start, with p.mu held.
func (p *pool) countDial() {
	p.dialing++
	p.lastDial = time.Now()
}

// startDial, with p.mu held on entry and released, dials one more
// connection (dialOne), counted as dialing from now.
func (p *pool) startDial(ctx context.Context) {
	p.countDial()
	p.mu.Unlock()
	p.dialOne(ctx, false)
}

// dialOne opens one more connection, on standby when reserve is set. A
// failure is remembered and ends growth: the transfer goes on over the
// connections that work.
func (p *pool) dialOne(ctx context.Context, reserve bool) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(p.silenced, cancel)()
	c, ready, err := p.dial(ctx)
	p.mu.Lock()
	defer p.mu.Unlock()
	// The first dials are those of the connections dialed ahead, whether
	// they came with their sessions or failed.
	p.aheadConns = max(p.aheadConns-1, 0)
	p.dialing--
	close(p.dialReady)
	p.dialReady = make(chan struct{})
	switch {
	case err != nil:
		p.dialErr = err
		if errors.Is(err, context.Canceled) && (ctx.Err() == nil || p.silenced.Err() != nil) {
			// The dialer was stopped from outside (the copy is being
			// given up): nothing more is dialed.
			p.stopped = true
		}
		if p.live() == 0 {
			p.redialWait = min(max(2*p.redialWait, redialFirst), redialMax)
			p.nextDial = time.Now().Add(p.redialWait)
			p.log("could not connect again: %v", err)
		} else {
			p.log("could not open another connection, going on with %d: %v", p.live(), err)
		}
	case p.closed:
		_ = c.Close()
	default:
		p.dialErr = nil
		p.lostAt, p.redialWait = time.Time{}, 0
		// A connection that comes with sessions being opened was dialed
		// ahead for the first plan's streams (Options.Ahead), taken by
		// whichever dial came first: it is the plan's, not on standby.
		reserve = reserve && ready.N == 0
		pc := &pconn{c: c, owned: true, reserve: reserve}
		p.watch(pc)
		// The connection counts as up before its sessions are: the
		// streams waiting for the copy's connections (get's barrier)
		// then start on the sessions of each as they come, not on the
		// last one's: a server's Nagle can hold one connection's OPEN
		// reply a round trip behind its VERSION, and every stream would
		// wait for it.
		p.expectLocked(pc, ready.N, ready.Wait)
		if reserve {
			p.log("opened connection %d, on standby", len(p.conns))
		} else {
			p.log("opened connection %d", len(p.conns))
		}
	}
}

// standby dials connections in the background, as growth would (at most
// maxDialing at once, dialGap apart), until conns are live or dialing,
// and keeps the new ones out of the streams' placement until a plan asks
// for more connections than the others (get). A plan that turns to many
// connections then finds them up: on a long path a dial is some ten
// round trips, a few at a time, and a plan of many connections would
// wait seconds for them. Like growth, it stops at
// the first failed dial, and once the pool is closed.
func (p *pool) standby(conns int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dial == nil || p.closed || conns <= p.standbyTo {
		return
	}
	p.standbyTo = conns
	if p.standbyRunning {
		return
	}
	p.standbyRunning = true
	go func() {
		ctx := context.Background() // dialOne ends it with the pool
		p.mu.Lock()
		for !p.closed && !p.stopped && p.dialErr == nil && p.live()+p.dialing < p.standbyTo {
			if waited, _ := p.awaitDialTurn(ctx); waited {
				p.mu.Lock()
				continue
			}
			p.countDial()
			p.mu.Unlock()
			go p.dialOne(ctx, true)
			p.mu.Lock()
		}
		p.standbyRunning = false
		p.mu.Unlock()
	}()
}

// connGone reports whether err, from opening a channel, says the
// connection under it failed: x/crypto answers io.EOF once it knows, the
// socket's error while it does not yet.
func connGone(err error) bool {
	var ne net.Error
	return errors.Is(err, io.EOF) || errors.As(err, &ne) || Lost(err)
}

func laterOf(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// silentCause is why a connection was given up for its server's
// silence, if one was; p.mu is held.
func (p *pool) silentCause() error {
	for _, pc := range p.conns {
		if pc.silent != nil {
			return pc.silent
		}
	}
	return nil
}

// live counts the connections not known to be gone; p.mu is held.
func (p *pool) live() int {
	n := 0
	for _, pc := range p.conns {
		if !pc.dead {
			n++
		}
	}
	return n
}

// redialDue is called, with p.mu held, when no connection is alive: it
// starts the reconnect budget's clock the first time, and fails once the
// budget is spent, with the last dial's error.
func (p *pool) redialDue() error {
	if silent := p.silentCause(); silent != nil {
		// The path itself stopped answering: a dial would wait out its
		// ConnectTimeout for nothing, and the copy fails now, as scp's
		// would.
		return &ConnError{Err: silent}
	}
	if p.stopped {
		return &ConnError{Err: p.dialErr}
	}
	if p.lostAt.IsZero() {
		p.lostAt = time.Now()
		p.log("every connection is lost; connecting again for up to %s", p.reconnect)
	}
	if time.Since(p.lostAt) <= p.reconnect {
		return nil
	}
	cause := p.dialErr
	if cause == nil {
		cause = errors.New("every connection was closed")
	}
	return &ConnError{Err: fmt.Errorf("no connection to the server for %s: %w", p.reconnect.Round(time.Second), cause)}
}

// release returns a session for reuse, or closes it when it failed, its
// connection is gone or broken is set.
func (p *pool) release(s *session, broken bool) {
	p.mu.Lock()
	if s.held {
		s.held = false
		s.pc.held--
	}
	if broken || s.failed() || s.pc.dead || p.closed {
		s.pc.open--
		p.mu.Unlock()
		_ = s.Close()
		return
	}
	s.pc.idle = append(s.pc.idle, s.rawSession)
	p.mu.Unlock()
}

// log writes a line through logf while the pool is open.
func (p *pool) log(format string, args ...any) {
	p.logMu.Lock()
	defer p.logMu.Unlock()
	if !p.logClosed && p.logf != nil {
		p.logf(format, args...)
	}
}

func (p *pool) close() {
	// Before p.mu: a dial logs with p.mu held.
	p.logMu.Lock()
	p.logClosed = true
	p.logMu.Unlock()
	p.silence() // ends dials under way
	p.mu.Lock()
	p.closed = true
	conns := p.conns
	// A connection's watcher empties its idle list when it goes away.
	var idle []*rawSession
	for _, pc := range conns {
		idle = append(idle, pc.idle...)
		pc.idle = nil
	}
	p.mu.Unlock()
	for _, s := range idle {
		_ = s.Close()
	}
	for _, pc := range conns {
		if pc.owned {
			_ = pc.c.Close()
		}
	}
}

// liveConn returns a connection that is alive, dialing one as acquire
// would when every connection is lost. The session acquire opened on it
// to make sure is kept idle for the streams.
func (p *pool) liveConn(ctx context.Context) (*ssh.Client, error) {
	s, err := p.acquire(ctx, 1)
	if err != nil {
		return nil, err
	}
	c := s.pc.c
	p.release(s, false)
	return c, nil
}

// spareConns returns the pool's live connections that have not refused
// a channel and are not on standby, in the order opened.
func (p *pool) spareConns() []*ssh.Client {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []*ssh.Client
	for _, pc := range p.conns {
		if !pc.dead && !pc.full && !pc.reserve {
			out = append(out, pc.c)
		}
	}
	return out
}

// gone marks conn's connection dead ahead of its watcher, which will
// close its idle sessions.
func (p *pool) gone(conn *ssh.Client) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pc := range p.conns {
		if pc.c == conn {
			pc.dead = true
		}
	}
}
