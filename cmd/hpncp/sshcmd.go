package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"github.com/urfave/cli/v3"

	"github.com/hpncp/hpncp/internal/vis"
	"github.com/hpncp/hpncp/job"
)

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

	Helper       string // --helper: auto, never or install ("": the configuration's, else auto)
	HelperPath   string // --helper-path: the helper's command at the far end
	HelperDir    string // --helper-dir: where installed helpers are on the server
	HelperBinary string // --helper-binary: the local hpncp that --helper install uploads
	Channels     int    // --connections: the helper's connections (0: as the path asks)

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
			if strings.HasPrefix(a, "--") {
				name, v, hasValue := strings.Cut(a[2:], "=")
				if !longSSHFlags[name] {
					return usagef(sshUsageHint, "unknown ssh flag %s", a)
				}
				i++
				if !hasValue {
					if i == len(args) {
						return usagef(sshUsageHint, "--%s needs a value", name)
					}
					v = args[i]
					i++
				}
				if err := o.setLong(name, v); err != nil {
					return err
				}
				continue
			}
			if len(a) < 2 || a[0] != '-' {
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

// longSSHFlags are hpncp ssh's own flags, beside ssh's: the helper's.
var longSSHFlags = map[string]bool{"helper": true, "helper-path": true, "helper-dir": true, "helper-binary": true, "connections": true}

// setLong applies one of hpncp ssh's own flags.
func (o *sshOptions) setLong(name, v string) error {
	switch name {
	case "helper":
		if v != job.HelperAuto && v != job.HelperNever && v != job.HelperInstall {
			return usagef("", "--helper %s: want auto, never or install", v)
		}
		o.Helper = v
	case "helper-path":
		if v == "" {
			return usagef("", "--helper-path needs the helper's command at the far end")
		}
		o.HelperPath = v
	case "helper-dir":
		if err := job.CheckHelperDir(v); err != nil {
			return usagef("the helpers' directory on the server is absolute or under ~/", "--helper-dir: %v", err)
		}
		o.HelperDir = v
	case "helper-binary":
		if v == "" {
			return usagef("", "--helper-binary needs a local hpncp binary")
		}
		o.HelperBinary = v
	case "connections":
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxHelperChannels {
			return usagef("", "--connections %s: want 1 to %d", v, maxHelperChannels)
		}
		o.Channels = n
	}
	return nil
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

func (o *sshOptions) conn(stderr io.Writer) job.Conn {
	c := job.Conn{
		ConfigFile:    o.ConfigFile,
		Options:       o.SSHOptions,
		Port:          o.Port,
		User:          o.User,
		Identities:    o.Identities,
		Jump:          o.Jump,
		Ciphers:       o.Cipher,
		AddressFamily: o.AddressFamily,
	}
	if o.Verbose {
		c.Logf = o.logf(stderr)
	}
	if !o.Quiet {
		c.Warnf = warnTo(stderr)
		c.Banner = func(msg string) { io.WriteString(stderr, vis.Text(msg)) }
	}
	return c
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
// stdin, stdout and stderr connected to it (job.RunShell).
func runSSH(ctx context.Context, o *sshOptions, stdin io.Reader, stdout, stderr io.Writer) error {
	switch {
	case o.Help:
		_, err := io.WriteString(stdout, sshHelpText)
		return err
	case o.Version:
		_, err := fmt.Fprintf(stderr, "hpncp ssh %s %s %s/%s\n", version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
		return err
	}
	// The connections dialed beside each other, the helper's streams and
	// the -v lines all write to stderr at once: a line each, whole.
	stderr = &lineLocked{w: stderr}
	c := o.conn(stderr)
	if o.PrintConfig {
		return job.PrintConfig(ctx, o.Host, c, stdout)
	}
	logf := o.logf(stderr)
	if o.Compression {
		logf("-C: compression is not available (golang.org/x/crypto/ssh has none); continuing without")
	}
	s := job.Shell{Conn: c, Host: o.Host, Command: o.Command, Subsystem: o.Subsystem, NoCommand: o.NoCommand,
		Stdin: stdin, Stdout: stdout, Stderr: stderr, Logf: logf,
		Helper: o.Helper, HelperPath: o.HelperPath, HelperDir: o.HelperDir, HelperBinary: o.HelperBinary,
		Channels: o.Channels}
	if o.NullStdin {
		s.Stdin = nil
	}
	return job.RunShell(ctx, s)
}

// lineLocked makes concurrent writes to w take turns.
type lineLocked struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lineLocked) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
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

hpncp's own flags:
  --helper auto|never|install
                auto (the default): where hpncp runs at the far end too
                (installed by hpncp helper install, or on the remote PATH),
                it stripes the command's stdin and output over several
                connections, as many as the round trip asks for, so that a
                long path carries them at link speed. Without a helper, one
                channel, as ssh, and a line says how to get one where it
                would have helped. never: always one channel. install: where
                no helper answers, upload this hpncp as one first (see
                hpncp helper --help). The default for a host can be set in
                hpncp's configuration file (Helper, in a Host block).
  --helper-path CMD
                the helper's command at the far end, in place of the
                installed one or hpncp on the remote PATH
  --helper-dir DIR
                where installed helpers are on the server
                [~/.cache/hpncp/helper, or HelperDir in the configuration]
  --helper-binary FILE
                the local hpncp that --helper install uploads [this one]
  --connections N
                stripe over N connections, not as many as the path asks

Without a command, the remote login shell runs without a pseudo-terminal:
fine for piped input, not for interactive use.

Exit status:
  the remote command's status, or 128+N when a signal N killed it
  2    usage error
  130  interrupted (SIGINT or SIGTERM)
  255  connection, host key or authentication failure, or the connection
       lost before the command's exit status arrived
`
