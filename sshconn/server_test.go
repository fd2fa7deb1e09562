package sshconn

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

// TestMain lets the test binary act as a netcat for ProxyCommand tests.
func TestMain(m *testing.M) {
	if addr := os.Getenv("HPNCP_SSHCONN_NETCAT"); addr != "" {
		os.Exit(netcat(addr))
	}
	os.Exit(m.Run())
}

func netcat(addr string) int {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	go func() {
		io.Copy(conn, os.Stdin)
		conn.(*net.TCPConn).CloseWrite()
	}()
	io.Copy(os.Stdout, conn)
	return 0
}

// testServer is an in-process SSH server on 127.0.0.1 with publickey,
// password and keyboard-interactive authentication and direct-tcpip.
type testServer struct {
	t        *testing.T
	ln       net.Listener
	port     int
	hostKey  ssh.Signer
	cfg      *ssh.ServerConfig
	password string
	kbd      string
	// kbdName, kbdInstruction and kbdPrompt, when kbdPrompt is set, are
	// the keyboard-interactive challenge in place of the usual one.
	kbdName, kbdInstruction, kbdPrompt string
	// authorized holds the marshalled public keys publickey accepts.
	authorized [][]byte
	// silentKeepalive makes the server never answer global requests, as a
	// dead peer.
	silentKeepalive bool
	directTCPIP     bool
	authDelay       time.Duration

	mu            sync.Mutex
	conns         []ssh.Conn
	passwordTries atomic.Int32
	kbdTries      atomic.Int32
	pubkeyOffers  atomic.Int32
	forwards      atomic.Int32
	closedConns   atomic.Int32
}

type serverOption func(*testServer)

func withPassword(pw string) serverOption { return func(s *testServer) { s.password = pw } }
func withKbd(answer string) serverOption  { return func(s *testServer) { s.kbd = answer } }

// withKbdChallenge makes keyboard-interactive ask one question, prompt,
// under name and instruction, as a hostile server may word them.
func withKbdChallenge(name, instruction, prompt string) serverOption {
	return func(s *testServer) { s.kbdName, s.kbdInstruction, s.kbdPrompt = name, instruction, prompt }
}

// withBanner makes the server send msg as its pre-authentication banner.
func withBanner(msg string) serverOption {
	return func(s *testServer) {
		s.cfg.BannerCallback = func(ssh.ConnMetadata) string { return msg }
	}
}
func withKeys(keys ...ssh.PublicKey) serverOption {
	return func(s *testServer) {
		for _, k := range keys {
			s.authorized = append(s.authorized, k.Marshal())
		}
	}
}
func withDirectTCPIP() serverOption         { return func(s *testServer) { s.directTCPIP = true } }
func withSilentKeepalive() serverOption     { return func(s *testServer) { s.silentKeepalive = true } }
func withHostKey(k ssh.Signer) serverOption { return func(s *testServer) { s.hostKey = k } }

// withAuthDelay makes every authentication attempt wait d, as a server
// stuck on a slow PAM or LDAP lookup.
func withAuthDelay(d time.Duration) serverOption { return func(s *testServer) { s.authDelay = d } }

// withServerCiphers limits the ciphers the server accepts.
func withServerCiphers(c ...string) serverOption {
	return func(s *testServer) { s.cfg.Ciphers = c }
}

// withHostCert makes the server present a host certificate signed by ca
// (alongside the plain key).
func withHostCert(ca ssh.Signer, principals ...string) serverOption {
	return func(s *testServer) {
		cert := &ssh.Certificate{
			Key:             s.hostKey.PublicKey(),
			CertType:        ssh.HostCert,
			KeyId:           "test host",
			ValidPrincipals: principals,
			ValidBefore:     ssh.CertTimeInfinity,
		}
		if err := cert.SignCert(rand.Reader, ca); err != nil {
			s.t.Fatal(err)
		}
		cs, err := ssh.NewCertSigner(cert, s.hostKey)
		if err != nil {
			s.t.Fatal(err)
		}
		s.cfg.AddHostKey(cs)
	}
}

func newTestServer(t *testing.T, opts ...serverOption) *testServer {
	t.Helper()
	s := &testServer{t: t, hostKey: newSigner(t)}
	s.cfg = &ssh.ServerConfig{
		// No ssh-rsa (SHA-1): RSA keys must authenticate with rsa-sha2-*.
		PublicKeyAuthAlgorithms: []string{ssh.KeyAlgoED25519, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSASHA512,
			ssh.KeyAlgoECDSA256},
	}
	// Options that replace the host key must run before the one adding it.
	for _, o := range opts {
		if o != nil {
			o(s)
		}
	}
	s.cfg.AddHostKey(s.hostKey)
	if len(s.authorized) > 0 {
		s.cfg.PublicKeyCallback = func(_ ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			s.pubkeyOffers.Add(1)
			for _, a := range s.authorized {
				if bytes.Equal(a, key.Marshal()) {
					return nil, nil
				}
			}
			return nil, errors.New("unknown key")
		}
	}
	if s.password != "" {
		s.cfg.PasswordCallback = func(_ ssh.ConnMetadata, pw []byte) (*ssh.Permissions, error) {
			s.passwordTries.Add(1)
			if string(pw) == s.password {
				return nil, nil
			}
			return nil, errors.New("wrong password")
		}
	}
	if s.kbd != "" {
		s.cfg.KeyboardInteractiveCallback = func(_ ssh.ConnMetadata, ch ssh.KeyboardInteractiveChallenge) (*ssh.Permissions, error) {
			s.kbdTries.Add(1)
			name, instruction, prompt := "", "Answer the question.", "Verification code: "
			if s.kbdPrompt != "" {
				name, instruction, prompt = s.kbdName, s.kbdInstruction, s.kbdPrompt
			}
			ans, err := ch(name, instruction, []string{prompt}, []bool{false})
			if err != nil {
				return nil, err
			}
			if len(ans) == 1 && ans[0] == s.kbd {
				return nil, nil
			}
			return nil, errors.New("wrong answer")
		}
	}
	if s.cfg.PublicKeyCallback == nil && s.cfg.PasswordCallback == nil && s.cfg.KeyboardInteractiveCallback == nil {
		s.cfg.NoClientAuth = true
	}
	if s.authDelay > 0 {
		s.cfg.AuthLogCallback = func(ssh.ConnMetadata, string, error) { time.Sleep(s.authDelay) }
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.ln = ln
	s.port = ln.Addr().(*net.TCPAddr).Port
	go s.serve()
	t.Cleanup(s.close)
	return s
}

func (s *testServer) close() {
	s.ln.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.conns {
		c.Close()
	}
}

func (s *testServer) serve() {
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			return
		}
		go s.handle(nc)
	}
}

func (s *testServer) handle(nc net.Conn) {
	sc, chans, reqs, err := ssh.NewServerConn(nc, s.cfg)
	if err != nil {
		nc.Close()
		return
	}
	s.mu.Lock()
	s.conns = append(s.conns, sc)
	s.mu.Unlock()
	defer s.closedConns.Add(1)
	if s.silentKeepalive {
		go func() {
			for range reqs {
			}
		}()
	} else {
		go ssh.DiscardRequests(reqs)
	}
	for nch := range chans {
		if nch.ChannelType() != "direct-tcpip" || !s.directTCPIP {
			nch.Reject(ssh.UnknownChannelType, "not supported")
			continue
		}
		var target struct {
			Host     string
			Port     uint32
			OrigHost string
			OrigPort uint32
		}
		if err := ssh.Unmarshal(nch.ExtraData(), &target); err != nil {
			nch.Reject(ssh.ConnectionFailed, err.Error())
			continue
		}
		tc, err := net.Dial("tcp", net.JoinHostPort(target.Host, fmt.Sprint(target.Port)))
		if err != nil {
			nch.Reject(ssh.ConnectionFailed, err.Error())
			continue
		}
		ch, creqs, err := nch.Accept()
		if err != nil {
			tc.Close()
			continue
		}
		s.forwards.Add(1)
		go ssh.DiscardRequests(creqs)
		go func() {
			io.Copy(ch, tc)
			ch.CloseWrite()
		}()
		go func() {
			io.Copy(tc, ch)
			tc.(*net.TCPConn).CloseWrite()
		}()
	}
	sc.Wait()
}

func newSigner(t *testing.T) ssh.Signer {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// writeKey writes a new unencrypted private key to dir/name, with
// name.pub when withPub, and returns its public key.
func writeKey(t *testing.T, dir, name, kind string, withPub bool) ssh.PublicKey {
	t.Helper()
	var priv any
	switch kind {
	case "rsa":
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			t.Fatal(err)
		}
		priv = k
	default:
		_, k, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		priv = k
	}
	block, err := ssh.MarshalPrivateKey(priv, "test")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	if withPub {
		if err := os.WriteFile(path+".pub", ssh.MarshalAuthorizedKey(s.PublicKey()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return s.PublicKey()
}

var encryptedKey struct {
	once sync.Once
	pem  []byte
	pub  ssh.PublicKey
	err  error
}

// writeEncryptedKey writes dir/name, an ED25519 key in OpenSSH's format
// encrypted with "hunter2", which keeps the public half readable. The key
// is made once per test binary: its bcrypt KDF is slow under the race
// detector.
func writeEncryptedKey(t *testing.T, dir, name string) ssh.PublicKey {
	t.Helper()
	k := &encryptedKey
	k.once.Do(func() {
		_, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			k.err = err
			return
		}
		block, err := ssh.MarshalPrivateKeyWithPassphrase(priv, "test", []byte("hunter2"))
		if err != nil {
			k.err = err
			return
		}
		k.pem = pem.EncodeToMemory(block)
		s, err := ssh.NewSignerFromKey(priv)
		if err != nil {
			k.err = err
			return
		}
		k.pub = s.PublicKey()
	})
	if k.err != nil {
		t.Fatal(k.err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, k.pem, 0o600); err != nil {
		t.Fatal(err)
	}
	return k.pub
}

// writePEMKey writes dir/name, a new ECDSA key in the legacy PEM format
// encrypted with "hunter2" (fast to decrypt, and without a public half:
// only name.pub, when withPub, tells it before decryption).
func writePEMKey(t *testing.T, dir, name string, withPub bool) ssh.PublicKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	//lint:ignore SA1019 the legacy format is what old keys on disk use
	block, err := x509.EncryptPEMBlock(rand.Reader, "EC PRIVATE KEY", der, []byte("hunter2"), x509.PEMCipherAES128)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	pub, err := ssh.NewPublicKey(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	if withPub {
		if err := os.WriteFile(path+".pub", ssh.MarshalAuthorizedKey(pub), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return pub
}

// knownLine is a known_hosts line for key under pattern.
func knownLine(pattern string, key ssh.PublicKey) string {
	return pattern + " " + strings.TrimSpace(string(ssh.MarshalAuthorizedKey(key)))
}

// fakePrompter answers from scripts and records what it was asked.
type fakePrompter struct {
	mu        sync.Mutex
	passwords []string
	lines     []string
	asked     []string
}

func (p *fakePrompter) ReadPassword(prompt string) (string, error) {
	return p.next(prompt, &p.passwords)
}

func (p *fakePrompter) ReadLine(prompt string) (string, error) {
	return p.next(prompt, &p.lines)
}

func (p *fakePrompter) next(prompt string, script *[]string) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.asked = append(p.asked, prompt)
	if len(*script) == 0 {
		return "", io.EOF
	}
	ans := (*script)[0]
	*script = (*script)[1:]
	return ans, nil
}

func (p *fakePrompter) prompts() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.asked)
}

// logSink collects Logf or Warnf output.
type logSink struct {
	mu    sync.Mutex
	lines []string
}

func (l *logSink) f(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

func (l *logSink) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// env is a temporary client side: a config file, a known_hosts file and
// identity files.
type env struct {
	t          *testing.T
	dir        string
	knownHosts string
	config     string
	logs       logSink
	warnings   logSink
}

func newEnv(t *testing.T) *env {
	t.Helper()
	dir := t.TempDir()
	return &env{t: t, dir: dir, knownHosts: filepath.Join(dir, "known_hosts")}
}

// writeConfig writes an ssh_config whose Host * block points every file
// into the temp dir, after the given host blocks.
func (e *env) writeConfig(blocks string, globals ...string) {
	e.t.Helper()
	var b strings.Builder
	b.WriteString(blocks)
	b.WriteString("\nHost *\n")
	fmt.Fprintf(&b, "  User tester\n  UserKnownHostsFile %s\n  GlobalKnownHostsFile %s\n  IdentityAgent none\n",
		e.knownHosts, filepath.Join(e.dir, "global_known_hosts"))
	for _, g := range globals {
		b.WriteString("  " + g + "\n")
	}
	e.config = filepath.Join(e.dir, "config")
	if err := os.WriteFile(e.config, []byte(b.String()), 0o600); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) writeKnownHosts(lines ...string) {
	e.t.Helper()
	if err := os.WriteFile(e.knownHosts, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) options(p Prompter, extra ...string) Options {
	o := Options{
		ConfigFile: e.config,
		Options:    extra,
		Logf:       e.logs.f,
		Warnf:      e.warnings.f,
	}
	if p != nil {
		o.Prompter = p
	}
	return o
}

// targetBlock is a Host block for alias pointing at s.
func targetBlock(alias string, s *testServer, lines ...string) string {
	b := fmt.Sprintf("Host %s\n  HostName 127.0.0.1\n  Port %d\n", alias, s.port)
	for _, l := range lines {
		b += "  " + l + "\n"
	}
	return b
}

// serveAgent serves keys as an ssh-agent on a unix socket in dir.
func serveAgent(t *testing.T, dir string, keys ...any) string {
	t.Helper()
	kr := agent.NewKeyring()
	for _, k := range keys {
		if err := kr.Add(agent.AddedKey{PrivateKey: k}); err != nil {
			t.Fatal(err)
		}
	}
	sock := filepath.Join(dir, "agent.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				agent.ServeAgent(kr, c)
			}()
		}
	}()
	return sock
}

// waitFor polls cond for up to 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
