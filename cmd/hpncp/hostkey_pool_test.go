package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/hpncp/hpncp/internal/sshtest"
)

// splitProxy listens on 127.0.0.1 and relays its first connection to
// first and every later one to rest: a host whose later connections a man
// in the middle answers. It returns the port.
func splitProxy(t *testing.T, first, rest string) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for n := 0; ; n++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			to := rest
			if n == 0 {
				to = first
			}
			go func() {
				defer c.Close()
				s, err := net.Dial("tcp", to)
				if err != nil {
					return
				}
				defer s.Close()
				go func() {
					io.Copy(s, c)
					s.(*net.TCPConn).CloseWrite()
				}()
				io.Copy(c, s)
			}()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestPoolRefusesSecondHostKey: a copy over several connections to a host
// not yet in known_hosts, whose connections after the first are answered
// by another server (another host key), learns only the first's key,
// refuses the others with one warning naming their key, and copies the
// file over the connection it trusts.
func TestPoolRefusesSecondHostKey(t *testing.T) {
	for _, strict := range []string{"accept-new", "no"} {
		t.Run(strict, func(t *testing.T) {
			srv := sshtest.Start(t, sshtest.Options{})
			mitm := sshtest.Start(t, sshtest.Options{})
			port := splitProxy(t, srv.Addr, mitm.Addr)
			work := t.TempDir()
			known := filepath.Join(work, "known_hosts")
			cfg, err := os.ReadFile(srv.ConfigFile)
			if err != nil {
				t.Fatal(err)
			}
			config := strings.NewReplacer(
				fmt.Sprintf("Port %d", srv.Port), fmt.Sprintf("Port %d", port),
				srv.KnownHostsFile, known,
				"StrictHostKeyChecking yes", "StrictHostKeyChecking "+strict,
			).Replace(string(cfg))
			configFile := filepath.Join(work, "ssh_config")
			if err := os.WriteFile(configFile, []byte(config), 0o600); err != nil {
				t.Fatal(err)
			}
			src, dst := filepath.Join(work, "big"), filepath.Join(work, "copy")
			if err := writeNoise(src, 16<<20); err != nil {
				t.Fatal(err)
			}

			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			var stderr lockedBuffer
			err = run(ctx, []string{"hpncp", "-F", configFile, "--streams", "4", "--connections", "4",
				src, "testhost:" + dst}, nil, io.Discard, &stderr)
			if mitm.Connections() == 0 {
				t.Fatalf("the copy opened one connection; nothing was tested (err %v)\n%s", err, stderr.String())
			}
			if err != nil {
				t.Fatalf("copy: %v\n%s", err, stderr.String())
			}
			if want, got := mustRead(t, src), mustRead(t, dst); !bytes.Equal(got, want) {
				t.Error("the copy differs from the source")
			}
			for _, s := range []string{"HOST KEY DIFFERS BETWEEN CONNECTIONS", ssh.FingerprintSHA256(mitm.HostKey.PublicKey())} {
				if !strings.Contains(stderr.String(), s) {
					t.Errorf("stderr lacks %q:\n%s", s, stderr.String())
				}
			}
			if n := strings.Count(stderr.String(), "HOST KEY DIFFERS"); n != 1 {
				t.Errorf("warned %d times, want once for the one key", n)
			}
			wantKnown := fmt.Sprintf("[127.0.0.1]:%d %s", port, ssh.MarshalAuthorizedKey(srv.HostKey.PublicKey()))
			if got := string(mustRead(t, known)); got != wantKnown {
				t.Errorf("known_hosts = %q, want only the first connection's key %q", got, wantKnown)
			}
		})
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
