// Package sshconn turns a host name from the command line into an
// authenticated SSH connection with OpenSSH's semantics: ssh_config
// resolution (through `ssh -G` when ssh is installed), known_hosts checking
// with StrictHostKeyChecking, ssh-agent and identity files,
// keyboard-interactive and password authentication, jump hosts,
// ProxyCommand and keepalives; the TCP sockets' buffers (SetBuffers) and
// the kernel's RTT of them (TCPRTT, Linux).
//
// A Dialer remembers what worked (decrypted keys, typed passwords, accepted
// host keys) so that a pool can open many connections to one host while the
// user is asked at most once.
package sshconn

import (
	"context"
	"errors"
	"fmt"
	"net"
)

// Options are the command-line settings that affect connection set-up
// (scp/ssh flags).
type Options struct {
	// ConfigFile is -F: "" reads ~/.ssh/config and /etc/ssh/ssh_config,
	// "none" reads no configuration file.
	ConfigFile string
	// Options are -o Key=Value (or "Key Value") in command-line order; the
	// first value of a key wins, as in ssh.
	Options []string
	// Port is -P / -p; 0 takes the port from the configuration.
	Port int
	// User comes from user@host or -l; "" takes it from the configuration.
	User string
	// Identities are -i files, in order; they are tried before the
	// configuration's IdentityFile entries.
	Identities []string
	// JumpHosts is -J host[,host...]; "" takes ProxyJump from the configuration.
	JumpHosts string
	// Ciphers is -c; "" takes Ciphers from the configuration, or hpncp's
	// preference when the configuration does not set it.
	Ciphers string
	// AddressFamily is "" (any), "inet" (-4) or "inet6" (-6).
	AddressFamily string
	// BatchMode is -B: never prompt.
	BatchMode bool
	// Logf receives the -v connection-step log; nil is silent. It never
	// receives secrets.
	Logf func(format string, args ...any)
	// Warnf receives warnings that OpenSSH prints without -v (changed host
	// keys, keys added to known_hosts, missing -i files); nil discards them.
	Warnf func(format string, args ...any)
	// Banner receives the server's pre-authentication banner, escaped as
	// vis.Text escapes it (its lines kept, no control character); nil
	// discards it.
	Banner func(message string)
	// Tune, when not nil, is called on each direct TCP connection before
	// the SSH handshake (socket buffer sizes); its error ends the dial.
	Tune func(net.Conn) error
	// Prompter asks the user; nil means there is no terminal and nothing is
	// asked at all.
	Prompter Prompter

	hooks DialHooks // of one dial (DialWith), never of its jump hosts
}

// DialHooks let the caller of one dial (Dialer.DialWith) act at its
// steps: a pool starts its other connections once the first's TCP
// handshake is done, and holds their authentication until the first's
// has succeeded.
type DialHooks struct {
	// Connected, when not nil, is called once the byte stream to the
	// destination is open (after Tune), before the SSH handshake; again
	// if the server drops it and the dial tries again.
	Connected func(net.Conn)
	// AuthGate, when not nil, is waited for before the first
	// authentication request, the host key checked: a connection dialed
	// beside another one still authenticating waits for its outcome, so
	// that the user is asked once and a refused key is not offered many
	// times at once. ConnectTimeout does not run while it waits, and
	// starts again after. Its error ends the dial.
	AuthGate func(context.Context) error
	// KeyGate, when not nil, is waited for instead of AuthGate before the
	// first authentication request, and AuthGate before any request
	// after it: a connection dialed beside a first one whose key the
	// server has accepted offers its keys as soon as that is known,
	// while the first's signature is on its way, a round trip before the
	// first is through. Anything more it may need (another key, a second
	// factor, a password) waits for the first's outcome, as with
	// AuthGate alone.
	KeyGate func(context.Context) error
	// KeyAccepted, when not nil, is called when the server has accepted a
	// public key this dial offered and its signature is made: the
	// passphrase it needed, if any, is known (and kept for the other
	// dials).
	KeyAccepted func()
}

// Prompter asks the user on the terminal.
type Prompter interface {
	// ReadPassword reads without echo: passwords, passphrases,
	// keyboard-interactive answers with echo off.
	ReadPassword(prompt string) (string, error)
	// ReadLine reads with echo: host key confirmation, keyboard-interactive
	// answers with echo on.
	ReadLine(prompt string) (string, error)
}

// Error is the error type of Resolve and Dial, and of a connection that
// stopped responding: the CLI maps it to exit code 255, like ssh.
type Error struct {
	// Kind says what a caller can do about the failure: retry, re-dial,
	// give up. errors.Is(err, k) finds it through any wrapping.
	Kind Kind
	// Op is the failed step, for example "connect to host".
	Op string
	// Host names the destination as the step saw it: "host:port",
	// "user@host" or the command-line alias.
	Host string
	// Err is the cause.
	Err error
	// Hint tells the user what to do about it, or is empty.
	Hint string
}

func (e *Error) Error() string {
	if e.Host == "" {
		return fmt.Sprintf("%s: %v", e.Op, e.Err)
	}
	return fmt.Sprintf("%s %s: %v", e.Op, e.Host, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Is makes errors.Is(err, KindAuth) and the like true for an Error of
// that Kind.
func (e *Error) Is(target error) bool {
	k, ok := target.(Kind)
	return ok && k != KindOther && k == e.Kind
}

// Kind classifies an Error by what a caller can do about it rather than
// by its text. A Kind is an error itself only so that errors.Is can look
// for one.
type Kind int

const (
	// KindOther is every failure not below: configuration, ProxyCommand,
	// an interrupted dial (its Err is then the context's error).
	KindOther Kind = iota
	// KindUnreachable: the TCP connection (or the jump host's channel to
	// the target) could not be opened, or ConnectTimeout passed before the
	// connection was set up. Trying again later may work.
	KindUnreachable
	// KindDropped: the server closed or reset the connection before the
	// key exchange was over, as sshd does to connections beyond
	// MaxStartups or from a source PerSourcePenalties holds back. Dial has
	// already retried with backoff for the rest of ConnectTimeout.
	KindDropped
	// KindNegotiation: client and server share no algorithm.
	KindNegotiation
	// KindHostKey: the host key was refused (unknown, changed, revoked or
	// not accepted by the user). Retrying cannot help.
	KindHostKey
	// KindAuth: the server refused every authentication method offered.
	// Retrying cannot help.
	KindAuth
	// KindNotResponding: an established connection was closed because
	// the server sent nothing through ServerAliveCountMax keepalives; the
	// path or the server is gone.
	KindNotResponding
)

func (k Kind) Error() string {
	switch k {
	case KindUnreachable:
		return "host unreachable"
	case KindDropped:
		return "connection dropped by the server before the key exchange"
	case KindNegotiation:
		return "no common algorithm"
	case KindHostKey:
		return "host key refused"
	case KindAuth:
		return "authentication refused"
	case KindNotResponding:
		return "server not responding"
	}
	return "connection failed"
}

// kindOf returns the Kind of err's *Error, KindOther when it has none.
func kindOf(err error) Kind {
	if e, ok := asError(err); ok {
		return e.Kind
	}
	return KindOther
}

// asError returns err's *Error if it has one.
func asError(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}

func (o *Options) logf(format string, args ...any) {
	if o.Logf != nil {
		o.Logf(format, args...)
	}
}

func (o *Options) warnf(format string, args ...any) {
	if o.Warnf != nil {
		o.Warnf(format, args...)
	}
}
