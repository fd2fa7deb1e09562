package bench

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/subtle"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"

	"github.com/hpncp/hpncp/internal/units"
)

// DemoHost is the ssh_config host name of the embedded demo's server.
const DemoHost = "hpncp-demo"

// Demo is the zero-setup demonstration: an in-process SSH server with an
// SFTP subsystem on 127.0.0.1, reached through a Relay that emulates a
// long path. Its ssh_config names it DemoHost, with generated keys and a
// known_hosts file, so a client connects to it as it would to any host.
type Demo struct {
	// ConfigFile is an ssh_config (for -F) with a Host DemoHost entry.
	ConfigFile string
	// Root is the server's working directory: relative paths land here.
	Root string
	// Relay is the emulated path in front of the server.
	Relay *Relay

	dir    string
	ln     net.Listener
	config *ssh.ServerConfig
	wg     sync.WaitGroup

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
}

// demoMaxPacket is what OpenSSH's sftp-server returns at most for one read
// request and announces as its read and write limits; the demo's server
// does the same so that it behaves like sshd.
const demoMaxPacket = 256*1024 - 1024

// StartDemo starts the demo's server and relay. rtt and bitsPerSec describe
// the emulated path (0 for no delay or no rate limit). Close removes the
// keys and files it made.
func StartDemo(rtt time.Duration, bitsPerSec float64) (*Demo, error) {
	dir, err := os.MkdirTemp("", "hpncp-demo-")
	if err != nil {
		return nil, fmt.Errorf("demo: temporary directory: %w", err)
	}
	d := &Demo{dir: dir, Root: filepath.Join(dir, "home"), conns: map[net.Conn]struct{}{}}
	if err := d.setup(rtt, bitsPerSec); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

func (d *Demo) setup(rtt time.Duration, bitsPerSec float64) error {
	if err := os.Mkdir(d.Root, 0o700); err != nil {
		return fmt.Errorf("demo: create %s: %w", d.Root, err)
	}
	_, hostPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return fmt.Errorf("demo: generate host key: %w", err)
	}
	hostKey, err := ssh.NewSignerFromKey(hostPriv)
	if err != nil {
		return fmt.Errorf("demo: host key: %w", err)
	}
	clientPub, clientPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return fmt.Errorf("demo: generate client key: %w", err)
	}
	clientKey, err := ssh.NewPublicKey(clientPub)
	if err != nil {
		return fmt.Errorf("demo: client key: %w", err)
	}
	block, err := ssh.MarshalPrivateKey(clientPriv, "hpncp demo client")
	if err != nil {
		return fmt.Errorf("demo: encode client key: %w", err)
	}
	keyFile := filepath.Join(d.dir, "id_ed25519")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(block), 0o600); err != nil {
		return fmt.Errorf("demo: write %s: %w", keyFile, err)
	}

	d.config = &ssh.ServerConfig{
		ServerVersion: "SSH-2.0-hpncp_demo",
		PublicKeyCallback: func(_ ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			if subtle.ConstantTimeCompare(key.Marshal(), clientKey.Marshal()) == 1 {
				return nil, nil
			}
			return nil, errors.New("public key not authorized")
		},
	}
	d.config.AddHostKey(hostKey)
	d.ln, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("demo: listen on 127.0.0.1: %w", err)
	}
	d.wg.Add(1)
	go d.accept()

	d.Relay, err = startRelay(d.ln.Addr().String(), rtt, bitsPerSec)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	host, port, err := net.SplitHostPort(d.Relay.Addr)
	if err != nil {
		return fmt.Errorf("demo: relay address %s: %w", d.Relay.Addr, err)
	}
	knownHosts := filepath.Join(d.dir, "known_hosts")
	line := fmt.Sprintf("[%s]:%s %s", host, port, ssh.MarshalAuthorizedKey(hostKey.PublicKey()))
	if err := os.WriteFile(knownHosts, []byte(line), 0o600); err != nil {
		return fmt.Errorf("demo: write %s: %w", knownHosts, err)
	}
	for _, p := range []string{keyFile, knownHosts} {
		if strings.ContainsAny(p, " \t\"'#\\") {
			return fmt.Errorf("demo: temporary path %q cannot go into ssh_config; set TMPDIR to a plain path", p)
		}
	}
	d.ConfigFile = filepath.Join(d.dir, "ssh_config")
	cfg := strings.Join([]string{
		"Host " + DemoHost,
		"\tHostName " + host,
		"\tPort " + port,
		"\tUser demo",
		"\tIdentityFile " + keyFile,
		"\tIdentitiesOnly yes",
		"\tIdentityAgent none",
		"\tUserKnownHostsFile " + knownHosts,
		"\tGlobalKnownHostsFile /dev/null",
		"\tStrictHostKeyChecking yes",
		"\tBatchMode yes",
		"",
	}, "\n")
	if err := os.WriteFile(d.ConfigFile, []byte(cfg), 0o600); err != nil {
		return fmt.Errorf("demo: write %s: %w", d.ConfigFile, err)
	}
	return nil
}

// Close stops the relay and the server and removes the demo's files.
func (d *Demo) Close() error {
	if d.Relay != nil {
		d.Relay.Close()
	}
	d.mu.Lock()
	d.closed = true
	for c := range d.conns {
		c.Close()
	}
	d.mu.Unlock()
	if d.ln != nil {
		d.ln.Close()
	}
	d.wg.Wait()
	return os.RemoveAll(d.dir)
}

func (d *Demo) accept() {
	defer d.wg.Done()
	for {
		nc, err := d.ln.Accept()
		if err != nil {
			return
		}
		d.mu.Lock()
		if d.closed {
			d.mu.Unlock()
			nc.Close()
			return
		}
		d.conns[nc] = struct{}{}
		d.mu.Unlock()
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			d.serve(nc)
			d.mu.Lock()
			delete(d.conns, nc)
			d.mu.Unlock()
			nc.Close()
		}()
	}
}

// serve runs one SSH connection: session channels with the sftp subsystem,
// nothing else.
func (d *Demo) serve(nc net.Conn) {
	sc, chans, reqs, err := ssh.NewServerConn(nc, d.config)
	if err != nil {
		return
	}
	defer sc.Close()
	go ssh.DiscardRequests(reqs)
	var sessions sync.WaitGroup
	defer sessions.Wait()
	for nch := range chans {
		if nch.ChannelType() != "session" {
			_ = nch.Reject(ssh.UnknownChannelType, "only session channels")
			continue
		}
		ch, creqs, err := nch.Accept()
		if err != nil {
			continue
		}
		sessions.Add(1)
		go func() {
			defer sessions.Done()
			d.session(ch, creqs)
		}()
	}
}

func (d *Demo) session(ch ssh.Channel, reqs <-chan *ssh.Request) {
	defer ch.Close()
	started := false
	for req := range reqs {
		var p struct{ Name string }
		ok := !started && req.Type == "subsystem" && ssh.Unmarshal(req.Payload, &p) == nil && p.Name == "sftp"
		if req.WantReply {
			_ = req.Reply(ok, nil)
		}
		if !ok {
			continue
		}
		started = true
		go func() {
			// The SFTP session ends with the channel; draining the
			// remaining requests below lets the channel close cleanly.
			defer ch.Close()
			srv, err := sftp.NewServer(newLimitsFilter(ch), sftp.WithServerWorkingDirectory(d.Root), sftp.WithMaxTxPacket(demoMaxPacket))
			if err != nil {
				return
			}
			_ = srv.Serve()
			_, _ = ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{0}))
		}()
	}
}

// ParseRate reads hpncp bench's --rate, a link rate in bits per second
// such as 1gbit, 100mbit, 500kbit or 1e9, as units.ParseBitRate reads it;
// "0" means unlimited. --rate has always read "mbps" and the like as
// megabits per second, as network people write them, so those are kept
// here although units refuses tc's ambiguous "bps".
func ParseRate(s string) (float64, error) {
	v := strings.TrimSuffix(strings.ToLower(strings.TrimSpace(s)), "/s")
	if strings.HasSuffix(v, "bps") {
		v = strings.TrimSuffix(v, "ps") + "it"
	}
	bits, err := units.ParseBitRate(v)
	if err != nil {
		return 0, fmt.Errorf("rate %q: want bits per second such as 1gbit, 100mbit or 0 for unlimited", s)
	}
	return float64(bits), nil
}
