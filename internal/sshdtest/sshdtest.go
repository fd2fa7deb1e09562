// Package sshdtest runs a real OpenSSH sshd on 127.0.0.1 for end-to-end
// tests: it generates host and client keys, writes sshd_config and a client
// ssh_config that both OpenSSH's tools and hpncp can use, starts sshd in the
// foreground and stops it by its PID when the test ends.
//
// Without sshd the tests skip, unless HPNCP_E2E=require (set by CI), in
// which case they fail: end-to-end coverage must not vanish silently.
package sshdtest

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/hpncp/hpncp/internal/testenv"
)

// SkipMarker starts the message of every test this package skips; CI fails
// when it appears in the test output.
const SkipMarker = "sshdtest: e2e skipped:"

// Options configures a Server.
type Options struct {
	// ExtraConfig holds sshd_config lines. They take precedence over the
	// harness defaults for the keywords they set (sshd keeps the first
	// value it reads); lines from the first Match on go last. ListenAddress,
	// Port and HostKey are always the harness's own.
	ExtraConfig []string

	// Unprivileged, when set (e.g. "nobody"), lets that account log in with
	// the client key too, as host "e2e-unprivileged" in ConfigFile, so that
	// tests running as root can meet real permission errors on the server.
	// Dir and the authorized keys become readable by it.
	Unprivileged string
}

// Server is a running sshd.
type Server struct {
	Port int
	Host string // "127.0.0.1"
	User string // the current user

	// Dir is a temporary directory holding keys, configs and the log.
	Dir string

	ClientKeyFile  string // unencrypted ed25519 key authorized for User
	KnownHostsFile string // host key line for [127.0.0.1]:Port

	// ConfigFile is a client ssh_config with "Host e2e" pointing at this
	// server, for OpenSSH's tools (ssh -F ConfigFile e2e) and hpncp.
	ConfigFile string

	// LogFile receives sshd's log (LogLevel VERBOSE); the test prints it
	// when it fails.
	LogFile string

	PID int

	cmd      *exec.Cmd
	exited   chan struct{}
	stopOnce sync.Once
	tb       testing.TB
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return net.JoinHostPort(s.Host, strconv.Itoa(s.Port)) }

// ClientConfig logs in as User with the client key, checking the
// server's host key against KnownHostsFile.
func (s *Server) ClientConfig(t testing.TB) *ssh.ClientConfig {
	t.Helper()
	pem, err := os.ReadFile(s.ClientKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.ParsePrivateKey(pem)
	if err != nil {
		t.Fatal(err)
	}
	hostKeys, err := knownhosts.New(s.KnownHostsFile)
	if err != nil {
		t.Fatal(err)
	}
	return &ssh.ClientConfig{
		User:            s.User,
		Auth:            []ssh.AuthMethod{ssh.PublicKeys(signer)},
		HostKeyCallback: hostKeys,
	}
}

// Required reports whether end-to-end tests must not be skipped, which is
// when HPNCP_E2E=require.
func Required() bool {
	return os.Getenv("HPNCP_E2E") == "require"
}

// LookTool returns the path of an external program an end-to-end test
// needs (ssh, scp, rsync…). If it is missing the test is skipped, or fails
// when Required.
func LookTool(t testing.TB, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		skipOrFail(t, fmt.Sprintf("%s not found: %v", name, err))
	}
	return path
}

func skipOrFail(t testing.TB, reason string) {
	t.Helper()
	if Required() {
		t.Fatalf("sshdtest: %s (HPNCP_E2E=require: end-to-end tests must run; run scripts/ensure-deps.sh)", reason)
		return
	}
	t.Skipf("%s %s (set HPNCP_E2E=require to make this a failure)", SkipMarker, reason)
}

// startAttempts bounds retries when another process takes the chosen port
// between choosing it and sshd binding it.
const startAttempts = 5

// Start starts sshd on a free port of 127.0.0.1 and registers Stop with
// t.Cleanup; if the test fails, sshd's log is printed. Without sshd the test
// is skipped, or fails when Required. Under go test -short it is skipped
// too, as slow (testenv.SkipSlow), not as missed end-to-end coverage.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	testenv.SkipSlow(t)
	sshd := findSSHD(t)
	if os.Geteuid() == 0 {
		// sshd running as root refuses to start without its privilege
		// separation directory, which a fresh container lacks.
		if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
			t.Fatalf("sshdtest: create privilege separation directory: %v", err)
		}
	}
	s := &Server{
		Host: "127.0.0.1",
		User: currentUser(t),
		Dir:  t.TempDir(),
		tb:   t,
	}
	s.LogFile = filepath.Join(s.Dir, "sshd.log")
	hostKey := filepath.Join(s.Dir, "ssh_host_ed25519_key")
	hostPub := generateKey(t, hostKey, "sshdtest host")
	s.ClientKeyFile = filepath.Join(s.Dir, "id_ed25519")
	clientPub := generateKey(t, s.ClientKeyFile, "sshdtest client")
	authorizedKeys := filepath.Join(s.Dir, "authorized_keys")
	authorizedMode := os.FileMode(0o600)
	if o.Unprivileged != "" {
		// sshd reads authorized keys as the user logging in.
		authorizedMode = 0o644
		openToAll(t, s.Dir)
	}
	writeFile(t, authorizedKeys, string(ssh.MarshalAuthorizedKey(clientPub)), authorizedMode)

	t.Cleanup(func() {
		if t.Failed() {
			s.printLog()
		}
	})
	for attempt := 1; ; attempt++ {
		port := freePort(t)
		config := s.writeServerConfig(t, sshd, port, hostKey, authorizedKeys, o.ExtraConfig)
		err := s.launch(sshd, config, port)
		if err == nil {
			s.Port = port
			break
		}
		if !errors.Is(err, errPortTaken) || attempt == startAttempts {
			t.Fatalf("sshdtest: start %s: %v (its log follows)", sshd, err)
		}
	}
	t.Cleanup(s.Stop)

	s.KnownHostsFile = filepath.Join(s.Dir, "known_hosts")
	writeFile(t, s.KnownHostsFile,
		fmt.Sprintf("[%s]:%d %s", s.Host, s.Port, ssh.MarshalAuthorizedKey(hostPub)), 0o644)
	s.ConfigFile = filepath.Join(s.Dir, "ssh_config")
	writeFile(t, s.ConfigFile, strings.Join([]string{
		"Host e2e",
		"\tHostName " + s.Host,
		"\tPort " + strconv.Itoa(s.Port),
		"\tUser " + configValue(t, s.User),
		"\tIdentityFile " + configValue(t, s.ClientKeyFile),
		"\tIdentitiesOnly yes",
		"\tUserKnownHostsFile " + configValue(t, s.KnownHostsFile),
		"\tGlobalKnownHostsFile /dev/null",
		"\tStrictHostKeyChecking yes",
		"\tBatchMode yes",
		"\tLogLevel ERROR",
		"",
	}, "\n"), 0o644)
	if o.Unprivileged != "" {
		f, err := os.OpenFile(s.ConfigFile, os.O_APPEND|os.O_WRONLY, 0)
		if err == nil {
			_, err = fmt.Fprintf(f, "Host e2e-unprivileged\n\tUser %s\n\tHostName %s\n\tPort %d\n\tIdentityFile %s\n"+
				"\tIdentitiesOnly yes\n\tUserKnownHostsFile %s\n\tGlobalKnownHostsFile /dev/null\n"+
				"\tStrictHostKeyChecking yes\n\tBatchMode yes\n\tLogLevel ERROR\n",
				configValue(t, o.Unprivileged), s.Host, s.Port, configValue(t, s.ClientKeyFile),
				configValue(t, s.KnownHostsFile))
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			t.Fatalf("sshdtest: write %s: %v", s.ConfigFile, err)
		}
	}
	return s
}

// openToAll makes dir and the temporary directories above it searchable
// by every user, so that another account can reach files below dir.
func openToAll(t testing.TB, dir string) {
	t.Helper()
	tmp := filepath.Clean(os.TempDir())
	for d := filepath.Clean(dir); strings.HasPrefix(d, tmp+string(filepath.Separator)); d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatalf("sshdtest: open %s to other users: %v", d, err)
		}
	}
}

// Stop stops sshd: SIGTERM, then SIGKILL if it has not exited within five
// seconds. Connections already accepted are served by sshd's per-connection
// processes until their clients close them. Stop may be called more than
// once.
func (s *Server) Stop() {
	s.stopOnce.Do(func() {
		if s.cmd == nil {
			return
		}
		if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
			s.tb.Errorf("sshdtest: stop sshd (pid %d): %v", s.PID, err)
		}
		select {
		case <-s.exited:
		case <-time.After(5 * time.Second):
			s.tb.Errorf("sshdtest: sshd (pid %d) ignored SIGTERM for 5s; killing it", s.PID)
			s.cmd.Process.Kill()
			<-s.exited
		}
	})
}

var errPortTaken = errors.New("port already in use")

// launch starts sshd in the foreground (-D) so that the process we wait for
// is the listener itself, and returns once it answers with an SSH banner.
func (s *Server) launch(sshd, config string, port int) error {
	logf, err := os.Create(s.LogFile)
	if err != nil {
		return fmt.Errorf("create log: %w", err)
	}
	defer logf.Close()
	// The log is a file, not a pipe, so that Wait does not also wait for
	// per-connection sshd processes that inherit it.
	cmd := exec.Command(sshd, "-D", "-e", "-f", config)
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()

	if err := waitReady(net.JoinHostPort(s.Host, strconv.Itoa(port)), exited); err != nil {
		if !errors.Is(err, errExited) {
			cmd.Process.Kill()
		}
		<-exited
		if errors.Is(err, errExited) && strings.Contains(s.readLog(), "Address already in use") {
			return errPortTaken
		}
		return err
	}
	s.cmd = cmd
	s.PID = cmd.Process.Pid
	s.exited = exited
	return nil
}

var errExited = errors.New("sshd exited during start-up")

// waitReady waits until addr answers with an SSH banner, sshd exits, or 15
// seconds pass.
func waitReady(addr string, exited <-chan struct{}) error {
	deadline := time.Now().Add(15 * time.Second)
	for {
		select {
		case <-exited:
			return errExited
		default:
		}
		if banner, err := readBanner(addr); err == nil && strings.HasPrefix(banner, "SSH-2.0-") {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no SSH banner on %s after 15s", addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func readBanner(addr string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	// Sending our own identification lets sshd log a plain disconnect
	// rather than a protocol error.
	if _, err := c.Write([]byte("SSH-2.0-sshdtest_probe\r\n")); err != nil {
		return "", err
	}
	return bufio.NewReader(c).ReadString('\n')
}

// writeServerConfig writes sshd_config and returns its path. Keywords newer
// than the installed sshd are dropped after checking with sshd -t.
func (s *Server) writeServerConfig(t testing.TB, sshd string, port int, hostKey, authorizedKeys string, extra []string) string {
	t.Helper()
	var head, tail []string // extra lines before our defaults, and from Match on
	set := map[string]bool{}
	for i, line := range extra {
		kw := strings.ToLower(firstWord(line))
		if kw == "match" {
			tail = extra[i:]
			break
		}
		head = append(head, line)
		if kw != "" && !strings.HasPrefix(kw, "#") {
			set[kw] = true
		}
	}
	defaults := [][2]string{
		{"PidFile", configValue(t, filepath.Join(s.Dir, "sshd.pid"))},
		{"AuthorizedKeysFile", configValue(t, authorizedKeys)},
		{"StrictModes", "no"},
		{"PermitRootLogin", "prohibit-password"},
		{"PubkeyAuthentication", "yes"},
		{"PasswordAuthentication", "no"},
		{"KbdInteractiveAuthentication", "no"},
		{"UsePAM", "no"},
		{"Subsystem", "sftp internal-sftp"},
		{"MaxStartups", "100:30:200"},
		{"MaxSessions", "64"},
		{"LogLevel", "VERBOSE"},
		{"UseDNS", "no"},
		// OpenSSH 9.8 and later penalise sources whose connections fail
		// to authenticate; tests of failures must not lock out the next
		// test. Older sshd rejects the keyword and it is dropped.
		{"PerSourcePenaltyExemptList", "127.0.0.1,::1"},
		// bash run by sshd reads the account's ~/.bashrc even for a
		// command, unless it is a nested shell (SHLVL set): the tests
		// must not depend on what the account's start-up files do, nor
		// pay for it in every command session (root's here runs pyenv
		// init: a second of CPU each, several under load, when a test
		// runs hundreds of commands: tar, scp -t, find, sha256sum,
		// rsync --server). Before 7.8 sshd has no SetEnv; it is dropped.
		{"SetEnv", "SHLVL=1"},
	}
	path := filepath.Join(s.Dir, "sshd_config")
	var optional []string
	for {
		lines := []string{
			"ListenAddress " + s.Host,
			"Port " + strconv.Itoa(port),
			"HostKey " + configValue(t, hostKey),
		}
		lines = append(lines, head...)
		for _, d := range defaults {
			if !set[strings.ToLower(d[0])] && !slices.Contains(optional, d[0]) {
				lines = append(lines, d[0]+" "+d[1])
			}
		}
		lines = append(lines, tail...)
		writeFile(t, path, strings.Join(lines, "\n")+"\n", 0o600)
		out, err := exec.Command(sshd, "-t", "-f", path).CombinedOutput()
		if err == nil {
			return path
		}
		if kw, ok := newerKeyword(out, optional); ok {
			optional = append(optional, kw)
			continue
		}
		t.Fatalf("sshdtest: %s -t -f %s: %v\n%s", sshd, path, err, out)
	}
}

// newerKeyword returns the keyword of the defaults that sshd -t's output
// out rejects, when it is one an older sshd lacks and not yet dropped.
func newerKeyword(out []byte, dropped []string) (string, bool) {
	for _, kw := range []string{"PerSourcePenaltyExemptList", "SetEnv"} {
		if bytes.Contains(out, []byte(kw)) && !slices.Contains(dropped, kw) {
			return kw, true
		}
	}
	return "", false
}

func (s *Server) readLog() string {
	b, err := os.ReadFile(s.LogFile)
	if err != nil {
		return fmt.Sprintf("(no sshd log: %v)", err)
	}
	return string(b)
}

func (s *Server) printLog() {
	s.tb.Logf("sshd log %s:\n%s", s.LogFile, s.readLog())
}

func findSSHD(t testing.TB) string {
	t.Helper()
	path := "/usr/sbin/sshd"
	if _, err := os.Stat(path); err != nil {
		p, err := exec.LookPath("sshd")
		if err != nil {
			skipOrFail(t, "sshd not found in /usr/sbin or $PATH")
		}
		path = p
	}
	// sshd re-executes itself and insists on an absolute path for it.
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatalf("sshdtest: absolute path of %s: %v", path, err)
	}
	return abs
}

// freePort returns a port that was free a moment ago; launch retries if
// it is taken before sshd binds it.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("sshdtest: find a free port: %v", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// generateKey writes an unencrypted ed25519 key pair to path and path.pub
// and returns the public key. It uses ssh-keygen where installed, so that
// the files are exactly what users have, and Go otherwise.
func generateKey(t testing.TB, path, comment string) ssh.PublicKey {
	t.Helper()
	if keygen, err := exec.LookPath("ssh-keygen"); err == nil {
		out, err := exec.Command(keygen, "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", path).CombinedOutput()
		if err != nil {
			t.Fatalf("sshdtest: ssh-keygen %s: %v\n%s", path, err, out)
		}
	} else {
		_, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatalf("sshdtest: generate key: %v", err)
		}
		block, err := ssh.MarshalPrivateKey(priv, comment)
		if err != nil {
			t.Fatalf("sshdtest: encode key %s: %v", path, err)
		}
		signer, err := ssh.NewSignerFromKey(priv)
		if err != nil {
			t.Fatalf("sshdtest: key %s: %v", path, err)
		}
		writeFile(t, path, string(pem.EncodeToMemory(block)), 0o600)
		writeFile(t, path+".pub", string(ssh.MarshalAuthorizedKey(signer.PublicKey())), 0o644)
	}
	b, err := os.ReadFile(path + ".pub")
	if err != nil {
		t.Fatalf("sshdtest: read public key: %v", err)
	}
	pub, _, _, _, err := ssh.ParseAuthorizedKey(b)
	if err != nil {
		t.Fatalf("sshdtest: parse %s.pub: %v", path, err)
	}
	return pub
}

func writeFile(t testing.TB, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatalf("sshdtest: write %s: %v", path, err)
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
	t.Fatal("sshdtest: cannot tell the current user name (user.Current failed and $USER is empty)")
	return ""
}

// configValue quotes v for an ssh_config or sshd_config line when it holds
// characters that would split or end the argument, such as a space in
// $TMPDIR.
func configValue(t testing.TB, v string) string {
	t.Helper()
	if strings.ContainsAny(v, "\"\\\n") {
		t.Fatalf("sshdtest: %q cannot be written to an OpenSSH config file", v)
	}
	if strings.ContainsAny(v, " \t#'") {
		return `"` + v + `"`
	}
	return v
}

func firstWord(line string) string {
	f := strings.Fields(line)
	if len(f) == 0 {
		return ""
	}
	// sshd_config also accepts "Keyword=value".
	kw, _, _ := strings.Cut(f[0], "=")
	return kw
}
