package job

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/hpncp/hpncp/sshconn"
)

// sshBufferSize is the size of each buffer between the local streams and
// the channel: large reads and writes keep the per-call cost low at
// loopback and LAN speeds, where CPU and not the window limits one channel.
const sshBufferSize = 256 << 10

// Shell is one run of hpncp ssh: a command, the remote shell or a
// subsystem on a host, with the local streams connected to it.
type Shell struct {
	Conn Conn
	Host string
	// Command is the command's words, joined with spaces; the subsystem's
	// name with Subsystem; none for the remote login shell.
	Command   []string
	Subsystem bool // -s
	NoCommand bool // -N: hold the connection, run nothing
	// Stdin nil gives the command none (-n).
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Logf, when not nil, receives the session's steps (-v).
	Logf func(format string, args ...any)
	// Helper is HelperAuto (a helper at the far end stripes the
	// command's streams over several connections), HelperInstall (and
	// hpncp uploads itself as the helper where none answers) or
	// HelperNever; "" takes hpncp's configuration file's, else auto.
	// HelperPath is the helper's command there, when told; else the one
	// installed in HelperDir (the configuration's, else
	// helper.DefaultDir) for HelperBinary (the running hpncp when ""),
	// else hpncp on the remote PATH. Channels, when above 0, is how many
	// connections it stripes over.
	Helper       string
	HelperPath   string
	HelperDir    string
	HelperBinary string
	Channels     int

	dialer *sshconn.Dialer
	bin    *binaryFuture // the binary an installed helper must hash to; nil: none known
}

// RunShell connects and runs s's command, shell or subsystem with its
// streams connected to it. A remote exit status other than 0 comes back
// as *RemoteExit; connection and authentication failures, and a
// connection lost before the exit status, as errors ConnError finds.
func RunShell(ctx context.Context, s Shell) error {
	logf := s.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	s.dialer = sshconn.NewDialer(s.Conn.ssh())
	striped := !s.Subsystem && !s.NoCommand && len(s.Command) > 0
	if striped {
		mode, dir, err := HelperSettings(s.Host, s.Helper, s.HelperDir)
		if err != nil {
			return err
		}
		s.Helper, s.HelperDir = mode, dir
		if s.Helper == HelperInstall && s.HelperPath != "" {
			return errors.New("--helper install with --helper-path: the helper installed is the one in the helpers' directory; leave one out")
		}
		striped = s.Helper != HelperNever
		switch {
		case !striped || s.HelperPath != "":
		case s.HelperBinary != "" || s.Helper == HelperInstall:
			// The binary told of, or to be uploaded, must be one.
			b, err := openBinary(s.HelperBinary)
			if err != nil {
				return err
			}
			s.bin = knownBinary(b)
		default:
			// Hashed while the connection is dialed: on a short path,
			// where no helper is started, it is not waited for.
			s.bin = hashBinary(s.HelperBinary, logf)
		}
	}
	var key string
	var ahead *joiners
	if striped {
		key = helperKey(ctx, s)
		ahead = helperAhead(ctx, s, key, logf)
	}
	c, err := s.dialer.Dial(ctx, s.Host)
	if err != nil {
		if ahead != nil {
			ahead.close()
		}
		return err
	}
	defer c.Close()
	if s.NoCommand {
		return waitConnection(ctx, c, s.Host)
	}
	if striped && ahead == nil {
		// On a short path one channel is what ssh has, and as fast: the
		// helper would only add its start.
		if rtt, _ := sshconn.TCPRTT(c.Transport); helperChannels(s.Channels, rtt) < 2 {
			logf("the round trip (%v) asks for one channel: running the command on it, without the helper", rtt.Round(time.Microsecond))
			striped = false
		}
	}
	if striped {
		if ran, err := runHelper(ctx, c, s, key, ahead, logf); ran || err != nil {
			return err
		}
		if ran, err := s.noHelper(ctx, c, key, logf); ran || err != nil {
			return err
		}
	} else if s.Helper == HelperNever {
		logf("--helper never: running the command on one channel")
	}
	return runSession(ctx, c, s, logf)
}

// PrintConfig writes host's configuration as c resolves it, in ssh -G's
// format (hpncp ssh -G).
func PrintConfig(ctx context.Context, host string, c Conn, w io.Writer) error {
	cfg, err := sshconn.Resolve(ctx, host, c.ssh())
	if err != nil {
		return err
	}
	return printConfig(w, cfg)
}

// waitConnection is -N: hold the connection until a signal or until the
// server closes it.
func waitConnection(ctx context.Context, c *sshconn.Client, host string) error {
	closed := make(chan error, 1)
	go func() { closed <- c.Wait() }()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case err := <-closed:
		if lost := c.NotResponding(); lost != nil {
			return lost
		}
		if err == nil {
			err = errors.New("closed by the server")
		}
		return &sshconn.Error{Op: "connection to", Host: host, Err: err}
	}
}

// runSession runs the command on a session channel with the local
// streams; stdin nil means none (-n). Remote output is copied until the
// server's EOF, so that nothing the command wrote is lost, and the exit
// status is read after. It speaks to the channel directly rather than
// through ssh.Session, which cannot wait for a subsystem's end.
func runSession(ctx context.Context, c *sshconn.Client, s Shell, logf func(string, ...any)) error {
	stdin, stdout, stderr := s.Stdin, s.Stdout, s.Stderr
	ch, reqs, err := c.OpenChannel("session", nil)
	if err != nil {
		return &sshconn.Error{Op: "open session on", Host: s.Host, Err: err}
	}
	defer ch.Close()
	ended := make(chan sessionEnd, 1)
	go func() { ended <- readSessionEnd(reqs) }()

	for _, kv := range c.Config.Environment(os.Environ()) {
		logf("sending environment variable %s", kv[0])
		// ssh asks without wanting a reply: a server that refuses a
		// variable (AcceptEnv) is not an error, and no round trip is spent.
		if _, err := ch.SendRequest("env", false, ssh.Marshal(struct{ Name, Value string }{kv[0], kv[1]})); err != nil {
			return &sshconn.Error{Op: "set environment on", Host: s.Host, Err: err}
		}
	}
	cmd := strings.Join(s.Command, " ")
	var what string
	var ok bool
	switch {
	case s.Subsystem:
		what = "subsystem " + cmd
		logf("starting subsystem %s", cmd)
		ok, err = ch.SendRequest("subsystem", true, ssh.Marshal(struct{ Name string }{cmd}))
	case cmd == "":
		what = "shell"
		logf("starting a shell (no pseudo-terminal)")
		ok, err = ch.SendRequest("shell", true, nil)
	default:
		what = "command"
		logf("running command: %s", cmd)
		ok, err = ch.SendRequest("exec", true, ssh.Marshal(struct{ Command string }{cmd}))
	}
	if err == nil && !ok {
		err = errors.New("the server refused it")
	}
	if err != nil {
		return &sshconn.Error{Op: "start " + what + " on", Host: s.Host, Err: err}
	}

	// Ctrl-C or SIGTERM ends the run by dropping the connection, which
	// unblocks every copy below.
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()

	if stdin == nil {
		ch.CloseWrite()
	} else {
		go func() {
			if _, werr, rerr := pump(ch, stdin); rerr != nil {
				logf("read stdin: %v", rerr)
			} else if werr != nil {
				logf("send stdin to %s: %v", s.Host, werr)
			}
			// EOF on stdin is EOF for the remote command; its output
			// keeps flowing until it exits.
			ch.CloseWrite()
		}()
	}

	var wg sync.WaitGroup
	var writeErrs [2]error
	for i, s := range []struct {
		dst  io.Writer
		src  io.Reader
		name string
	}{{stdout, ch, "stdout"}, {stderr, ch.Stderr(), "stderr"}} {
		wg.Go(func() {
			if _, werr, _ := pump(s.dst, s.src); werr != nil {
				// Nobody takes the output any more: stop the command
				// rather than let it block on a full window.
				writeErrs[i] = fmt.Errorf("write remote %s: %w", s.name, werr)
				ch.Close()
			}
		})
	}
	wg.Wait()
	end := <-ended
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err := errors.Join(writeErrs[:]...); err != nil {
		return err
	}
	if lost := c.NotResponding(); lost != nil && end.status < 0 && end.signal == "" {
		return lost
	}
	return end.result(s.Host, logf)
}

// sessionEnd is what the server said about the command's end.
type sessionEnd struct {
	status    int // -1 when no exit-status arrived
	signal    string
	signalMsg string
}

// readSessionEnd serves the channel's requests until the channel closes:
// it records exit-status and exit-signal and, as ssh does, answers
// anything else (keepalives) with failure.
func readSessionEnd(reqs <-chan *ssh.Request) sessionEnd {
	e := sessionEnd{status: -1}
	for r := range reqs {
		switch r.Type {
		case "exit-status":
			var m struct{ Status uint32 }
			if ssh.Unmarshal(r.Payload, &m) == nil {
				e.status = int(m.Status)
			}
		case "exit-signal":
			var m struct {
				Signal     string
				CoreDumped bool
				Message    string
				Lang       string
			}
			if ssh.Unmarshal(r.Payload, &m) == nil {
				e.signal, e.signalMsg = m.Signal, m.Message
			}
		}
		if r.WantReply {
			r.Reply(false, nil)
		}
	}
	return e
}

// result turns the session's end into hpncp ssh's: nil for status 0, the
// remote status, 128+n for signal n as shells report it, and a connection
// error (exit 255) when neither arrived.
func (e sessionEnd) result(host string, logf func(string, ...any)) error {
	switch {
	case e.signal != "":
		re := &RemoteExit{Host: host, Status: 128 + signalNumber(e.signal), Signal: e.signal}
		logf("%v", re)
		return re
	case e.status == 0:
		logf("remote command exited with status 0")
		return nil
	case e.status > 0:
		re := &RemoteExit{Host: host, Status: e.status}
		logf("%v", re)
		return re
	}
	return &sshconn.Error{Op: "run command on", Host: host,
		Err: errors.New("the connection closed before the command's exit status arrived")}
}

// pump copies src to dst through one large buffer until src ends. It
// reports write and read errors apart: only a failed write is the
// caller's to report, a read ends with the stream.
func pump(dst io.Writer, src io.Reader) (n int64, werr, rerr error) {
	buf := make([]byte, sshBufferSize)
	for {
		nr, err := src.Read(buf)
		if nr > 0 {
			nw, err := dst.Write(buf[:nr])
			n += int64(nw)
			if err == nil && nw < nr {
				err = io.ErrShortWrite
			}
			if err != nil {
				return n, err, nil
			}
		}
		if err == io.EOF {
			return n, nil, nil
		}
		if err != nil {
			return n, nil, err
		}
	}
}

// RemoteExit is a remote command that exited with a status other
// than 0, or was killed by a signal. hpncp ssh exits with Status, as ssh
// does, and prints nothing of its own: the command has spoken on stderr.
type RemoteExit struct {
	Host   string
	Status int
	Signal string // "TERM", … when killed by a signal
}

func (e *RemoteExit) Error() string {
	if e.Signal != "" {
		return fmt.Sprintf("remote command on %s killed by signal %s", e.Host, e.Signal)
	}
	return fmt.Sprintf("remote command on %s exited with status %d", e.Host, e.Status)
}

// ExitCode is the process exit code hpncp ssh ends with.
func (e *RemoteExit) ExitCode() int { return e.Status }

// printSSHConfig is -G: the resolved configuration in ssh -G's format.
// git runs `ssh -G host` to tell OpenSSH's ssh from simpler programs, and
// passes ssh's options (-p, -o SendEnv) only when it succeeds.
func printConfig(w io.Writer, c *sshconn.Config) error {
	var b strings.Builder
	kv := func(k, v string) {
		if v != "" {
			fmt.Fprintf(&b, "%s %s\n", k, v)
		}
	}
	yn := func(v bool) string {
		if v {
			return "yes"
		}
		return "no"
	}
	kv("host", c.Host)
	kv("hostname", c.HostName)
	kv("user", c.User)
	kv("port", strconv.Itoa(c.Port))
	kv("addressfamily", c.AddressFamily)
	kv("batchmode", yn(c.BatchMode))
	kv("identitiesonly", yn(c.IdentitiesOnly))
	kv("stricthostkeychecking", c.StrictHostKeyChecking)
	kv("proxyjump", c.ProxyJump)
	kv("proxycommand", c.ProxyCommand)
	kv("ciphers", strings.Join(c.Ciphers, ","))
	kv("userknownhostsfile", strings.Join(c.UserKnownHostsFiles, " "))
	kv("globalknownhostsfile", strings.Join(c.GlobalKnownHostsFiles, " "))
	for _, f := range c.IdentityFiles {
		kv("identityfile", f)
	}
	for _, p := range c.SendEnv {
		kv("sendenv", p)
	}
	for _, e := range c.SetEnv {
		kv("setenv", e)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// SplitWords splits a command line as OpenSSH splits one (an rsync -e
// command, for hpncp sync, which rsync splits the same way).
func SplitWords(s string) []string { return sshconn.SplitWords(s) }
