package sshconn

import (
	"fmt"
	"net"
	"sync/atomic"
	"time"
)

// DefaultServerAliveInterval is the keepalive interval when the
// configuration sets none (OpenSSH's default is no keepalives at all):
// with ServerAliveCountMax's default of 3, a copy over a path that died
// learns it after 40 s of silence instead of hanging for ever. It costs
// nothing while data flows: a keepalive is sent only after an interval in
// which the server sent nothing.
const DefaultServerAliveInterval = 10 * time.Second

// aliveInterval is the keepalive interval of cfg: ServerAliveInterval, or
// hpncp's default when it is unset. `ssh -G` reports 0 both when the
// option is unset and when it is set to 0, so 0 cannot turn keepalives
// off; and with BatchMode it reports 300 s when unset (ssh's own default
// in batch mode), which would let a dead path hold a copy for 20 minutes,
// so 300 s with BatchMode counts as unset too.
func aliveInterval(cfg *Config) time.Duration {
	if cfg.ServerAliveInterval > 0 && !(cfg.BatchMode && cfg.ServerAliveInterval == batchAliveInterval) {
		return cfg.ServerAliveInterval
	}
	return defaultAliveInterval
}

// batchAliveInterval is the ServerAliveInterval ssh uses, and `ssh -G`
// reports, under BatchMode when none is set.
const batchAliveInterval = 300 * time.Second

// defaultAliveInterval is DefaultServerAliveInterval; tests shorten it.
var defaultAliveInterval = DefaultServerAliveInterval

// transport is the byte stream under an SSH connection. It notes when the
// server last sent anything, and once the keepalive watchdog gave the
// server up, its reads and writes fail with the watchdog's error, which
// ssh.Client.Wait then returns.
type transport struct {
	net.Conn
	start    time.Time
	lastRead atomic.Int64 // time.Since(start) at the last read that got bytes
	lost     atomic.Pointer[Error]

	// quick, when not nil, asks the kernel to acknowledge at once what
	// arrives next; it is called after each read and write until
	// quickLeft bytes have been read (see quickStart).
	quick     func()
	quickLeft atomic.Int64
}

// quickStart is how many bytes a connection reads before its
// acknowledgements may be delayed again. A start is a dialogue of small
// messages, and sshd sends with Nagle's algorithm: a reply written while
// its previous segment is unacknowledged waits for the acknowledgement.
// After authentication sshd sends its host keys and, a moment later, the
// sessions' confirmations; with the client's ACK delayed by 40 ms, the
// confirmations came 1.4 round trips after the opens instead of one. The
// start needs a few KiB; the bulk that follows keeps delayed ACKs.
const quickStart = 32 << 10

// newTransport wraps c, whose socket is raw (c itself or what it wraps),
// for an SSH connection.
func newTransport(c, raw net.Conn) *transport {
	t := &transport{Conn: c, start: time.Now(), quick: quickAck(raw)}
	t.quickLeft.Store(quickStart)
	return t
}

func (t *transport) Read(p []byte) (int, error) {
	n, err := t.Conn.Read(p)
	if n > 0 {
		t.lastRead.Store(int64(time.Since(t.start)))
		if t.quick != nil && t.quickLeft.Load() > 0 {
			t.quickLeft.Add(int64(-n))
			t.quick()
		}
	}
	if err != nil {
		if e := t.lost.Load(); e != nil {
			err = e
		}
	}
	return n, err
}

func (t *transport) Write(p []byte) (int, error) {
	n, err := t.Conn.Write(p)
	if t.quick != nil && t.quickLeft.Load() > 0 {
		// Sending just after receiving can make the kernel take the
		// connection for an interactive one and delay the next ACK.
		t.quick()
	}
	if err != nil {
		if e := t.lost.Load(); e != nil {
			err = e
		}
	}
	return n, err
}

// now is the time on the transport's clock, which lastRead reads.
func (t *transport) now() time.Duration { return time.Since(t.start) }

// lose closes the connection with err as the cause its users see.
// Closing is what unblocks a write stuck behind a full TCP window, and
// with it everything waiting on the connection.
func (t *transport) lose(err *Error) {
	t.lost.CompareAndSwap(nil, err)
	t.Conn.Close()
}

// notResponding is the cause of a KindNotResponding Error.
type notResponding struct {
	keepalives int
	interval   time.Duration
}

func (e *notResponding) Error() string {
	if e.keepalives == 0 {
		return fmt.Sprintf("server not responding (nothing received for %s)", e.interval)
	}
	plural := "s"
	if e.keepalives == 1 {
		plural = ""
	}
	return fmt.Sprintf("server not responding (no reply to %d keepalive%s at %s intervals)", e.keepalives, plural, e.interval)
}

// keepalive is ssh's ServerAliveInterval and ServerAliveCountMax: after
// each interval in which the server sent nothing, one more
// keepalive@openssh.com request is counted and sent, and anything the
// server sends resets the count; when more than max are counted the
// connection is closed, so that the server is given up after (max+1)
// intervals of silence, as with ssh. Any byte from the server counts as an
// answer, not only the reply: while a stalled server fills the TCP window,
// the request itself waits behind the blocked writes and would never
// return.
func (c *Client) keepalive(t *transport, interval time.Duration, max int, logf func(string, ...any)) {
	timer := time.NewTimer(interval)
	defer timer.Stop()
	ended := make(chan struct{})
	go func() {
		c.Client.Wait()
		close(ended)
	}()
	var inflight atomic.Bool
	unanswered := 0
	var checked time.Duration // t.now() at the previous check
	for {
		select {
		case <-c.done:
			return
		case <-ended:
			return
		case <-timer.C:
		}
		now, last := t.now(), time.Duration(t.lastRead.Load())
		if last > checked {
			unanswered = 0
		}
		checked = now
		if quiet := now - last; quiet < interval {
			timer.Reset(interval - quiet)
			continue
		}
		unanswered++
		if unanswered > max {
			logf("Timeout, server %s not responding.", c.Config.Host)
			t.lose(&Error{Kind: KindNotResponding, Op: "connection to", Host: c.Config.Host,
				Err:  &notResponding{keepalives: max, interval: interval},
				Hint: "the server, or the network path to it, stopped answering; ServerAliveInterval and ServerAliveCountMax set how long hpncp waits"})
			return
		}
		if inflight.CompareAndSwap(false, true) {
			go func() {
				_, _, _ = c.SendRequest("keepalive@openssh.com", true, nil)
				inflight.Store(false)
			}()
		}
		timer.Reset(interval)
	}
}

// Quiet is how long the server has sent nothing on c: since its last
// byte, or since the connection was made. A server busy answering keeps it
// short; a stalled one lets it grow.
func (c *Client) Quiet() time.Duration {
	if c.transport == nil {
		return 0
	}
	return c.transport.now() - time.Duration(c.transport.lastRead.Load())
}

// NotResponding returns the KindNotResponding error that closed the
// connection when the keepalives went unanswered, or nil. It does not
// block: callers ask it after the connection failed, to tell why.
func (c *Client) NotResponding() error {
	if c.transport == nil {
		return nil
	}
	if e := c.transport.lost.Load(); e != nil {
		return e
	}
	return nil
}
