package sshconn

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/sys/cpu"

	"github.com/hpncp/hpncp/internal/sleep"
	"github.com/hpncp/hpncp/internal/starttrace"
	"github.com/hpncp/hpncp/internal/vis"
)

// maxJumpDepth bounds ProxyJump chains, which configuration files can make
// circular.
const maxJumpDepth = 10

// Dialer opens authenticated connections. It is safe for concurrent use and
// remembers, for its lifetime, what worked: resolved configurations,
// decrypted keys, passwords and keyboard-interactive answers that
// succeeded, and each host's key as its first connection presented it,
// which every later connection to the host must present too (hostPin).
// Prompts from concurrent dials are asked one at a time, so a second dial
// reuses the first one's answer instead of asking again.
type Dialer struct {
	opts Options
	// prompt is held by the one dial that talks to the user, from its first
	// prompt to the end of its authentication.
	prompt chan struct{}

	mu        sync.Mutex
	configs   map[string]*Config
	signers   map[string]ssh.Signer
	passwords map[string]string
	kbd       map[string][]kbdRound
	pins      map[string]*hostPin // by known_hosts name
	// knownHosts is held while a key is appended to a known_hosts file.
	knownHosts sync.Mutex
}

// NewDialer returns a Dialer for the command-line options o.
func NewDialer(o Options) *Dialer {
	return &Dialer{
		opts:      o,
		prompt:    make(chan struct{}, 1),
		configs:   make(map[string]*Config),
		signers:   make(map[string]ssh.Signer),
		passwords: make(map[string]string),
		kbd:       make(map[string][]kbdRound),
		pins:      make(map[string]*hostPin),
	}
}

// Client is an authenticated connection. Config is the configuration it
// was made with; treat it as read-only.
type Client struct {
	*ssh.Client
	Config *Config
	// Transport is the connection under SSH: a *net.TCPConn for
	// a direct connection, whose TCP_INFO tells the path's RTT.
	Transport net.Conn

	transport *transport // Transport as SSH reads it, for the keepalives
	jump      *Client
	done      chan struct{}
	closeOnce sync.Once
	closeErr  error
}

// Close closes the connection, stops its keepalives and closes the jump
// host connections it went through.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		close(c.done)
		err := c.Client.Close()
		if errors.Is(err, net.ErrClosed) {
			err = nil
		}
		if c.jump != nil {
			err = errors.Join(err, c.jump.Close())
		}
		c.closeErr = err
	})
	return c.closeErr
}

// DefaultConnectTimeout bounds the set-up of a connection when the
// configuration sets no ConnectTimeout. ssh then waits as long as the
// system's TCP connect does (over two minutes on Linux) and for ever for
// the server's banner; an unattended copy, and a pool re-dialing a lost
// connection, must learn sooner that a host is gone. 15 s leaves room for
// four TCP SYN retransmissions, the key exchange and authentication on a
// path of a second's round trip, and a few retries of a connection sshd's
// MaxStartups dropped.
const DefaultConnectTimeout = 15 * time.Second

// defaultConnectTimeout is DefaultConnectTimeout; tests shorten it.
var defaultConnectTimeout = DefaultConnectTimeout

// connectTimeout is cfg's ConnectTimeout, or hpncp's default when unset.
func connectTimeout(cfg *Config) time.Duration {
	if cfg.ConnectTimeout > 0 {
		return cfg.ConnectTimeout
	}
	return defaultConnectTimeout
}

// Dial resolves host, connects (through jump hosts if any), verifies the
// host key and authenticates. ConnectTimeout (DefaultConnectTimeout when
// unset) bounds all of it, from the TCP connect to the end of
// authentication, except the time spent waiting for the user at a prompt;
// a connection the server drops before the key exchange is retried with
// backoff within that bound. Cancelling ctx ends the dial at once. Its
// errors are *Error, with a Kind.
func (d *Dialer) Dial(ctx context.Context, host string) (*Client, error) {
	return d.dial(ctx, host, d.opts, 0)
}

// DialWith is Dial with hooks at the steps of this dial.
func (d *Dialer) DialWith(ctx context.Context, host string, h DialHooks) (*Client, error) {
	o := d.opts
	o.hooks = h
	return d.dial(ctx, host, o, 0)
}

func (d *Dialer) dial(ctx context.Context, host string, o Options, depth int) (*Client, error) {
	cfg, err := d.resolve(ctx, host, o, depth > 0)
	if err != nil {
		return nil, err
	}
	starttrace.From(ctx).Mark(starttrace.Config)
	ciphers, err := cipherList(cfg)
	if err != nil {
		return nil, &Error{Kind: KindNegotiation, Op: "choose cipher for", Host: cfg.Host, Err: err,
			Hint: "name a supported cipher with -c or Ciphers"}
	}
	o.logf("cipher preference: %s", strings.Join(ciphers, ","))

	jump, err := d.dialJump(ctx, cfg, o, depth)
	if err != nil {
		return nil, err
	}
	// The bound starts once the jump host is reached: its own dial had
	// its own, and may have waited for the user.
	timeout := connectTimeout(cfg)
	deadline := time.Now().Add(timeout)
	for attempt := 1; ; attempt++ {
		c, dropped, err := d.attempt(ctx, cfg, o, ciphers, jump, deadline)
		if err == nil {
			c.jump = jump
			return c, nil
		}
		wait := retryWait(attempt)
		if !dropped || time.Until(deadline) < wait+minAttempt {
			if jump != nil {
				jump.Close()
			}
			if dropped {
				err = droppedError(err, attempt, timeout)
			}
			return nil, err
		}
		o.logf("%v; trying again in %s", err, wait.Round(time.Millisecond))
		if err := sleep.For(ctx, wait); err != nil {
			if jump != nil {
				jump.Close()
			}
			return nil, &Error{Op: "connect to host", Host: cfg.Host, Err: err}
		}
	}
}

// minAttempt is the least time worth starting another attempt with: sshd
// drops a connection it refuses at once, but one it takes needs a key
// exchange.
const minAttempt = 250 * time.Millisecond

// retryWait is the pause before attempt+1 after attempt was dropped:
// 0.2 s doubling to at most 3.2 s, each between half and one and a half
// times that, so that the many connections of a pool, or many copies
// started at once, do not come back in step and meet MaxStartups again.
func retryWait(attempt int) time.Duration {
	base := 200 * time.Millisecond << min(attempt-1, 4)
	return base/2 + rand.N(base)
}

// droppedError explains a connection the server kept dropping before the
// key exchange.
func droppedError(err error, attempts int, timeout time.Duration) error {
	e, ok := asError(err)
	if !ok {
		return err
	}
	n := *e
	n.Err = fmt.Errorf("%w (%d attempts in %s)", e.Err, attempts, timeout)
	n.Hint = "the server dropped the connection before the key exchange: sshd's MaxStartups or PerSourcePenalties may be limiting new connections; try fewer parallel copies or --connections 1"
	return &n
}

// attempt is one try at a connection, to be over by deadline. dropped
// reports that the server closed it before the key exchange was over,
// when another try may work.
func (d *Dialer) attempt(ctx context.Context, cfg *Config, o Options, ciphers []string, jump *Client, deadline time.Time) (_ *Client, dropped bool, _ error) {
	conn, err := d.connect(ctx, cfg, o, jump, deadline)
	if err != nil {
		return nil, false, err
	}
	r := &dialRun{
		d:         d,
		ctx:       ctx,
		o:         &o,
		cfg:       cfg,
		canPrompt: o.Prompter != nil && !o.BatchMode && !cfg.BatchMode,
		offered:   make(map[string]bool),
	}
	r.kh = loadKnownHosts(cfg, &o)
	// Before the hook, which starts a pool's other dials: this one is
	// connected first, so it is the one to decide on an unknown key.
	r.claimTurn()
	if o.hooks.Connected != nil {
		o.hooks.Connected(conn)
	}
	cc := &ssh.ClientConfig{
		User:              cfg.User,
		HostKeyCallback:   r.verifyHostKey,
		HostKeyAlgorithms: r.kh.hostKeyAlgorithms(cfg.HostKeyAlgorithms),
		AuthCallback:      r.nextAuth,
		BannerCallback: func(msg string) error {
			if o.Banner != nil {
				o.Banner(vis.Text(msg))
			}
			return nil
		},
	}
	cc.Ciphers = ciphers
	addr := net.JoinHostPort(cfg.HostName, strconv.Itoa(cfg.Port))

	trace := starttrace.From(ctx)
	t := newTransport(markFirstRead(conn, trace), conn)
	timedOut := r.watch(conn, deadline)
	sc, chans, reqs, err := ssh.NewClientConn(t, addr, cc)
	if r.endWatch() && err == nil {
		// Closed as the handshake ended: the context or the time ran
		// out first.
		_ = sc.Close()
		err = cmp.Or(ctx.Err(), os.ErrDeadlineExceeded)
	}
	if err == nil {
		trace.Mark(starttrace.Auth)
		// Remember what worked before letting a waiting dial prompt.
		r.committed()
	}
	r.finish()
	if err != nil {
		conn.Close()
		he := r.handshakeError(err, addr, timedOut.Load())
		return nil, kindOf(he) == KindDropped && cfg.ProxyCommand == "", he
	}

	c := &Client{
		Client:    ssh.NewClient(sc, chans, reqs),
		Config:    cfg.clone(),
		Transport: conn,
		transport: t,
		done:      make(chan struct{}),
	}
	go c.keepalive(t, aliveInterval(cfg), cfg.ServerAliveCountMax, o.logf)
	return c, false, nil
}

// resolve is Resolve, remembered per destination for the Dialer's
// lifetime: a pool dialing one host N times runs `ssh -G` once.
func (d *Dialer) resolve(ctx context.Context, host string, o Options, hop bool) (*Config, error) {
	key := fmt.Sprintf("%t\x00%s\x00%s\x00%d\x00%s", hop, host, o.User, o.Port, o.JumpHosts)
	d.mu.Lock()
	cfg, ok := d.configs[key]
	d.mu.Unlock()
	if ok {
		return cfg, nil
	}
	cfg, err := Resolve(ctx, host, o)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	d.configs[key] = cfg
	d.mu.Unlock()
	return cfg, nil
}

// dialJump connects to cfg's ProxyJump host, or returns nil when there is
// none.
func (d *Dialer) dialJump(ctx context.Context, cfg *Config, o Options, depth int) (*Client, error) {
	if cfg.ProxyJump == "" || cfg.ProxyJump == "none" {
		return nil, nil
	}
	addr := net.JoinHostPort(cfg.HostName, strconv.Itoa(cfg.Port))
	hops, err := parseJump(cfg.ProxyJump)
	if err != nil {
		return nil, &Error{Op: "read ProxyJump for", Host: cfg.Host, Err: err}
	}
	last := hops[len(hops)-1]
	if depth >= maxJumpDepth || (last.host == cfg.Host && last.port == cfg.Port && (last.user == "" || last.user == cfg.User)) {
		return nil, &Error{Op: "connect to host", Host: addr, Err: fmt.Errorf("jump host loop via %s", last.host),
			Hint: "a Host * ProxyJump entry also applies to the jump host; exclude it with Host * !jumphost"}
	}
	var extra []string
	for _, h := range hops[:len(hops)-1] {
		extra = append(extra, h.spec)
	}
	// Like ssh, a jump host gets the configuration file and its own
	// user and port, not the other command-line options.
	hopOpts := Options{
		ConfigFile: o.ConfigFile,
		User:       last.user,
		Port:       last.port,
		JumpHosts:  strings.Join(extra, ","),
		BatchMode:  o.BatchMode,
		Logf:       o.Logf,
		Warnf:      o.Warnf,
		Banner:     o.Banner,
		Prompter:   o.Prompter,
	}
	return d.dial(ctx, last.host, hopOpts, depth+1)
}

// connect opens the byte stream the SSH connection runs over, by
// deadline: a channel through the jump host, ProxyCommand, or a TCP
// connection.
func (d *Dialer) connect(ctx context.Context, cfg *Config, o Options, jump *Client, deadline time.Time) (net.Conn, error) {
	addr := net.JoinHostPort(cfg.HostName, strconv.Itoa(cfg.Port))
	dctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	timedOut := func() error {
		return fmt.Errorf("connection timed out after %s (ConnectTimeout): %w", connectTimeout(cfg), os.ErrDeadlineExceeded)
	}

	if jump != nil {
		o.logf("connecting to %s port %d via %s", cfg.HostName, cfg.Port, jump.Config.Host)
		conn, err := jump.DialContext(dctx, "tcp", addr)
		if err != nil {
			switch {
			case ctx.Err() != nil:
				return nil, &Error{Op: "connect to host", Host: addr, Err: ctx.Err()}
			case dctx.Err() != nil:
				err = timedOut()
			}
			return nil, &Error{Kind: KindUnreachable, Op: "connect to host", Host: addr, Err: err,
				Hint: fmt.Sprintf("the jump host %s could not reach it", jump.Config.Host)}
		}
		return conn, nil
	}

	if cfg.ProxyCommand != "" && cfg.ProxyCommand != "none" {
		o.logf("connecting to %s port %d via ProxyCommand", cfg.HostName, cfg.Port)
		conn, err := startProxyCommand(cfg)
		if err != nil {
			return nil, &Error{Op: "connect to host", Host: addr, Err: err, Hint: "check ProxyCommand in the ssh config"}
		}
		return conn, nil
	}

	network := "tcp"
	switch cfg.AddressFamily {
	case "inet":
		network = "tcp4"
	case "inet6":
		network = "tcp6"
	}
	o.logf("connecting to %s port %d", cfg.HostName, cfg.Port)
	var nd net.Dialer
	began := time.Now()
	conn, err := nd.DialContext(dctx, network, addr)
	if err == nil {
		trace := starttrace.From(ctx)
		trace.SetRTT(time.Since(began))
		trace.Mark(starttrace.TCP)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, &Error{Op: "connect to host", Host: addr, Err: ctx.Err()}
		}
		e := &Error{Kind: KindUnreachable, Op: "connect to host", Host: addr, Err: netCause(err)}
		switch {
		case errors.Is(err, syscall.ECONNREFUSED):
			e.Hint = fmt.Sprintf("is sshd listening on %s port %d? (set the port with -P, or -p for hpncp ssh, or Port in ssh_config)", cfg.HostName, cfg.Port)
		case dctx.Err() != nil:
			e.Err = timedOut()
		}
		return nil, e
	}
	if o.Tune != nil {
		if err := o.Tune(conn); err != nil {
			conn.Close()
			return nil, &Error{Op: "tune connection to", Host: addr, Err: err}
		}
	}
	return conn, nil
}

// markFirstRead marks the SSH version step on t when the first bytes
// from the server, its version line, arrive on conn; with no trace it
// returns conn.
func markFirstRead(conn net.Conn, t *starttrace.Trace) net.Conn {
	if t == nil {
		return conn
	}
	return &firstRead{Conn: conn, t: t}
}

type firstRead struct {
	net.Conn
	t    *starttrace.Trace
	once sync.Once
}

func (c *firstRead) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.once.Do(func() { c.t.Mark(starttrace.SSHVersion) })
	}
	return n, err
}

// netCause strips "dial tcp 1.2.3.4:22: connect:" from a dial error,
// which the Error message already says, keeping the chain for errors.Is.
func netCause(err error) error {
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		var se *os.SyscallError
		if errors.As(oe.Err, &se) && se.Err != nil {
			return se.Err
		}
		return oe.Err
	}
	return err
}

// hop is one ProxyJump entry: [user@]host[:port] or ssh://[user@]host[:port].
type hop struct {
	spec string
	user string
	host string
	port int
}

func parseJump(list string) ([]hop, error) {
	var hops []hop
	for _, spec := range strings.Split(list, ",") {
		spec = strings.TrimSpace(spec)
		h := hop{spec: spec}
		s := strings.TrimPrefix(spec, "ssh://")
		if at := strings.LastIndexByte(s, '@'); at >= 0 {
			h.user, s = s[:at], s[at+1:]
		}
		h.host = s
		if strings.HasPrefix(s, "[") || strings.Count(s, ":") == 1 {
			host, port, err := net.SplitHostPort(s)
			if err != nil {
				return nil, fmt.Errorf("jump host %q: %w", spec, err)
			}
			p, err := strconv.Atoi(port)
			if err != nil || p <= 0 || p > 65535 {
				return nil, fmt.Errorf("jump host %q: bad port", spec)
			}
			h.host, h.port = host, p
		}
		if h.host == "" || strings.HasPrefix(h.host, "-") {
			return nil, fmt.Errorf("jump host %q: invalid host", spec)
		}
		hops = append(hops, h)
	}
	if len(hops) == 0 {
		return nil, errors.New("empty jump host list")
	}
	return hops, nil
}

// cipherList is the cipher preference sent to the server: the configured
// list restricted to what x/crypto implements, or hpncp's preference.
func cipherList(cfg *Config) ([]string, error) {
	if cfg.Ciphers == nil {
		return preferredCiphers(hasAESHardware()), nil
	}
	supported := slices.Concat(ssh.SupportedAlgorithms().Ciphers, ssh.InsecureAlgorithms().Ciphers)
	var out []string
	for _, c := range cfg.Ciphers {
		if slices.Contains(supported, c) && !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no supported cipher in %q (supported: %s)",
			strings.Join(cfg.Ciphers, ","), strings.Join(ssh.SupportedAlgorithms().Ciphers, ","))
	}
	return out, nil
}

// preferredCiphers puts AES-GCM first where the CPU has AES instructions:
// it is then the cheapest cipher per byte, and CPU is what limits a LAN
// copy. Elsewhere ChaCha20-Poly1305 is faster than software AES.
func preferredCiphers(aesHardware bool) []string {
	gcm := []string{ssh.CipherAES128GCM, ssh.CipherAES256GCM}
	chacha := []string{ssh.CipherChaCha20Poly1305}
	ctr := []string{ssh.CipherAES128CTR, ssh.CipherAES192CTR, ssh.CipherAES256CTR}
	if aesHardware {
		return slices.Concat(gcm, chacha, ctr)
	}
	return slices.Concat(chacha, gcm, ctr)
}

func hasAESHardware() bool {
	return (cpu.X86.HasAES && cpu.X86.HasPCLMULQDQ) || (cpu.ARM64.HasAES && cpu.ARM64.HasPMULL)
}

// dialRun is the state of one connection attempt: host key checking and
// authentication.
type dialRun struct {
	d         *Dialer
	ctx       context.Context
	o         *Options
	cfg       *Config
	kh        *knownHosts
	canPrompt bool

	holdsPrompt bool
	// hostKeySeen is set once the server's key exchange reply arrived:
	// a connection closed after that was not refused at the door.
	hostKeySeen bool
	timer       *time.Timer
	deadline    time.Time // the timer's, as the watch set it
	watchDone   chan struct{}
	watchMu     sync.Mutex
	watching    bool // until endWatch: the watch may still close the connection
	cut         bool // the watch closed it
	closers     []io.Closer

	verifiedKey []byte
	hostPin     *hostPin // of the host
	holdsTurn   bool     // hostPin.turn: this dial decides on the host's key
	// noPasswords is set when a changed host key was accepted under
	// StrictHostKeyChecking=no: OpenSSH then refuses to send passwords.
	noPasswords bool

	authStarted   bool
	gateLater     func(context.Context) error // AuthGate, once KeyGate let the first attempt go
	allowed       []string
	partials      int
	last          *attempt
	pubPrepared   bool
	pubs          []*pubCandidate
	pubIdx        int
	offered       map[string]bool
	kbdTries      int
	kbdCacheTried bool
	pwTries       int
	pwCacheTried  bool
}

// watch closes conn when ctx ends, or at deadline unless a prompt came
// first: the set-up of an unattended connection is bounded from the TCP
// connect to the end of authentication, but the user is never hurried.
// Once endWatch is called it closes nothing: a caller that cancels ctx as
// soon as the dial returns (the pool does) must not have the connection
// it was handed closed under it, whichever of the handshake's end and the
// context's the watching goroutine sees first.
func (r *dialRun) watch(conn net.Conn, deadline time.Time) *atomic.Bool {
	var timedOut atomic.Bool
	r.watching = true
	r.watchDone = make(chan struct{})
	end := func(timeout bool) {
		r.watchMu.Lock()
		defer r.watchMu.Unlock()
		if !r.watching {
			return
		}
		timedOut.Store(timeout)
		r.cut = true
		conn.Close()
	}
	r.deadline = deadline
	r.timer = time.AfterFunc(time.Until(deadline), func() { end(true) })
	hook := testHookWatch.Load()
	go func(done <-chan struct{}) {
		if hook != nil {
			(*hook)()
		}
		select {
		case <-r.ctx.Done():
			end(false)
		case <-done:
		}
	}(r.watchDone)
	return &timedOut
}

// testHookWatch, when set, runs as watch's goroutine starts.
var testHookWatch atomic.Pointer[func()]

// stopTimer disarms ConnectTimeout; ctx still ends the dial.
func (r *dialRun) stopTimer() {
	if r.timer != nil {
		r.timer.Stop()
	}
}

// pauseTimer stops ConnectTimeout until resume is called, which gives the
// dial the time it had left; a timer that already fired stays fired.
func (r *dialRun) pauseTimer() (resume func()) {
	if r.timer == nil || !r.timer.Stop() {
		return func() {}
	}
	left := time.Until(r.deadline)
	return func() { r.timer.Reset(left) }
}

// endWatch stops watching once the handshake returned, and reports
// whether the watch closed the connection before that.
func (r *dialRun) endWatch() (cut bool) {
	r.watchMu.Lock()
	r.watching = false
	cut = r.cut
	r.watchMu.Unlock()
	r.stopTimer()
	close(r.watchDone)
	return cut
}

// acquirePrompt takes the Dialer's prompt lock for the rest of this dial,
// so concurrent dials ask the user one at a time.
func (r *dialRun) acquirePrompt() error {
	if r.holdsPrompt {
		return nil
	}
	r.stopTimer()
	select {
	case r.d.prompt <- struct{}{}:
		r.holdsPrompt = true
		return nil
	case <-r.ctx.Done():
		return r.ctx.Err()
	}
}

// releasePrompt lets other dials prompt again.
func (r *dialRun) releasePrompt() {
	if r.holdsPrompt {
		<-r.d.prompt
		r.holdsPrompt = false
	}
}

// finish releases what the dial held during the handshake.
func (r *dialRun) finish() {
	r.releasePrompt()
	r.releaseTurn()
	for _, c := range r.closers {
		c.Close()
	}
	r.closers = nil
}

// handshakeError turns an error of ssh.NewClientConn into an *Error that
// says which step failed.
func (r *dialRun) handshakeError(err error, addr string, timedOut bool) error {
	if e, ok := asError(err); ok {
		return e
	}
	if r.ctx.Err() != nil {
		return &Error{Op: "connect to host", Host: addr, Err: r.ctx.Err()}
	}
	if timedOut {
		step := "key exchange"
		if r.authStarted {
			step = "authentication"
		}
		return &Error{Kind: KindUnreachable, Op: "connect to host", Host: addr,
			Err: fmt.Errorf("connection timed out during %s (ConnectTimeout %s): %w", step, connectTimeout(r.cfg), os.ErrDeadlineExceeded)}
	}
	if errors.Is(err, errAuthExhausted) {
		return r.authError()
	}
	cause := &sshError{err}
	if r.authStarted {
		e := &Error{Op: "authenticate to", Host: r.cfg.User + "@" + r.cfg.HostName, Err: cause}
		if tooManyAuthFailures(err) {
			e.Kind = KindAuth
			e.Hint = "the server stopped after too many keys; choose one with -i and -o IdentitiesOnly=yes"
		}
		return e
	}
	e := &Error{Op: "handshake with", Host: addr, Err: cause}
	var ne *ssh.AlgorithmNegotiationError
	switch {
	case errors.As(err, &ne):
		e.Kind = KindNegotiation
		e.Hint = "the server accepts none of the offered algorithms; see -c / Ciphers"
	case !r.hostKeySeen && closedByPeer(err):
		// Before the server's host key, and so before anything was asked
		// of the user: sshd drops connections here when MaxStartups or
		// PerSourcePenalties hold them back.
		e.Kind = KindDropped
		e.Err = fmt.Errorf("connection closed by the server before the key exchange: %w", netCause(cause))
	}
	return e
}

// closedByPeer reports whether err says the other end closed or reset
// the connection.
func closedByPeer(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNABORTED) || errors.Is(err, syscall.EPIPE)
}

// tooManyAuthFailures recognises sshd's disconnect after MaxAuthTries.
// x/crypto reports a server's disconnect message only as text (its type
// is unexported), so this one check has to read it.
func tooManyAuthFailures(err error) bool {
	return strings.Contains(err.Error(), "Too many authentication failures")
}

// sshError drops x/crypto's "ssh: handshake failed: ssh: " prefixes, which
// repeat what the Error already says.
type sshError struct{ err error }

func (e *sshError) Error() string {
	msg := e.err.Error()
	for _, p := range []string{"ssh: handshake failed: ", "ssh: "} {
		msg = strings.TrimPrefix(msg, p)
	}
	return msg
}

func (e *sshError) Unwrap() error { return e.err }

func (d *Dialer) cachedSigner(file string) ssh.Signer {
	if file == "" {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.signers[file]
}

func (d *Dialer) storeSigner(file string, s ssh.Signer) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.signers[file] = s
}

func (d *Dialer) cachedPassword(key string) (string, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	pw, ok := d.passwords[key]
	return pw, ok
}

func (d *Dialer) storePassword(key, pw string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.passwords[key] = pw
}

func (d *Dialer) forgetPassword(key string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.passwords, key)
}

func (d *Dialer) cachedKbd(key string) []kbdRound {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.kbd[key]
}

func (d *Dialer) storeKbd(key string, rounds []kbdRound) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if rounds == nil {
		delete(d.kbd, key)
		return
	}
	d.kbd[key] = rounds
}
