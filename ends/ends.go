// Package ends opens the ends of a copy: a local path, or a path on an SSH
// host over SFTP or, where -O asks for it or the host has no SFTP server,
// over the legacy scp protocol. Hosts keeps a run's connections, one set
// per destination, tells the path's RTT to the pipeline, says after a
// failure whether a server stopped responding, and closes everything in
// the order that does not wait on a server. The copy command, hpncp bench
// and hpncp ssh reach hosts through it; none of them dials on its own.
package ends

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/hpncp/hpncp/internal/starttrace"
	"github.com/hpncp/hpncp/protocol"
	"github.com/hpncp/hpncp/protocol/scp"
	"github.com/hpncp/hpncp/sshconn"
	"github.com/hpncp/hpncp/transfer"
)

// Options say how a run reaches its hosts.
type Options struct {
	// SSH holds the connection settings every host starts from; a
	// location's own user and port (user@host, scp://host:port) win.
	SSH sshconn.Options
	// Legacy is -O: every remote end speaks the legacy scp protocol.
	Legacy bool
	// RcvBuf and SndBuf are the TCP socket buffers of every connection
	// (--tcp-rcvbuf, --tcp-sndbuf); 0 leaves the kernel's autotuning.
	RcvBuf, SndBuf int
	// CC is the TCP congestion control algorithm of every connection
	// (--cc), set before its SSH handshake; "" leaves the system's.
	// Where CCBestEffort is set, a kernel that refuses it is not an
	// error: the connection keeps the system's, and -v says so.
	CC           string
	CCBestEffort bool
	// Predial, when not nil, is asked once a host's first connection has
	// done its TCP handshake, with the round trip the kernel measured on
	// it, how many connections the copy's first plan will want, the first
	// among them. The others are dialed at once, their key
	// exchanges beside the first's authentication, and authenticate once
	// it has succeeded (so that nothing is asked twice, nor a refused key
	// offered many times). The copy's streams take them as they ask for
	// connections. Each connection costs a long path eight round trips or
	// so before it carries a byte. Where sessions is above zero, each
	// connection, the first among them, also opens that many SFTP
	// sessions for the copy's streams as soon as it is up, rather than
	// three round trips after the copy asks for them.
	Predial func(rtt time.Duration) (conns, sessions int)
	// PreOpen, when not "", is the remote file a download of one file
	// reads (its path as Endpoint gives it): the sessions Predial's
	// connections open ahead also open it, behind INIT, once the first
	// connection's start has shown it a regular file, so that each
	// stream's first READ goes out a round trip sooner
	// (protocol.PreOpen).
	PreOpen string
	// PreCreate, when its Final is set, is the target of an upload of
	// one small file (its path as Endpoint gives it) and the temporary
	// file the copy will write for it: the target host's SFTP start
	// creates that file behind the target's stat, a round trip before the
	// copy would (protocol.PreCreate). Close removes it if nothing took
	// it.
	PreCreate protocol.PreCreate
	// Warm, for an upload, has every connection but the first grow its
	// congestion window with padding from its authentication until the
	// copy's data flows on it (sshconn.Client.Warm): the spares Predial
	// dials, idle while the copy is set up, and those the pool dials
	// later (a tree's tar streams wait for a command to start on the
	// server).
	Warm bool
	// WarmFirst has the first connection warm too, from its
	// authentication, where Warm is set: for an upload of large files,
	// not of a tree, whose first connection's requests (listings,
	// directories) would wait behind the padding. Left cold, the first
	// connection started its data half a second after the warmed ones
	// at 100 ms, into the queue they kept, and HyStart ended its slow
	// start at a few dozen segments: it carried little for the whole
	// copy and held the last chunks of an upload, which cannot be
	// abandoned. Its requests go out into a window that opens with each
	// acknowledgment, and the start was measured no longer.
	WarmFirst bool
}

// warmMost bounds a connection's warming: at 100 ms the copy's data
// flows half a second after its authentication.
const warmMost = 3 * time.Second

// warm warms c (Options.Warm) and says with -v what it did.
func (h *Hosts) warm(ctx context.Context, c *sshconn.Client) {
	r, ok := c.Warm(ctx, warmMost)
	if ok && h.opts.SSH.Logf != nil {
		h.opts.SSH.Logf("warmed a connection: %s", r)
	}
}

// sshOptions are the connection settings with the socket buffers and
// congestion control applied before each SSH handshake. A buffer the
// kernel capped is a warning, not a failure: the smaller buffer is in
// force and the copy can go on.
func (o Options) sshOptions() sshconn.Options {
	co := o.SSH
	if o.RcvBuf == 0 && o.SndBuf == 0 && o.CC == "" {
		return co
	}
	var told sync.Once
	co.Tune = func(c net.Conn) error {
		err := sshconn.SetBuffers(c, o.RcvBuf, o.SndBuf)
		if errors.Is(err, sshconn.ErrCapped) {
			if co.Warnf != nil {
				// Both buffers may be capped: a warning each.
				capped := []error{err}
				if j, ok := err.(interface{ Unwrap() []error }); ok {
					capped = j.Unwrap()
				}
				for _, e := range capped {
					co.Warnf("hpncp: warning: %v", e)
				}
			}
			err = nil
		}
		if err != nil || o.CC == "" {
			return err
		}
		err = sshconn.SetCongestion(c, o.CC)
		told.Do(func() {
			switch {
			case co.Logf == nil:
			case err == nil:
				co.Logf("TCP congestion control %s on this host's connections", o.CC)
			case o.CCBestEffort:
				co.Logf("TCP congestion control left to the system's (%s): %v", sshconn.Congestion(c), err)
			}
		})
		if o.CCBestEffort {
			return nil
		}
		return err
	}
	return co
}

// Dial connects to host with o's settings, for a command that needs the
// SSH connection itself (hpncp ssh) rather than a copy's end.
func Dial(ctx context.Context, o Options, host string) (*sshconn.Client, error) {
	return sshconn.NewDialer(o.sshOptions()).Dial(ctx, host)
}

// ErrNoSFTP reports a host without an sftp subsystem: Open then copies
// over the legacy scp protocol.
var ErrNoSFTP = errors.New("no sftp subsystem")

// AbortGrace is how long an interrupted copy may clean up over its
// connections while none of them hears from its server: then they are
// closed under it. A server that answers keeps the clean-up going however
// slowly the machine runs it; a stalled one ends it.
const AbortGrace = 3 * time.Second

// abortAtMost bounds an interrupted copy's clean-up even while its
// servers keep answering.
const abortAtMost = time.Minute

// Hosts holds the SSH connections and remote ends of a run, one end per
// distinct destination. Close it when the run is over.
type Hosts struct {
	opts Options
	base sshconn.Options
	sftp map[string]*protocol.SFTP
	scp  map[string]*scp.Host // hosts reached with the legacy scp protocol

	mu      sync.Mutex
	clients []*sshconn.Client
	// first is each SFTP end's first connection and host, where its
	// helper runs; delta the ends' delta services (DeltaHosts).
	first map[transfer.FS]firstConn
	delta map[transfer.FS]*deltaHost
	// deltaLine, once DeltaHosts has been asked for, is its launch line:
	// each host's helper is then started on its first connection as soon
	// as it is up, beside the SFTP start (early).
	deltaLine func(host, extra string) (string, error)
	early     map[*sshconn.Client]*deltaHost
	// walkAhead are the trees to be walked by each destination's helper
	// as soon as it is up (WalkAhead).
	walkAhead map[string][]walkAsk
	// pullAhead is the pull each destination's helper is asked for as
	// soon as it is up (PullAhead).
	pullAhead map[string]pullAsk
	// pushAhead is the basis each destination's helper is asked to sign
	// as it starts (PushAhead).
	pushAhead map[string]pushAsk
	closed    bool
	// bg are the run's goroutines that dial, warm or start a helper in
	// the background: Close waits for them, so that none logs, or holds
	// a connection, once the run is over.
	bg sync.WaitGroup // Close ran: a dial that ends later closes its connection
	// dials are the dials under way (a pool's, in the background too),
	// added to under mu while the run is not closed: Close waits for
	// them, cut short by aborted, so that none logs once it returned.
	dials sync.WaitGroup
	// aborted ends every dial, under way or to come, once the copy has
	// been given up (Abort).
	aborted     context.Context
	stopDialing context.CancelFunc
}

// firstConn is an SFTP end's first connection, and the host it reached.
type firstConn struct {
	c     *sshconn.Client
	host  string
	conns func() ([]*sshconn.Client, <-chan struct{}) // all of them up so far (deltaHost.conns)
}

// New returns an empty set of hosts that connects with o.
func New(o Options) *Hosts {
	aborted, stop := context.WithCancel(context.Background())
	return &Hosts{opts: o, base: o.sshOptions(),
		sftp: map[string]*protocol.SFTP{}, scp: map[string]*scp.Host{},
		first: map[transfer.FS]firstConn{}, delta: map[transfer.FS]*deltaHost{},
		early: map[*sshconn.Client]*deltaHost{}, aborted: aborted, stopDialing: stop}
}

// Run is a copy with its ends open, ready to go.
type Run struct {
	// Legacy says the copy goes over the legacy scp protocol: -O was
	// given or a host has no SFTP server.
	Legacy bool
	// Options are the copy's options as the copy runs with them: the
	// resume journal's directory set, and no tar mode over scp.
	Options transfer.Options

	sftp []transfer.Endpoint
	scp  []transfer.Endpoint
}

// Copy runs the copy: the last end is the target, the others its sources.
func (r *Run) Copy(ctx context.Context) (*transfer.Result, error) {
	ends := r.sftp
	if r.Legacy {
		ends = r.scp
	}
	return transfer.Copy(ctx, ends[:len(ends)-1], ends[len(ends)-1], r.Options)
}

// Open connects to the hosts of locs and returns the copy of every
// location but the last to the last with options o. It picks the
// protocol: SFTP unless -O was given or a host has no sftp subsystem,
// then the legacy scp protocol for every end, if o allows it
// (Options.ValidateSCP). A tree's listing session starts opening at once.
// Errors about o are *transfer.OptionError.
func (h *Hosts) Open(ctx context.Context, locs []transfer.Location, o transfer.Options) (*Run, error) {
	r := &Run{Legacy: h.opts.Legacy, sftp: make([]transfer.Endpoint, len(locs))}
	for i := 0; i < len(locs) && !r.Legacy; i++ {
		// The copy begins with a stat of each operand (the target's,
		// each source's) unless it reads a list of files: asked for with
		// the host's SFTP start, it costs no round trip of its own.
		var early []string
		if o.FilesFrom == nil && locs[i].Remote() {
			early = []string{RemotePath(locs[i].Path)}
		}
		e, err := h.endpoint(ctx, locs[i], early)
		switch {
		case errors.Is(err, ErrNoSFTP):
			r.Legacy = true
		case err != nil:
			return nil, err
		}
		r.sftp[i] = e
		// A tree is listed first: its listing session opens meanwhile.
		Prepare(ctx, e, o.Recursive, false)
	}
	if r.Legacy {
		if err := o.ValidateSCP(); err != nil {
			return nil, err
		}
		o.Tar.Mode = transfer.TarOff
	}
	if err := UseJournal(&o); err != nil {
		return nil, err
	}
	if o.Parallel.Conns == nil {
		o.Parallel.Conns = h.ConnSampler
	}
	if o.Parallel.CPU == nil {
		o.Parallel.CPU = ProcessCPU
	}
	r.Options = o
	if !r.Legacy {
		return r, nil
	}
	r.sftp = nil
	r.scp = make([]transfer.Endpoint, len(locs))
	for i, l := range locs {
		e, err := h.SCPEndpoint(ctx, l)
		if err != nil {
			return nil, err
		}
		r.scp[i] = e
	}
	return r, nil
}

// Prepare has e's SFTP end open, meanwhile, the sessions a run will
// need next: one to list a tree (list), one to send small files in
// batches (small). A local end has none to open.
func Prepare(ctx context.Context, e transfer.Endpoint, list, small bool) {
	if p, ok := e.FS.(interface{ PrepareList(context.Context) }); ok && list {
		p.PrepareList(ctx)
	}
	if p, ok := e.FS.(interface{ PrepareSmall(context.Context) }); ok && small {
		p.PrepareSmall(ctx)
	}
}

// UseJournal sets the resume journal's directory. Large files are
// journaled without Resume too, so that a killed run can be resumed; only
// Resume needs the journal to work.
func UseJournal(o *transfer.Options) error {
	if o.ResumeDir != "" {
		return nil
	}
	dir, err := transfer.ResumeDir()
	switch {
	case err == nil:
		o.ResumeDir = dir
	case o.Resume:
		return &transfer.OptionError{Msg: fmt.Sprintf("--resume: %v", err),
			Hint: "set XDG_STATE_HOME to a directory hpncp may keep its resume journal in"}
	}
	return nil
}

// destination returns the key under which a remote location's connection
// is kept, and the connection options with the location's own user and
// port (from user@host or an scp:// URI) over the run's.
func (h *Hosts) destination(l transfer.Location) (string, sshconn.Options) {
	o := h.base
	if l.User != "" {
		o.User = l.User
	}
	if l.Port != 0 {
		o.Port = l.Port
	}
	return fmt.Sprintf("%s@%s:%d", l.User, l.Host, l.Port), o
}

// Endpoint returns l as an SFTP or local end, connecting to its host on
// first use. A host without an sftp subsystem is ErrNoSFTP, and is then
// kept for SCPEndpoint.
func (h *Hosts) Endpoint(ctx context.Context, l transfer.Location) (transfer.Endpoint, error) {
	return h.endpoint(ctx, l, nil)
}

// EndpointStat is Endpoint with the stat of l's path asked for with its
// host's SFTP start, when this is the first use of the host: the end's
// first Stats of that path take the answer (protocol.Options.Stat) rather
// than a round trip each.
func (h *Hosts) EndpointStat(ctx context.Context, l transfer.Location) (transfer.Endpoint, error) {
	var early []string
	if l.Remote() {
		early = []string{RemotePath(l.Path)}
	}
	return h.endpoint(ctx, l, early)
}

// endpoint is Endpoint, with the stats of early asked for as its host's
// SFTP end starts (protocol.Options.Stat) when it starts here.
func (h *Hosts) endpoint(ctx context.Context, l transfer.Location, early []string) (transfer.Endpoint, error) {
	if !l.Remote() {
		return transfer.Endpoint{FS: transfer.Local{}, Path: l.Path}, nil
	}
	key, o := h.destination(l)
	end, ok := h.sftp[key]
	if !ok {
		d := sshconn.NewDialer(o)
		var mine []*sshconn.Client    // this destination's connections, under h.mu
		connUp := make(chan struct{}) // closed, and made anew, as each comes up: under h.mu
		conns := func() ([]*sshconn.Client, <-chan struct{}) {
			h.mu.Lock()
			defer h.mu.Unlock()
			return slices.Clone(mine), connUp
		}
		dial := func(ctx context.Context, hooks sshconn.DialHooks) (*sshconn.Client, error) {
			// Close waits for the dials under way, which log: none
			// starts once it ran.
			h.mu.Lock()
			if h.closed {
				h.mu.Unlock()
				return nil, errors.New("the run's connections are closed")
			}
			h.dials.Add(1)
			h.mu.Unlock()
			defer h.dials.Done()
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			defer context.AfterFunc(h.aborted, cancel)()
			c, err := d.DialWith(ctx, l.Host, hooks)
			if err != nil {
				return nil, err
			}
			h.mu.Lock()
			defer h.mu.Unlock()
			if h.closed {
				// A spare nothing took, whose dial outlived the run.
				_ = c.Close()
				return nil, errors.New("the run's connections are closed")
			}
			h.clients = append(h.clients, c)
			mine = append(mine, c)
			close(connUp)
			connUp = make(chan struct{})
			return c, nil
		}
		var create *protocol.PreCreate
		if pc := h.opts.PreCreate; pc.Final != "" && slices.Contains(early, pc.Final) {
			create = &pc
		}
		var pre *protocol.PreOpen
		if h.opts.PreOpen != "" && slices.Contains(early, h.opts.PreOpen) {
			pre = &protocol.PreOpen{Name: h.opts.PreOpen}
		}
		spare, firstAuth, predialed := &spares{}, newGate(), false
		first, err := dial(ctx, sshconn.DialHooks{Connected: func(c net.Conn) {
			if !predialed { // not again for a dropped and retried first
				predialed = true
				spare = h.predial(ctx, c, pre, func(ctx context.Context) (*sshconn.Client, error) {
					return dial(ctx, sshconn.DialHooks{KeyGate: firstAuth.waitKey, AuthGate: firstAuth.wait})
				})
			}
		}, KeyAccepted: firstAuth.keyAccepted})
		firstAuth.open(err)
		if err != nil {
			return transfer.Endpoint{}, err
		}
		if h.opts.Warm && h.opts.WarmFirst {
			h.bg.Go(func() { h.warm(ctx, first) })
		}
		h.startDelta(ctx, first, l.Host, key, conns)
		logf := func(string, ...any) {}
		if o.Logf != nil {
			logf = o.Logf
		}
		end, err = protocol.OpenSFTP(first.Client, protocol.Options{
			Label: l.HostLabel(),
			Logf:  logf,
			// Connections lost mid-copy are dialed again for up to the
			// host's ConnectTimeout (protocol.DefaultReconnect when it is
			// unset).
			Reconnect: first.Config.ConnectTimeout,
			Silent: func(c *ssh.Client) error {
				h.mu.Lock()
				defer h.mu.Unlock()
				for _, m := range mine {
					if m.Client == c {
						return m.NotResponding()
					}
				}
				return nil
			},
			Dial: func(ctx context.Context) (*ssh.Client, protocol.Readying, error) {
				d, ok := spare.take(ctx)
				if !ok {
					d.c, d.err = dial(ctx, sshconn.DialHooks{})
					if d.err == nil && h.opts.Warm {
						h.bg.Go(func() { h.warm(ctx, d.c) })
					}
				}
				if d.err != nil {
					return nil, protocol.Readying{}, d.err
				}
				return d.c.Client, d.ready, nil
			},
			Ahead: spare.sessions, AheadConns: spare.left(), PreOpen: pre, PreCreate: create,
			RTT: func() time.Duration {
				h.mu.Lock()
				defer h.mu.Unlock()
				return minRTT(mine)
			},
			Trace: starttrace.From(ctx),
			Stat:  early,
		})
		if err != nil {
			if has, herr := protocol.HasSFTP(first.Client); herr == nil && !has {
				logf("%s has no sftp subsystem: using the legacy scp protocol (-O)", l.Host)
				h.scp[key] = scp.NewHost(first.Client, l.HostLabel())
				return transfer.Endpoint{}, ErrNoSFTP
			}
			return transfer.Endpoint{}, &sshconn.Error{Op: "start SFTP on", Host: l.Host, Err: err,
				Hint: "the server may have no sftp subsystem; ask its admin to enable Subsystem sftp"}
		}
		h.sftp[key] = end
		h.mu.Lock()
		h.first[end] = firstConn{c: first, host: l.Host, conns: conns}
		h.mu.Unlock()
	}
	return transfer.Endpoint{FS: end, Path: RemotePath(l.Path)}, nil
}

// spares are connections dialed ahead of the copy's asking (Predial).
type spares struct {
	mu       sync.Mutex
	pending  int // dials under way or done and not yet taken
	ready    chan dialed
	sessions int // SFTP sessions each connection opens once it is up
}

type dialed struct {
	c     *sshconn.Client
	ready protocol.Readying // being opened on c for the streams
	err   error
}

// predial starts the dials Options.Predial asks for, once the host's
// first connection, conn, has done its TCP handshake.
func (h *Hosts) predial(ctx context.Context, conn net.Conn, pre *protocol.PreOpen, dial func(context.Context) (*sshconn.Client, error)) *spares {
	s := &spares{}
	if h.opts.Predial == nil {
		return s
	}
	rtt, _ := sshconn.TCPRTT(conn)
	conns, sessions := h.opts.Predial(rtt)
	if conns <= 1 {
		return s
	}
	n := conns - 1
	s.pending, s.ready, s.sessions = n, make(chan dialed, n), sessions
	for range n {
		h.bg.Go(func() {
			// An unused connection is closed with the others, and one
			// still dialing is ended (Close); so are its sessions.
			d := dialed{}
			d.c, d.err = dial(ctx)
			if d.err == nil {
				// Taken as soon as it is up; its sessions follow.
				d.ready = protocol.StartReady(d.c.Client, sessions, pre)
				if h.opts.Warm {
					h.bg.Go(func() { h.warm(ctx, d.c) })
				}
			}
			s.ready <- d
		})
	}
	return s
}

// gate holds the other connections' authentication until the first's
// ended (sshconn.DialHooks.AuthGate), or their first attempt until the
// server accepted the first's key (KeyGate).
type gate struct {
	done    chan struct{}
	err     error
	key     chan struct{} // closed once the first's key is accepted, or done
	keyOnce sync.Once
}

func newGate() *gate { return &gate{done: make(chan struct{}), key: make(chan struct{})} }

// open lets the waiting dials go on, or ends them with the first's err.
func (g *gate) open(err error) {
	g.err = err
	close(g.done)
	g.keyAccepted()
}

// keyAccepted lets the dials waiting in waitKey go on.
func (g *gate) keyAccepted() { g.keyOnce.Do(func() { close(g.key) }) }

func (g *gate) wait(ctx context.Context) error {
	select {
	case <-g.done:
		if g.err != nil {
			return fmt.Errorf("the first connection to the host failed: %w", g.err)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// waitKey waits until the first's key is accepted, or its dial is over.
func (g *gate) waitKey(ctx context.Context) error {
	select {
	case <-g.key:
		select {
		case <-g.done:
			return g.wait(ctx)
		default:
			return nil
		}
	case <-ctx.Done():
		return ctx.Err()
	}
}

// left counts the connections dialed ahead not yet taken.
func (s *spares) left() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pending
}

// take hands out a connection dialed ahead, waiting for one under way;
// ok is false when none is left to take.
func (s *spares) take(ctx context.Context) (d dialed, ok bool) {
	s.mu.Lock()
	if s.pending == 0 {
		s.mu.Unlock()
		return dialed{}, false
	}
	s.pending--
	s.mu.Unlock()
	select {
	case d := <-s.ready:
		return d, true
	case <-ctx.Done():
		// The dial goes on; its connection, if any, is closed with the
		// others.
		return dialed{err: ctx.Err()}, true
	}
}

// SCPEndpoint returns l as a legacy scp protocol end, connecting to its
// host on first use.
func (h *Hosts) SCPEndpoint(ctx context.Context, l transfer.Location) (transfer.Endpoint, error) {
	if !l.Remote() {
		return transfer.Endpoint{FS: transfer.Local{}, Path: l.Path}, nil
	}
	key, o := h.destination(l)
	s, ok := h.scp[key]
	if !ok {
		c, err := sshconn.NewDialer(o).Dial(ctx, l.Host)
		if err != nil {
			return transfer.Endpoint{}, err
		}
		h.mu.Lock()
		h.clients = append(h.clients, c)
		h.mu.Unlock()
		s = scp.NewHost(c.Client, l.HostLabel())
		h.scp[key] = s
	}
	return transfer.Endpoint{FS: transfer.SCP{Host: s}, Path: RemotePath(l.Path)}, nil
}

// minRTT is the smallest RTT the kernel reports for the connections: the
// path's own, least inflated by queues. 0 when none can tell.
func minRTT(cs []*sshconn.Client) time.Duration {
	var best time.Duration
	for _, c := range cs {
		if rtt, ok := sshconn.TCPRTT(c.Transport); ok && rtt > 0 && (best == 0 || rtt < best) {
			best = rtt
		}
	}
	return best
}

// Lost returns, after a copy failed, the error of a connection that was
// given up because its server stopped responding (a *sshconn.Error with
// a hint), or nil. The copy's own error says only that its streams, or a
// re-dial, failed; this one says why.
func (h *Hosts) Lost() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range h.clients {
		if lost := c.NotResponding(); lost != nil {
			return lost
		}
	}
	return nil
}

// AbortOnCancel closes every connection once ctx has ended and they have
// all been silent for AbortGrace (and at the latest abortAtMost after ctx
// ended), until stop is called. An interrupted copy removes its temporary
// files, over its connections; one that is stalled would keep it
// waiting, and no other step of the copy watches ctx while it waits for a
// server. A fixed time from the interrupt would instead cut a clean-up
// that a loaded machine ran slowly, and leave its temporary files behind.
func (h *Hosts) AbortOnCancel(ctx context.Context) (stop func()) {
	stopped := make(chan struct{})
	after := context.AfterFunc(ctx, func() { go h.abortWhenQuiet(stopped) })
	var once sync.Once
	return func() {
		after()
		once.Do(func() { close(stopped) })
	}
}

// abortWhenQuiet calls Abort when every connection has been silent for
// AbortGrace, at least AbortGrace and at most abortAtMost from now, unless
// stopped is closed first.
func (h *Hosts) abortWhenQuiet(stopped <-chan struct{}) {
	start := time.Now()
	tick := time.NewTicker(AbortGrace / 10)
	defer tick.Stop()
	for {
		select {
		case <-stopped:
			return
		case <-tick.C:
		}
		since := time.Since(start)
		if since >= abortAtMost || since >= AbortGrace && h.quiet() >= AbortGrace {
			h.Abort()
			return
		}
	}
}

// quiet is how long every connection of h has heard nothing from its
// server: the shortest of their silences, or as good as forever with no
// connection.
func (h *Hosts) quiet() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	q := time.Duration(1<<63 - 1)
	for _, c := range h.clients {
		q = min(q, c.Quiet())
	}
	return q
}

// Abort closes every connection at once, which fails whatever waits on
// them, and ends every dial under way or to come.
func (h *Hosts) Abort() {
	h.stopDialing()
	h.mu.Lock()
	clients := append([]*sshconn.Client(nil), h.clients...)
	h.mu.Unlock()
	for _, c := range clients {
		_ = c.Close()
	}
}

// Close closes the connections and then the SFTP ends. Everything the
// copy asked of the servers has been answered by now; closed the other
// way round, pkg/sftp's session waits a round trip for its server to end
// it.
func (h *Hosts) Close() {
	h.stopDialing() // spares still dialing, which nothing will take
	for _, e := range h.sftp {
		e.DropUnused() // while its connections are open
	}
	h.mu.Lock()
	clients := h.clients
	h.clients, h.closed = nil, true
	var deltas []*deltaHost
	for _, d := range h.delta {
		deltas = append(deltas, d)
	}
	for _, d := range h.early {
		deltas = append(deltas, d) // started and never asked for
	}
	h.mu.Unlock()
	h.dials.Wait()
	for _, d := range deltas {
		d.close()
	}
	for _, c := range clients {
		_ = c.Close()
	}
	for _, e := range h.sftp {
		_ = e.Close()
	}
	h.bg.Wait()
}

// RemotePath turns "~" and "~/x" into paths relative to the remote home,
// where SFTP servers start, as scp does.
func RemotePath(p string) string {
	switch {
	case p == "~":
		return "."
	case strings.HasPrefix(p, "~/"):
		if rel := strings.TrimLeft(p[2:], "/"); rel != "" {
			return rel
		}
		return "."
	}
	return p
}
