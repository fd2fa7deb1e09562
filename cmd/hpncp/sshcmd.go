package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"github.com/urfave/cli/v3"
	"golang.org/x/crypto/ssh"

	"github.com/hpncp/hpncp/ends"
	"github.com/hpncp/hpncp/internal/vis"
	"github.com/hpncp/hpncp/sshconn"
)

// sshBufferSize is the size of each buffer between the local streams and
// the channel: large reads and writes keep the per-call cost low at
// loopback and LAN speeds, where CPU and not the window limits one channel.
const sshBufferSize = 256 << 10

// sshOptions are the settings of `hpncp ssh`: OpenSSH's ssh flags, the
// destination and the remote command.
type sshOptions struct {
	User          string // -l, or user@ in the destination
	Port          int    // -p, or the port of an ssh:// destination
	Identities    []string
	ConfigFile    string
	SSHOptions    []string // -o
	Jump          string
	Cipher        string
	AddressFamily string // "inet" (-4), "inet6" (-6) or ""
	Quiet         bool
	Verbose       bool
	Compression   bool // -C: accepted, does nothing (x/crypto/ssh has no compression)
	NullStdin     bool // -n
	NoCommand     bool // -N
	Subsystem     bool // -s
	PrintConfig   bool // -G
	Version       bool // -V
	Help          bool

	Host    string
	Command []string
}

// sshFlag is one of OpenSSH's ssh flags. refused, when set, says what the
// flag does: hpncp ssh does not do it, and using it is an error naming it
// rather than a silent difference.
type sshFlag struct {
	valued  bool
	refused string
}

// sshFlags is ssh's option string (OpenSSH 9), flag by flag.
var sshFlags = map[byte]sshFlag{
	'2': {}, '4': {}, '6': {}, 'a': {}, 'C': {}, 'G': {}, 'h': {}, 'k': {}, 'n': {},
	'N': {}, 'q': {}, 's': {}, 'T': {}, 'v': {}, 'V': {}, 'x': {},
	'c': {valued: true}, 'e': {valued: true}, 'F': {valued: true}, 'i': {valued: true},
	'J': {valued: true}, 'l': {valued: true}, 'o': {valued: true}, 'p': {valued: true},

	'1': {refused: "SSH protocol 1"},
	'A': {refused: "agent forwarding"},
	'f': {refused: "going to the background"},
	'g': {refused: "remote connections to forwarded ports"},
	'K': {refused: "GSSAPI authentication"},
	'M': {refused: "connection sharing"},
	't': {refused: "pseudo-terminal allocation"},
	'X': {refused: "X11 forwarding"},
	'Y': {refused: "X11 forwarding"},
	'y': {refused: "logging to syslog"},
	'b': {valued: true, refused: "binding to a local address"},
	'B': {valued: true, refused: "binding to a local interface"},
	'D': {valued: true, refused: "dynamic port forwarding"},
	'E': {valued: true, refused: "logging to a file"},
	'I': {valued: true, refused: "PKCS#11 keys"},
	'L': {valued: true, refused: "local port forwarding"},
	'm': {valued: true, refused: "MAC selection"},
	'O': {valued: true, refused: "control commands for a shared connection"},
	'P': {valued: true, refused: "tags for Match"},
	'Q': {valued: true, refused: "algorithm queries"},
	'R': {valued: true, refused: "remote port forwarding"},
	'S': {valued: true, refused: "connection sharing"},
	'w': {valued: true, refused: "tunnel device forwarding"},
	'W': {valued: true, refused: "stdio forwarding"},
}

const sshUsageHint = "run hpncp ssh --help for the flags it takes"

// parseSSHArgs reads ssh's command line as ssh does: flags, the
// destination, more flags, then the command, whose words are joined with
// spaces. "--" ends the flags; the first word that is not a flag after
// the destination starts the command.
func parseSSHArgs(args []string) (*sshOptions, error) {
	o := &sshOptions{}
	i := 0
	terminated := false
	flags := func() error {
		for i < len(args) {
			a := args[i]
			if a == "--" {
				i++
				terminated = true
				return nil
			}
			if a == "--help" {
				o.Help = true
				i++
				continue
			}
			if len(a) < 2 || a[0] != '-' || a[1] == '-' {
				if strings.HasPrefix(a, "--") {
					return usagef(sshUsageHint, "unknown ssh flag %s", a)
				}
				return nil
			}
			i++
			for j := 1; j < len(a); j++ {
				c := a[j]
				f, ok := sshFlags[c]
				switch {
				case !ok:
					return usagef(sshUsageHint, "unknown ssh flag -%c", c)
				case f.refused != "":
					return usagef("hpncp ssh runs commands for programs such as rsync and git; leave the flag out",
						"ssh flag -%c (%s) is not supported", c, f.refused)
				case !f.valued:
					o.setFlag(c)
					continue
				}
				var v string
				switch {
				case j+1 < len(a):
					v = a[j+1:]
				case i < len(args):
					v = args[i]
					i++
				default:
					return usagef(sshUsageHint, "ssh flag -%c needs a value", c)
				}
				if err := o.setValue(c, v); err != nil {
					return err
				}
				break
			}
		}
		return nil
	}
	if err := flags(); err != nil {
		return nil, err
	}
	if i < len(args) {
		if err := o.setDestination(args[i]); err != nil {
			return nil, err
		}
		i++
		if !terminated {
			if err := flags(); err != nil {
				return nil, err
			}
		}
	}
	o.Command = args[i:]
	return o, o.check()
}

func (o *sshOptions) setFlag(c byte) {
	switch c {
	case '4':
		o.AddressFamily = "inet"
	case '6':
		o.AddressFamily = "inet6"
	case 'C':
		o.Compression = true
	case 'G':
		o.PrintConfig = true
	case 'h':
		o.Help = true
	case 'n':
		o.NullStdin = true
	case 'N':
		o.NoCommand = true
	case 'q':
		o.Quiet = true
	case 's':
		o.Subsystem = true
	case 'v':
		o.Verbose = true
	case 'V':
		o.Version = true
	}
	// -2 -a -k -T -x ask for what hpncp ssh always does: protocol 2, no
	// agent or X11 forwarding, no GSSAPI delegation, no pseudo-terminal.
}

// setValue applies a flag with a value. As in ssh, the first -l and -p
// win and -J may be given once.
func (o *sshOptions) setValue(c byte, v string) error {
	switch c {
	case 'c':
		o.Cipher = v
	case 'e':
		// The escape character only works on a pseudo-terminal, which
		// hpncp ssh never requests; any value is accepted and unused.
	case 'F':
		o.ConfigFile = v
	case 'i':
		o.Identities = append(o.Identities, v)
	case 'J':
		if o.Jump != "" {
			return usagef("", "only one -J is allowed; give several jump hosts as -J a,b")
		}
		o.Jump = v
	case 'l':
		if o.User == "" {
			o.User = v
		}
	case 'o':
		o.SSHOptions = append(o.SSHOptions, v)
	case 'p':
		p, err := strconv.Atoi(v)
		if err != nil || p <= 0 || p > 65535 {
			return usagef("", "-p %s: not a port number", v)
		}
		if o.Port == 0 {
			o.Port = p
		}
	}
	return nil
}

// setDestination reads [user@]host or ssh://[user@]host[:port].
func (o *sshOptions) setDestination(d string) error {
	user, host := "", d
	if rest, ok := strings.CutPrefix(d, "ssh://"); ok {
		u, err := url.Parse("ssh://" + rest)
		if err != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
			return usagef("write it as ssh://[user@]host[:port]", "invalid destination %q", d)
		}
		host = u.Hostname()
		if u.User != nil {
			user = u.User.Username()
		}
		if ps := u.Port(); ps != "" {
			p, err := strconv.Atoi(ps)
			if err != nil || p <= 0 || p > 65535 {
				return usagef("", "invalid port in %q", d)
			}
			if o.Port == 0 {
				o.Port = p
			}
		}
	} else if at := strings.LastIndexByte(d, '@'); at >= 0 {
		user, host = d[:at], d[at+1:]
		if user == "" {
			return usagef("write it as [user@]host", "invalid destination %q", d)
		}
	}
	if host == "" {
		return usagef("write it as [user@]host", "invalid destination %q", d)
	}
	if o.User == "" {
		o.User = user
	}
	o.Host = host
	return nil
}

func (o *sshOptions) check() error {
	switch {
	case o.Help || o.Version:
		return nil
	case o.Host == "":
		return usagef(sshUsageHint, "missing destination: hpncp ssh [flags] [user@]host [command...]")
	case o.NoCommand && o.Subsystem:
		return usagef("", "-N (no command) and -s (subsystem) exclude each other")
	case o.NoCommand && len(o.Command) > 0:
		return usagef("leave out -N to run the command", "-N runs no remote command, but a command was given")
	case o.Subsystem && len(o.Command) == 0:
		return usagef("for example: hpncp ssh -s host sftp", "-s needs a subsystem name after the destination")
	}
	return nil
}

func (o *sshOptions) logf(stderr io.Writer) func(string, ...any) {
	if !o.Verbose {
		return func(string, ...any) {}
	}
	return logTo(stderr)
}

func (o *sshOptions) connOptions(stderr io.Writer) sshconn.Options {
	co := sshconn.Options{
		ConfigFile:    o.ConfigFile,
		Options:       o.SSHOptions,
		Port:          o.Port,
		User:          o.User,
		Identities:    o.Identities,
		JumpHosts:     o.Jump,
		Ciphers:       o.Cipher,
		AddressFamily: o.AddressFamily,
		Prompter:      sshconn.TerminalPrompter(),
	}
	if o.Verbose {
		co.Logf = o.logf(stderr)
	}
	if !o.Quiet {
		co.Warnf = warnTo(stderr)
		co.Banner = func(msg string) { io.WriteString(stderr, vis.Text(msg)) }
	}
	return co
}

// sshCommand is `hpncp ssh`. Its arguments follow ssh's rules, not the
// CLI library's, so they reach parseSSHArgs untouched.
func sshCommand(stdin io.Reader, stdout, stderr io.Writer) *cli.Command {
	return &cli.Command{
		Name:            "ssh",
		Usage:           "a remote shell for rsync -e, git and scripts",
		SkipFlagParsing: true,
		HideHelp:        true,
		Action: func(ctx context.Context, cmd *cli.Command) error {
			return sshMain(ctx, cmd.Args().Slice(), stdin, stdout, stderr)
		},
	}
}

// sshMain runs `hpncp ssh ARGS` (or `hpnssh ARGS`).
func sshMain(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	o, err := parseSSHArgs(args)
	if err != nil {
		return err
	}
	return runSSH(ctx, o, stdin, stdout, stderr)
}

// runSSH connects and runs the remote command, shell or subsystem with
// stdin, stdout and stderr connected to it. A remote exit status other
// than 0 comes back as *remoteExitError; connection and authentication
// failures, and a connection lost before the exit status, as
// *sshconn.Error.
func runSSH(ctx context.Context, o *sshOptions, stdin io.Reader, stdout, stderr io.Writer) error {
	switch {
	case o.Help:
		_, err := io.WriteString(stdout, sshHelpText)
		return err
	case o.Version:
		_, err := fmt.Fprintf(stderr, "hpncp ssh %s %s %s/%s\n", version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
		return err
	}
	co := o.connOptions(stderr)
	logf := o.logf(stderr)
	if o.PrintConfig {
		cfg, err := sshconn.Resolve(ctx, o.Host, co)
		if err != nil {
			return err
		}
		return printSSHConfig(stdout, cfg)
	}
	if o.Compression {
		logf("-C: compression is not available (golang.org/x/crypto/ssh has none); continuing without")
	}
	c, err := ends.Dial(ctx, ends.Options{SSH: co}, o.Host)
	if err != nil {
		return err
	}
	defer c.Close()
	if o.NoCommand {
		return waitConnection(ctx, c, o.Host)
	}
	if o.NullStdin {
		stdin = nil
	}
	return runSession(ctx, c, o, stdin, stdout, stderr, logf)
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
func runSession(ctx context.Context, c *sshconn.Client, o *sshOptions, stdin io.Reader, stdout, stderr io.Writer, logf func(string, ...any)) error {
	ch, reqs, err := c.OpenChannel("session", nil)
	if err != nil {
		return &sshconn.Error{Op: "open session on", Host: o.Host, Err: err}
	}
	defer ch.Close()
	ended := make(chan sessionEnd, 1)
	go func() { ended <- readSessionEnd(reqs) }()

	for _, kv := range c.Config.Environment(os.Environ()) {
		logf("sending environment variable %s", kv[0])
		// ssh asks without wanting a reply: a server that refuses a
		// variable (AcceptEnv) is not an error, and no round trip is spent.
		if _, err := ch.SendRequest("env", false, ssh.Marshal(struct{ Name, Value string }{kv[0], kv[1]})); err != nil {
			return &sshconn.Error{Op: "set environment on", Host: o.Host, Err: err}
		}
	}
	cmd := strings.Join(o.Command, " ")
	var what string
	var ok bool
	switch {
	case o.Subsystem:
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
		return &sshconn.Error{Op: "start " + what + " on", Host: o.Host, Err: err}
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
				logf("send stdin to %s: %v", o.Host, werr)
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
	return end.result(o.Host, logf)
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
		re := &remoteExitError{Host: host, Status: 128 + signalNumber(e.signal), Signal: e.signal}
		logf("%v", re)
		return re
	case e.status == 0:
		logf("remote command exited with status 0")
		return nil
	case e.status > 0:
		re := &remoteExitError{Host: host, Status: e.status}
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

// remoteExitError is a remote command that exited with a status other
// than 0, or was killed by a signal. hpncp ssh exits with Status, as ssh
// does, and prints nothing of its own: the command has spoken on stderr.
type remoteExitError struct {
	Host   string
	Status int
	Signal string // "TERM", … when killed by a signal
}

func (e *remoteExitError) Error() string {
	if e.Signal != "" {
		return fmt.Sprintf("remote command on %s killed by signal %s", e.Host, e.Signal)
	}
	return fmt.Sprintf("remote command on %s exited with status %d", e.Host, e.Status)
}

// ExitCode is the process exit code hpncp ssh ends with.
func (e *remoteExitError) ExitCode() int { return e.Status }

// printSSHConfig is -G: the resolved configuration in ssh -G's format.
// git runs `ssh -G host` to tell OpenSSH's ssh from simpler programs, and
// passes ssh's options (-p, -o SendEnv) only when it succeeds.
func printSSHConfig(w io.Writer, c *sshconn.Config) error {
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

// sshHelpText is `hpncp ssh --help`.
const sshHelpText = `hpncp ssh is a remote shell for programs: it takes ssh's command line and
runs one command on the server with stdin, stdout and stderr connected, as
"ssh -T" does, with the same ssh_config, keys and known_hosts as hpncp.
Installed (or linked) under the name hpnssh, it is also "hpnssh ARGS".

Usage:
  hpncp ssh [flags] [user@]host [command...]
  hpncp ssh [flags] ssh://[user@]host[:port] [command...]

Examples:
  rsync -a -e 'hpncp ssh' src/ host:dst/
  GIT_SSH_COMMAND='hpncp ssh' git clone host:repo.git
  hpncp ssh -p 2222 host 'tar cf - dir' > dir.tar

As with ssh, flags may also follow the host, up to the first word that is
not a flag (or "--"); the command's words are joined with spaces and run by
the remote user's shell.

Flags (ssh's, with ssh's meaning):
  -l user       remote user
  -p port       port to connect to
  -i file       identity (private key) file; may be repeated
  -F file       ssh_config file to read instead of ~/.ssh/config
  -o Key=Value  any ssh_config option (SendEnv and SetEnv included)
  -J host[,h2]  connect through jump hosts
  -c cipher     cipher(s) to use, comma-separated
  -4, -6        use IPv4 or IPv6 only
  -n            stdin from /dev/null: the command reads EOF
  -N            run no command; hold the connection until interrupted
  -s            the command is a subsystem name (e.g. sftp)
  -G            print the resolved configuration and exit
  -q            quiet: no warnings or banner
  -v            verbose: connection steps on stderr
  -V            print the version and exit
  -T -x -a -k -2 and -e CHAR are accepted: hpncp ssh never requests a
                pseudo-terminal (so has no escape character), never forwards
                an agent or X11, and speaks protocol 2 only.
  -C            accepted, but does nothing: golang.org/x/crypto/ssh has no
                compression (rsync -z compresses better anyway).
Other ssh flags (-t -A -X -L -R -D -W -f -M -S ...) are refused by name.

Without a command, the remote login shell runs without a pseudo-terminal:
fine for piped input, not for interactive use.

Exit status:
  the remote command's status, or 128+N when a signal N killed it
  2    usage error
  130  interrupted (SIGINT or SIGTERM)
  255  connection, host key or authentication failure, or the connection
       lost before the command's exit status arrived
`
