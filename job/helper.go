package job

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"net/netip"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/hpncp/hpncp/helper"
	"github.com/hpncp/hpncp/internal/recommend"
	"github.com/hpncp/hpncp/internal/vis"
	"github.com/hpncp/hpncp/protocol"
	"github.com/hpncp/hpncp/sshconn"
	"github.com/hpncp/hpncp/transfer"
)

// HelperProtocol is the helper protocol this hpncp speaks.
const HelperProtocol = helper.Protocol

// The helper settings of hpncp ssh (--helper).
const (
	HelperAuto  = "auto"  // a helper present at the far end is used
	HelperNever = "never" // one channel, as ssh
)

// DefaultHelperPath is the helper hpncp ssh runs at the far end when not
// told another: hpncp on the remote user's PATH.
const DefaultHelperPath = "hpncp"

// helperRTTPerChannel is the round trip each further channel of a striped
// command is for: a channel carries the far end's window (OpenSSH: 2 MiB)
// per round trip, about 20 MB/s at 100 ms, and one per 12 ms of round
// trip lets the channels together carry 1 Gbit/s with room for a slow
// one. On a LAN one channel is what ssh has, and as fast.
const helperRTTPerChannel = 12 * time.Millisecond

// helperChannels is how many channels a striped command opens on a path of
// rtt (0: unknown, one), unless told (n > 0).
func helperChannels(n int, rtt time.Duration) int {
	if n > 0 {
		return n
	}
	if rtt <= 0 {
		return 1
	}
	return min(max(int(math.Ceil(float64(rtt)/float64(helperRTTPerChannel))), 1), 16)
}

// helperArgs are hpncp serve's words for a channel of job: the first of
// channels, or one that joins it. None needs quoting.
func helperArgs(job string, channels int, join bool) string {
	args := fmt.Sprintf("--protocol %d --job %s", helper.Protocol, job)
	if join {
		return args + " --join"
	}
	return fmt.Sprintf("%s --channels %d", args, channels)
}

// helperLine is the exec command line of a helper's channel with args:
// the helper told (--helper-path), else the one hpncp helper install put
// in the helpers' directory for this hpncp, its hash checked first, else
// hpncp on the remote PATH.
func (s Shell) helperLine(job string, channels int, join bool) string {
	args := helperArgs(job, channels, join)
	switch {
	case s.HelperPath != "":
		return protocol.QuoteArg(s.HelperPath) + " serve " + args
	case s.bin != nil:
		if b, ok := s.bin.get(); ok {
			return helper.Launch(s.HelperDir, b.sum, job, args, join)
		}
	}
	return DefaultHelperPath + " serve " + args
}

// helperChannel is an exec channel running the helper, with the channel's
// own stderr (the helper's messages, and the shell's where no helper is).
type helperChannel struct {
	ssh.Channel
	conn *sshconn.Client // the connection it is on, closed with it unless it is the first
}

func (h *helperChannel) Close() error {
	err := h.Channel.Close()
	if h.conn != nil {
		h.conn.Close()
	}
	return err
}

// openHelper opens a session on c and runs the helper's command line in
// it, with the environment ssh would send.
func openHelper(c *sshconn.Client, host, line string, logf func(string, ...any)) (*helperChannel, error) {
	ch, reqs, err := c.OpenChannel("session", nil)
	if err != nil {
		return nil, &sshconn.Error{Op: "open session on", Host: host, Err: err}
	}
	// The command's exit comes in a frame; the channel's own requests
	// (its exit-status is the helper's) are answered and dropped.
	h := &helperChannel{Channel: ch}
	go ssh.DiscardRequests(reqs)
	for _, kv := range c.Config.Environment(os.Environ()) {
		if _, err := ch.SendRequest("env", false, ssh.Marshal(struct{ Name, Value string }{kv[0], kv[1]})); err != nil {
			ch.Close()
			return nil, &sshconn.Error{Op: "set environment on", Host: host, Err: err}
		}
	}
	logf("running: %s", line)
	ok, err := ch.SendRequest("exec", true, ssh.Marshal(struct{ Command string }{line}))
	if err == nil && !ok {
		err = errors.New("the server refused it")
	}
	if err != nil {
		ch.Close()
		return nil, &sshconn.Error{Op: "start the helper on", Host: host, Err: err}
	}
	return h, nil
}

// newJobName is a job's name: 128 random bits, in hex.
func newJobName() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// joiners dials a striped command's further connections and runs the
// helper's --join on each; they come on more as they are ready, and more
// is closed once every dial has ended.
type joiners struct {
	name string
	n    int // channels in all, the first with them
	more chan helper.Channel
	stop context.CancelFunc
}

// dialJoiners starts n-1 dials for job name.
func dialJoiners(ctx context.Context, s Shell, name string, n int, logf func(string, ...any)) *joiners {
	ctx, stop := context.WithCancel(ctx)
	j := &joiners{name: name, n: n, more: make(chan helper.Channel, n-1), stop: stop}
	var dials sync.WaitGroup
	for i := range n - 1 {
		dials.Go(func() {
			conn, err := s.dialer.Dial(ctx, s.Host)
			if err != nil {
				logf("connection %d for the helper: %v", i+2, err)
				return
			}
			h, err := openHelper(conn, s.Host, s.helperLine(name, n, true), logf)
			if err != nil {
				conn.Close()
				logf("connection %d for the helper: %v", i+2, err)
				return
			}
			h.conn = conn
			go io.Copy(io.Discard, h.Stderr())
			j.more <- h
		})
	}
	go func() {
		dials.Wait()
		close(j.more)
	}()
	return j
}

// close stops the dials and closes what no one took.
func (j *joiners) close() {
	j.stop()
	for ch := range j.more {
		ch.Close()
	}
}

// helperKey is s's destination as the helper record names it, the key of
// its bench recommendation; "" where it cannot be resolved (the dial then
// says why).
func helperKey(ctx context.Context, s Shell) string {
	key, err := RecommendationKey(ctx, s.Conn, transfer.Location{Host: s.Host})
	if err != nil {
		return ""
	}
	return key
}

// helperAhead starts, where a helper answered at s's destination last
// time on a path that asked for more than one connection, the striped
// command's further dials now, beside the first connection's: at 100 ms
// that is some ten round trips sooner than after the helper's hello.
// nil where nothing is remembered.
func helperAhead(ctx context.Context, s Shell, key string, logf func(string, ...any)) *joiners {
	if key == "" {
		return nil
	}
	seen, ok := recommend.LoadHelper(key)
	if !ok || seen.Protocol != helper.Protocol {
		return nil
	}
	n := helperChannels(s.Channels, time.Duration(seen.RTTms*float64(time.Millisecond)))
	if n < 2 {
		return nil
	}
	logf("a helper answered here before: dialing %d more connections beside the first", n-1)
	return dialJoiners(ctx, s, newJobName(), n, logf)
}

// runHelper runs s's command through a helper at the far end, striped over
// as many connections as the path asks for (ahead: those dialed already).
// It reports false, having run nothing, where no helper of this protocol
// answered on c: the caller then runs the command on one channel.
func runHelper(ctx context.Context, c *sshconn.Client, s Shell, key string, ahead *joiners, logf func(string, ...any)) (bool, error) {
	rtt, _ := sshconn.TCPRTT(c.Transport)
	n := helperChannels(s.Channels, rtt)
	name := newJobName()
	if ahead != nil {
		defer ahead.close()
		name, n = ahead.name, ahead.n
	}
	first, err := openHelper(c, s.Host, s.helperLine(name, n, false), logf)
	if err != nil {
		return false, err
	}
	// The helper's own messages (and the shell's, where there is none)
	// are held until it is known which: without a helper they are the
	// shell's "not found", which -v alone shows.
	var early strings.Builder
	stderrDone := make(chan struct{})
	var stderrMu sync.Mutex
	var stderrTo io.Writer // nil until the helper answered
	go func() {
		defer close(stderrDone)
		buf := make([]byte, 4096)
		for {
			k, err := first.Stderr().Read(buf)
			if k > 0 {
				stderrMu.Lock()
				if stderrTo != nil {
					stderrTo.Write([]byte(vis.Text(string(buf[:k]))))
				} else if early.Len() < 4096 {
					early.Write(buf[:k])
				}
				stderrMu.Unlock()
			}
			if err != nil {
				return
			}
		}
	}()
	if err := helper.Start(first, strings.Join(s.Command, " ")); err != nil {
		closeAfterStderr(first, stderrDone)
		if errors.Is(err, helper.ErrNoHelper) {
			if msg, ok := helper.CheckFailed(early.String()); ok && s.Conn.Warnf != nil {
				s.Conn.Warnf("%s: %s", s.Host, vis.Text(msg))
			}
			logf("no helper at the far end (%v%s); running the command on one channel", err, quoted(early.String()))
			if key != "" {
				recommend.ForgetHelper(key)
			}
			return false, nil
		}
		return false, err
	}
	stderrMu.Lock()
	stderrTo = s.Stderr
	if early.Len() > 0 {
		io.WriteString(s.Stderr, vis.Text(early.String()))
	}
	stderrMu.Unlock()
	if key != "" && rtt > 0 {
		if err := recommend.SaveHelper(key, recommend.Helper{Protocol: helper.Protocol,
			RTTms: float64(rtt) / float64(time.Millisecond), Seen: time.Now().UTC()}); err != nil {
			logf("%v", err)
		}
	}

	// The further connections, dialed ahead or now, join as they come
	// while the first channel carries the streams.
	var more chan helper.Channel
	if ahead != nil {
		more = ahead.more
	} else if n > 1 {
		j := dialJoiners(ctx, s, name, n, logf)
		defer j.close()
		more = j.more
	}
	if n > 1 {
		logf("striping over %d connections (round trip %v)", n, rtt.Round(time.Millisecond))
	}
	exit, err := helper.Stripe(ctx, helper.StripeOptions{Channels: []helper.Channel{first}, More: more,
		Stdin: s.Stdin, Stdout: s.Stdout, Stderr: s.Stderr})
	first.Close()
	if ctx.Err() != nil {
		return true, ctx.Err()
	}
	if err != nil {
		return true, &sshconn.Error{Op: "run command through the helper on", Host: s.Host, Err: err}
	}
	return true, sessionEnd{status: exit.Status, signal: exit.Signal}.result(s.Host, logf)
}

// helperStderrWait bounds the wait for a failed helper's channel to
// close, and its stderr with it, where a server holds it open.
const helperStderrWait = 5 * time.Second

// closeAfterStderr closes the channel of a helper that did not start
// once its stderr's reader has ended (done), or helperStderrWait has
// passed: what the far end said (the shell's "not found", the launch
// line's check) may still be on its way, and closing the channel first
// loses it. The channel closes once its command has exited.
func closeAfterStderr(ch *helperChannel, done <-chan struct{}) {
	select {
	case <-done:
	case <-time.After(helperStderrWait):
	}
	ch.Close()
	<-done
}

// quoted is ": " and text, escaped for a terminal, where there is any.
func quoted(text string) string {
	text = strings.TrimSpace(text)
	if text == "" {
		return ""
	}
	return ": " + vis.Text(text)
}

// The helper's stdin reorder budget (twice the 12.5 MB a 1 Gbit/s path of
// 100 ms holds in flight: a connection that falls a round trip behind
// leaves the others that much ahead; with 16 MiB the others stood waiting
// for it hundreds of times a gigabyte) and the heap it asks the
// collector to keep to.
const (
	helperBudget = 24 << 20
	helperMemory = 48 << 20
)

// ServeRequestFlag is hpncp serve's flag for the delta service's first
// request, carried in its command line (ServeOptions.Request).
const ServeRequestFlag = helper.RequestFlag

// ServeOptions are hpncp serve's: the helper's end of one channel.
type ServeOptions struct {
	Protocol int    // the protocol the client speaks (--protocol)
	Job      string // --job
	Channels int    // --channels: the job's, this one with them
	Join     bool   // --join: hand this channel to the job's first
	Delta    bool   // --delta: serve delta transfers on this channel
	Request  string // --request: the delta service's first request (helper.RequestInput)
	Version  string // this hpncp's, for the client's error
	Stdout   io.Writer
}

// warmChannel grows, while the delta service starts, the congestion
// window of the SSH connection the helper runs over, in the direction
// of the client (sshconn.WarmWith), with padding on the channel's
// stderr, which the client reads and drops once the service is up. The
// delta a pull brings back, or a push's signature, comes some round
// trips after the helper's start, and then in slow start on a window TCP
// starts at 10 segments: at 100 ms a pull of a GiB with 100 scattered
// changes spent six round trips bringing back its 1 MB a connection.
// The connection is sshd's socket, found by the ends SSH_CONNECTION
// names (sshconn.SocketTCPInfo: Linux); elsewhere, on a short path, or
// without SSH_CONNECTION, nothing is sent. The function returned stops
// the padding and waits for it to stop.
func warmChannel(ctx context.Context, conn string, stderr io.Writer) (stop func()) {
	local, remote, ok := sshEnds(conn)
	if !ok {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	pad := make([]byte, 16<<10)
	go func() {
		defer close(done)
		sshconn.WarmWith(ctx, helperWarmMost,
			func() (sshconn.TCPStats, bool) { return sshconn.SocketTCPInfo(local, remote) },
			func(n int) error { _, err := stderr.Write(pad[:n]); return err })
	}()
	return func() { cancel(); <-done }
}

// helperWarmMost bounds the helper's padding: a service asked nothing
// for that long has no delta coming.
const helperWarmMost = 3 * time.Second

// sshEnds are the server's and the client's ends of the connection
// SSH_CONNECTION names ("client port server port").
func sshEnds(conn string) (local, remote netip.AddrPort, ok bool) {
	f := strings.Fields(conn)
	if len(f) != 4 {
		return local, remote, false
	}
	client, err1 := netip.ParseAddr(f[0])
	server, err2 := netip.ParseAddr(f[2])
	cport, err3 := strconv.ParseUint(f[1], 10, 16)
	sport, err4 := strconv.ParseUint(f[3], 10, 16)
	if err1 != nil || err2 != nil || err3 != nil || err4 != nil {
		return local, remote, false
	}
	return netip.AddrPortFrom(server, uint16(sport)), netip.AddrPortFrom(client, uint16(cport)), true
}

// Serve runs one channel of a helper's job on this process's stdin and
// stdout. A client of another protocol gets an error frame in place of a
// hello, and runs its command the plain way.
func Serve(ctx context.Context, o ServeOptions) error {
	if o.Protocol != helper.Protocol {
		return helper.Refuse(o.Stdout, o.Version, o.Protocol)
	}
	if o.Join {
		return helper.Join(ctx, o.Job, os.Stdin, os.Stdout)
	}
	if o.Delta {
		in, err := helper.RequestInput(o.Request, os.Stdin)
		if err != nil {
			return err
		}
		// The padding follows the hello, so that what the client keeps
		// of stderr until then is what a shell said.
		return helper.ServeDeltaWarmed(ctx, in, o.Stdout, func() func() {
			return warmChannel(ctx, os.Getenv("SSH_CONNECTION"), os.Stderr)
		})
	}
	// The helper runs on someone's server beside their work: what it
	// holds is stdin's reorder budget and a frame per channel, and the
	// collector is asked to keep it near that rather than let garbage
	// double it.
	debug.SetMemoryLimit(helperMemory)
	return helper.Lead(ctx, helper.LeadOptions{Job: o.Job, Channels: o.Channels,
		In: os.Stdin, Out: os.Stdout, Budget: helperBudget})
}

// noHelper is what follows where no helper answered on c: with
// HelperInstall, hpncp uploads itself there and runs the command through
// it (ran true); otherwise, where a helper would have striped the
// command, a line says how to get one. A helper that cannot be
// installed is said why, and the command runs on one channel.
func (s Shell) noHelper(ctx context.Context, c *sshconn.Client, key string, logf func(string, ...any)) (bool, error) {
	warnf := s.Conn.Warnf
	if warnf == nil {
		warnf = func(string, ...any) {}
	}
	if s.Helper != HelperInstall {
		rtt, _ := sshconn.TCPRTT(c.Transport)
		if n := helperChannels(s.Channels, rtt); n > 1 && s.HelperPath == "" {
			warnf("no helper on %s: the command ran on one channel; with one it would be striped over %d connections (hpncp helper install %s, or --helper install)",
				s.Host, n, s.Host)
		}
		return false, nil
	}
	b, _ := s.bin.get() // install mode: known before the dial (RunShell)
	where, err := installHelperOn(ctx, c, s.Host, s.HelperDir, b, logf)
	if err != nil {
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		warnf("%v; running the command on one channel", err)
		return false, nil
	}
	logf("installed the helper at %s:%s", s.Host, vis.Text(where))
	ran, err := runHelper(ctx, c, s, key, nil, logf)
	if !ran && err == nil {
		warnf("the helper installed at %s:%s did not answer; running the command on one channel", s.Host, vis.Text(where))
	}
	return ran, err
}
