// Package sshtest runs an in-process SSH server with an SFTP subsystem for
// fast integration tests: it serves real files under a temporary directory,
// accepts a generated client key (and optionally a password), can run an
// exec handler, forwards direct-tcpip channels to loopback addresses (for
// jump-host tests) and can enforce a per-connection session limit like
// sshd's MaxSessions. It writes the key, known_hosts and ssh_config files a
// client needs, so code under test can connect the way a user would.
package sshtest

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/subtle"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"golang.org/x/crypto/ssh"
)

// Options configures a Server. The zero value serves SFTP to the generated
// client key only.
type Options struct {
	// Password, if set, is accepted by password authentication and by
	// keyboard-interactive authentication asking one question.
	Password string
	// NoSFTP refuses the sftp subsystem, as a server without one would.
	NoSFTP bool
	// NoLsetstat leaves out lsetstat@openssh.com, which OpenSSH's
	// sftp-server offers since 8.0 and this server does otherwise: the
	// server is then one that can set a symbolic link's times and owner
	// only by following it.
	NoLsetstat bool
	// MaxSessions limits the session channels open at once on one
	// connection; opens beyond it are refused as sshd refuses them
	// ("administratively prohibited"). 0 means unlimited.
	MaxSessions int
	// DropFirst closes the first DropFirst connections right after accept,
	// before the banner, as sshd's MaxStartups and PerSourcePenalties
	// refuse connections.
	DropFirst int
	// Exec, if set, runs exec requests: it gets the command line and the
	// channel's streams and returns the exit status. It must return once
	// its streams fail, so that the server can stop. nil refuses exec.
	Exec func(cmd string, stdin io.Reader, stdout, stderr io.Writer) int
	// ListDir, if set, is asked about every directory a client opens for
	// listing, with the path as the client sent it. Where it returns a
	// function, the server lists that directory itself: each READDIR is
	// answered with the names the function returns, as regular files,
	// until it returns none. A test makes a listing that never ends, as a
	// broken or hostile server's would. nil lists every directory as it
	// is on disk.
	ListDir func(dir string) func() []string
	// Hold, if set, is asked about every SFTP request that names a path
	// (STAT, OPEN, OPENDIR, MKDIR and the like), with the path as the
	// client sent it. Where it returns a channel, the session answers
	// nothing more until the channel is closed, as a server that stopped
	// answering would; the test must close it before the server stops.
	Hold func(path string) <-chan struct{}
	// WrapConn, if set, wraps each accepted connection before the SSH
	// handshake; n counts connections from 0 in the order accepted.
	// Fault tests use it to cut, stall or slow connections
	// (internal/faultnet).
	WrapConn func(n int, c net.Conn) net.Conn
}

// Server is a running in-process SSH server. It stops when the test that
// started it ends.
type Server struct {
	Addr string // "127.0.0.1:NNNN"
	Host string // "127.0.0.1"
	Port int

	// Root is the SFTP server's working directory (the "remote home"):
	// relative remote paths resolve here.
	Root string

	HostKey ssh.Signer

	// ClientKeyFile is an unencrypted ed25519 private key (mode 0600)
	// whose public key the server accepts; ClientKeyFile+".pub" holds the
	// public key.
	ClientKeyFile string
	// KnownHostsFile holds the host key line for [127.0.0.1]:Port.
	KnownHostsFile string
	// ConfigFile is an ssh_config with "Host testhost" pointing here with
	// ClientKeyFile and KnownHostsFile, strict host key checking and batch
	// mode, usable by OpenSSH clients (-F) and by hpncp.
	ConfigFile string

	tb        testing.TB
	opts      Options
	config    *ssh.ServerConfig
	clientKey ssh.PublicKey
	ln        net.Listener
	wg        sync.WaitGroup

	mu       sync.Mutex
	conns    map[net.Conn]struct{}
	order    []net.Conn // every connection accepted, in order
	accepted int
	sessions int // session channels accepted, on every connection
	closed   bool
	refusing bool // new connections are closed at once (Refuse)
	dropped  int  // connections closed for DropFirst
}

// maxReadLength is what OpenSSH's sftp-server returns at most for one read
// request (SFTP_MAX_READ_LENGTH); serving the same makes clients meet the
// short reads they will meet against sshd.
const maxReadLength = 256*1024 - 1024

// Start starts a server listening on 127.0.0.1 and registers its shutdown,
// which closes every connection, with t.Cleanup.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	if o.MaxSessions < 0 {
		t.Fatalf("sshtest: MaxSessions %d is negative", o.MaxSessions)
	}
	_, hostPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatalf("sshtest: generate host key: %v", err)
	}
	hostKey, err := ssh.NewSignerFromKey(hostPriv)
	if err != nil {
		t.Fatalf("sshtest: host key signer: %v", err)
	}

	s := &Server{
		Host:    "127.0.0.1",
		Root:    t.TempDir(),
		HostKey: hostKey,
		tb:      t,
		opts:    o,
		conns:   make(map[net.Conn]struct{}),
	}
	s.ln, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("sshtest: listen on 127.0.0.1: %v", err)
	}
	s.Addr = s.ln.Addr().String()
	s.Port = s.ln.Addr().(*net.TCPAddr).Port
	s.ClientKeyFile, s.KnownHostsFile, s.ConfigFile, s.clientKey = ClientFiles(t, s.Host, s.Port, hostKey.PublicKey())

	s.config = s.serverConfig()
	s.wg.Add(1)
	go s.acceptLoop()
	t.Cleanup(s.close)
	return s
}

// Connections reports how many TCP connections the server has accepted so
// far, including ones that failed to authenticate.
func (s *Server) Connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.accepted
}

// Sessions reports how many session channels the server has accepted so
// far, on every connection.
func (s *Server) Sessions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessions
}

// Open reports how many of the connections the server accepted are still
// open.
func (s *Server) Open() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// Refuse makes the server close every new connection as soon as it is
// accepted, as a host whose sshd is gone would refuse it, until Refuse
// is called with false.
func (s *Server) Refuse(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refusing = on
}

// KillConnections drops every open connection abruptly, without an SSH
// disconnect message, as a network failure or a killed sshd would; so are
// the connections it opened for direct-tcpip channels. The server keeps
// accepting new connections.
func (s *Server) KillConnections() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		c.Close()
	}
}

func (s *Server) close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.ln.Close()
	s.KillConnections()
	s.wg.Wait()
}

func (s *Server) logf(format string, args ...any) {
	s.tb.Helper()
	s.tb.Logf("sshtest %s: "+format, append([]any{s.Addr}, args...)...)
}

func (s *Server) serverConfig() *ssh.ServerConfig {
	cfg := &ssh.ServerConfig{
		ServerVersion: "SSH-2.0-hpncp_sshtest",
		PublicKeyCallback: func(_ ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			if subtle.ConstantTimeCompare(key.Marshal(), s.clientKey.Marshal()) == 1 {
				return nil, nil
			}
			return nil, errors.New("public key not authorized")
		},
	}
	if s.opts.Password != "" {
		cfg.PasswordCallback = func(_ ssh.ConnMetadata, password []byte) (*ssh.Permissions, error) {
			return nil, s.checkPassword(string(password))
		}
		cfg.KeyboardInteractiveCallback = func(c ssh.ConnMetadata, challenge ssh.KeyboardInteractiveChallenge) (*ssh.Permissions, error) {
			answers, err := challenge(c.User(), "", []string{"Password: "}, []bool{false})
			if err != nil {
				return nil, err
			}
			if len(answers) != 1 {
				return nil, fmt.Errorf("got %d answers to 1 question", len(answers))
			}
			return nil, s.checkPassword(answers[0])
		}
	}
	cfg.AddHostKey(s.HostKey)
	return cfg
}

func (s *Server) checkPassword(p string) error {
	if subtle.ConstantTimeCompare([]byte(p), []byte(s.opts.Password)) == 1 {
		return nil
	}
	return errors.New("wrong password")
}

func (s *Server) acceptLoop() {
	defer s.wg.Done()
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		n := s.accepted
		s.accepted++
		s.mu.Unlock()
		if s.opts.WrapConn != nil {
			nc = s.opts.WrapConn(n, nc)
		}
		if !s.track(nc) {
			return
		}
		s.mu.Lock()
		refuse := s.refusing
		s.mu.Unlock()
		if refuse {
			s.untrack(nc)
			nc.Close()
			continue
		}
		s.wg.Add(1)
		go s.serveConn(nc)
	}
}

// track adds c to the connections KillConnections drops, or closes c and
// reports false if the server has stopped.
func (s *Server) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		c.Close()
		return false
	}
	s.conns[c] = struct{}{}
	s.order = append(s.order, c)
	return true
}

// KillConnection drops the n-th connection the server accepted (from 0),
// if it is still open, and reports whether it was.
func (s *Server) KillConnection(n int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n < 0 || n >= len(s.order) {
		return false
	}
	c := s.order[n]
	if _, open := s.conns[c]; !open {
		return false
	}
	c.Close()
	return true
}

func (s *Server) untrack(c net.Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	c.Close()
}

func (s *Server) serveConn(nc net.Conn) {
	defer s.wg.Done()
	defer s.untrack(nc)
	if s.drop() {
		return
	}
	sc, chans, reqs, err := ssh.NewServerConn(nc, s.config)
	if err != nil {
		// Clients hanging up and our own shutdown are not worth a line;
		// authentication failures are.
		if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
			s.logf("handshake with %s: %v", nc.RemoteAddr(), err)
		}
		return
	}
	defer sc.Close()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		ssh.DiscardRequests(reqs)
	}()
	c := &conn{srv: s}
	c.loop(chans)
}

// drop reports whether the connection being served is one of the first
// DropFirst.
func (s *Server) drop() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dropped >= s.opts.DropFirst {
		return false
	}
	s.dropped++
	return true
}

// ClientFiles writes, in a temporary directory of t's, what a client
// needs to log in to a server on host:port whose key is hostKey: a new
// client key, a known_hosts line and an ssh_config naming the server
// "testhost" (see Server.ConfigFile). Other in-process servers
// (internal/hostile) accept clientKey the way Server does.
func ClientFiles(t testing.TB, host string, port int, hostKey ssh.PublicKey) (keyFile, knownHosts, config string, clientKey ssh.PublicKey) {
	t.Helper()
	keyDir := t.TempDir()
	keyFile = filepath.Join(keyDir, "id_ed25519")
	clientKey = writeClientKey(t, keyFile)
	knownHosts = filepath.Join(keyDir, "known_hosts")
	writeFile(t, knownHosts, fmt.Sprintf("[%s]:%d %s", host, port, ssh.MarshalAuthorizedKey(hostKey)), 0o644)
	config = filepath.Join(keyDir, "ssh_config")
	writeFile(t, config, strings.Join([]string{
		"Host testhost",
		"\tHostName " + host,
		"\tPort " + strconv.Itoa(port),
		"\tUser " + configValue(t, currentUser(t)),
		"\tIdentityFile " + configValue(t, keyFile),
		"\tIdentitiesOnly yes",
		"\tUserKnownHostsFile " + configValue(t, knownHosts),
		"\tGlobalKnownHostsFile /dev/null",
		"\tStrictHostKeyChecking yes",
		"\tBatchMode yes",
		"",
	}, "\n"), 0o644)
	return keyFile, knownHosts, config, clientKey
}

func writeClientKey(t testing.TB, path string) ssh.PublicKey {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatalf("sshtest: generate client key: %v", err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "sshtest client")
	if err != nil {
		t.Fatalf("sshtest: encode client key: %v", err)
	}
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatalf("sshtest: client public key: %v", err)
	}
	writeFile(t, path, string(pem.EncodeToMemory(block)), 0o600)
	writeFile(t, path+".pub", string(ssh.MarshalAuthorizedKey(sshPub)), 0o644)
	return sshPub
}

func writeFile(t testing.TB, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatalf("sshtest: write %s: %v", path, err)
	}
}

func currentUser(t testing.TB) string {
	t.Helper()
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if name := os.Getenv("USER"); name != "" {
		return name
	}
	t.Fatal("sshtest: cannot tell the current user name (user.Current failed and $USER is empty)")
	return ""
}

// configValue quotes v for an ssh_config line when it holds characters
// that would split or end the argument, such as a space in $TMPDIR.
func configValue(t testing.TB, v string) string {
	t.Helper()
	if strings.ContainsAny(v, "\"\\\n") {
		t.Fatalf("sshtest: %q cannot be written to ssh_config", v)
	}
	if strings.ContainsAny(v, " \t#'") {
		return `"` + v + `"`
	}
	return v
}
