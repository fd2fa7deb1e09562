package bench

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// TestDemoServer connects to the demo as its ssh_config says (key, known
// host, relay address) and moves a file both ways over SFTP.
func TestDemoServer(t *testing.T) {
	const rtt = 20 * time.Millisecond
	d, err := StartDemo(rtt, 0)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile(d.ConfigFile)
	if err != nil {
		t.Fatal(err)
	}
	settings := map[string]string{}
	for _, line := range strings.Split(string(cfg), "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), " "); ok {
			settings[k] = v
		}
	}
	if settings["Host"] != DemoHost {
		t.Fatalf("ssh_config has Host %q, want %q", settings["Host"], DemoHost)
	}
	keyPEM, err := os.ReadFile(settings["IdentityFile"])
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.ParsePrivateKey(keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	hostKeys, err := knownhosts.New(settings["UserKnownHostsFile"])
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort(settings["HostName"], settings["Port"])
	if addr != d.Relay.Addr {
		t.Fatalf("ssh_config points at %s, not the relay %s", addr, d.Relay.Addr)
	}
	start := time.Now()
	c, err := ssh.Dial("tcp", addr, &ssh.ClientConfig{User: "demo", Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)}, HostKeyCallback: hostKeys})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The key exchange alone takes round trips through the relay.
	if took := time.Since(start); took < 2*rtt {
		t.Errorf("connecting through a %v relay took %v", rtt, took)
	}
	sc, err := sftp.NewClient(c)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	data := bytes.Repeat([]byte("hpncp demo "), 100000)
	f, err := sc.Create("x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(d.Root, "x"))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("server's copy: %d bytes, %v; want %d bytes", len(got), err, len(data))
	}
	if _, err := c.NewSession(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Dial("tcp", "127.0.0.1:22"); err == nil {
		t.Error("the demo server forwarded a TCP connection")
	}
	dir := d.dir
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("demo files left in %s: %v", dir, err)
	}
}
