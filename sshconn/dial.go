package sshconn

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
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
)

// maxJumpDepth bounds ProxyJump chains, which configuration files can make
// circular.
const maxJumpDepth = 10

// Dialer opens authenticated connections. It is safe for concurrent use and
// remembers, for its lifetime, what worked: resolved configurations,
// decrypted keys, passwords and keyboard-interactive answers that
// succeeded, and host keys the user accepted. Prompts from concurrent dials
// are asked one at a time, so a second dial reuses the first one's answer
// instead of asking again.
type Dialer struct {
	opts Options
	// prompt is held by the one dial that talks to the user, from its first
	// prompt to the end of its authentication.
	prompt chan struct{}

	mu         sync.Mutex
	configs    map[string]*Config
	signers    map[string]ssh.Signer
	passwords  map[string]string
	kbd        map[string][]kbdRound
	hostKeys   map[string][]ssh.PublicKey
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
		hostKeys:  make(map[string][]ssh.PublicKey),
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

// Dial resolves host, connects (through jump hosts if any), verifies the
// host key and authenticates.
func (d *Dialer) Dial(ctx context.Context, host string) (*Client, error) {
	return d.dial(ctx, host, d.opts, 0)
}

func (d *Dialer) dial(ctx context.Context, host string, o Options, depth int) (*Client, error) {
	cfg, err := d.resolve(ctx, host, o, depth > 0)
	if err != nil {
		return nil, err
	}
	ciphers, err := cipherList(cfg)
	if err != nil {
		return nil, &Error{Op: "choose cipher for", Host: cfg.Host, Err: err,
			Hint: "name a supported cipher with -c or Ciphers"}
	}
	o.logf("cipher preference: %s", strings.Join(ciphers, ","))

	conn, jump, err := d.connect(ctx, cfg, o, depth)
	if err != nil {
		return nil, err
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
	cc := &ssh.ClientConfig{
		User:              cfg.User,
		HostKeyCallback:   r.verifyHostKey,
		HostKeyAlgorithms: r.kh.hostKeyAlgorithms(cfg.HostKeyAlgorithms),
		AuthCallback:      r.nextAuth,
		BannerCallback: func(msg string) error {
			if o.Banner != nil {
				o.Banner(msg)
			}
			return nil
		},
	}
	cc.Ciphers = ciphers
	addr := net.JoinHostPort(cfg.HostName, strconv.Itoa(cfg.Port))

	timedOut := r.watch(conn)
	sc, chans, reqs, err := ssh.NewClientConn(conn, addr, cc)
	r.endWatch()
	if err == nil {
		// Remember what worked before letting a waiting dial prompt.
		r.committed()
	}
	r.finish()
	if err != nil {
		conn.Close()
		if jump != nil {
			jump.Close()
		}
		return nil, r.handshakeError(err, addr, timedOut.Load())
	}

	c := &Client{
		Client:    ssh.NewClient(sc, chans, reqs),
		Config:    cfg.clone(),
		Transport: conn,
		jump:      jump,
		done:      make(chan struct{}),
	}
	if cfg.ServerAliveInterval > 0 {
		go c.keepalive(cfg.ServerAliveInterval, cfg.ServerAliveCountMax, o.warnf)
	}
	return c, nil
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

// connect opens the byte stream the SSH connection runs over: through the
// jump hosts, through ProxyCommand, or a TCP connection.
func (d *Dialer) connect(ctx context.Context, cfg *Config, o Options, depth int) (net.Conn, *Client, error) {
	addr := net.JoinHostPort(cfg.HostName, strconv.Itoa(cfg.Port))
	dctx := ctx
	if cfg.ConnectTimeout > 0 {
		var cancel context.CancelFunc
		dctx, cancel = context.WithTimeout(ctx, cfg.ConnectTimeout)
		defer cancel()
	}

	if cfg.ProxyJump != "" && cfg.ProxyJump != "none" {
		hops, err := parseJump(cfg.ProxyJump)
		if err != nil {
			return nil, nil, &Error{Op: "read ProxyJump for", Host: cfg.Host, Err: err}
		}
		last := hops[len(hops)-1]
		if depth >= maxJumpDepth || (last.host == cfg.Host && last.port == cfg.Port && (last.user == "" || last.user == cfg.User)) {
			return nil, nil, &Error{Op: "connect to host", Host: addr, Err: fmt.Errorf("jump host loop via %s", last.host),
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
		jump, err := d.dial(ctx, last.host, hopOpts, depth+1)
		if err != nil {
			return nil, nil, err
		}
		o.logf("connecting to %s port %d via %s", cfg.HostName, cfg.Port, last.spec)
		conn, err := jump.DialContext(dctx, "tcp", addr)
		if err != nil {
			jump.Close()
			if ctx.Err() == nil && dctx.Err() != nil {
				err = errors.New("connection timed out")
			}
			return nil, nil, &Error{Op: "connect to host", Host: addr, Err: err,
				Hint: fmt.Sprintf("the jump host %s could not reach it", last.spec)}
		}
		return conn, jump, nil
	}

	if cfg.ProxyCommand != "" && cfg.ProxyCommand != "none" {
		o.logf("connecting to %s port %d via ProxyCommand", cfg.HostName, cfg.Port)
		conn, err := startProxyCommand(cfg)
		if err != nil {
			return nil, nil, &Error{Op: "connect to host", Host: addr, Err: err, Hint: "check ProxyCommand in the ssh config"}
		}
		return conn, nil, nil
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
	conn, err := nd.DialContext(dctx, network, addr)
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, &Error{Op: "connect to host", Host: addr, Err: ctx.Err()}
		}
		e := &Error{Op: "connect to host", Host: addr, Err: netCause(err)}
		switch {
		case errors.Is(err, syscall.ECONNREFUSED):
			e.Hint = fmt.Sprintf("is sshd listening on %s port %d? (set the port with -P, or -p for hpncp ssh, or Port in ssh_config)", cfg.HostName, cfg.Port)
		case dctx.Err() != nil:
			e.Err = fmt.Errorf("connection timed out after %s: %w", cfg.ConnectTimeout, os.ErrDeadlineExceeded)
		}
		return nil, nil, e
	}
	if o.Tune != nil {
		if err := o.Tune(conn); err != nil {
			conn.Close()
			return nil, nil, &Error{Op: "tune connection to", Host: addr, Err: err}
		}
	}
	return conn, nil, nil
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

// keepalive sends keepalive@openssh.com every interval and closes the
// connection once more than max have gone unanswered, as ssh's
// ServerAliveInterval and ServerAliveCountMax.
func (c *Client) keepalive(interval time.Duration, max int, warnf func(string, ...any)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	ended := make(chan struct{})
	go func() {
		c.Client.Wait()
		close(ended)
	}()
	var unanswered atomic.Int32
	var inflight atomic.Bool
	for {
		select {
		case <-c.done:
			return
		case <-ended:
			return
		case <-t.C:
		}
		if int(unanswered.Add(1)) > max {
			warnf("Timeout, server %s not responding.", c.Config.Host)
			c.Client.Close()
			return
		}
		if inflight.CompareAndSwap(false, true) {
			go func() {
				_, _, err := c.SendRequest("keepalive@openssh.com", true, nil)
				inflight.Store(false)
				if err == nil {
					unanswered.Store(0)
				}
			}()
		}
	}
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
	timer       *time.Timer
	watchDone   chan struct{}
	closers     []io.Closer

	verifiedKey []byte
	// noPasswords is set when a changed host key was accepted under
	// StrictHostKeyChecking=no: OpenSSH then refuses to send passwords.
	noPasswords bool

	authStarted   bool
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

// watch closes conn when ctx ends, or when ConnectTimeout passes before
// the key exchange is over: OpenSSH's timeout covers the banner and key
// exchange, while authentication may wait for the user.
func (r *dialRun) watch(conn net.Conn) *atomic.Bool {
	var timedOut atomic.Bool
	r.watchDone = make(chan struct{})
	if r.cfg.ConnectTimeout > 0 {
		r.timer = time.AfterFunc(r.cfg.ConnectTimeout, func() {
			timedOut.Store(true)
			conn.Close()
		})
	}
	go func(done <-chan struct{}) {
		select {
		case <-r.ctx.Done():
			conn.Close()
		case <-done:
		}
	}(r.watchDone)
	return &timedOut
}

// stopTimer disarms ConnectTimeout; ctx still ends the dial.
func (r *dialRun) stopTimer() {
	if r.timer != nil {
		r.timer.Stop()
	}
}

// endWatch stops watching once the handshake returned.
func (r *dialRun) endWatch() {
	r.stopTimer()
	close(r.watchDone)
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

// finish releases what the dial held during the handshake.
func (r *dialRun) finish() {
	if r.holdsPrompt {
		<-r.d.prompt
		r.holdsPrompt = false
	}
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
	if errors.Is(err, errAuthExhausted) {
		return r.authError()
	}
	if r.ctx.Err() != nil {
		return &Error{Op: "connect to host", Host: addr, Err: r.ctx.Err()}
	}
	if timedOut {
		return &Error{Op: "connect to host", Host: addr,
			Err: fmt.Errorf("connection timed out during key exchange (ConnectTimeout %s): %w", r.cfg.ConnectTimeout, os.ErrDeadlineExceeded)}
	}
	cause := &sshError{err}
	if r.authStarted {
		e := &Error{Op: "authenticate to", Host: r.cfg.User + "@" + r.cfg.HostName, Err: cause}
		if strings.Contains(err.Error(), "Too many authentication failures") {
			e.Hint = "the server stopped after too many keys; choose one with -i and -o IdentitiesOnly=yes"
		}
		return e
	}
	e := &Error{Op: "handshake with", Host: addr, Err: cause}
	if strings.Contains(err.Error(), "no common algorithm") {
		e.Hint = "the server accepts none of the offered algorithms; see -c / Ciphers"
	}
	return e
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

// acceptedHostKey reports whether key was accepted for display earlier in
// this process (the known_hosts write may have failed, or another dial may
// have added it after this one read the files).
func (d *Dialer) acceptedHostKey(display string, key ssh.PublicKey) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.ContainsFunc(d.hostKeys[display], func(k ssh.PublicKey) bool {
		return bytes.Equal(k.Marshal(), key.Marshal())
	})
}

func (d *Dialer) rememberHostKey(display string, key ssh.PublicKey) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.hostKeys[display] = append(d.hostKeys[display], key)
}
