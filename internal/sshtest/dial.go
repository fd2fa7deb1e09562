package sshtest

import (
	"os"
	"testing"

	"golang.org/x/crypto/ssh"
)

// ClientConfig is how a client logs in: with ClientKeyFile, checking the
// server's own host key.
func (s *Server) ClientConfig(t testing.TB) *ssh.ClientConfig {
	t.Helper()
	key, err := os.ReadFile(s.ClientKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.ParsePrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return &ssh.ClientConfig{
		User:            "test",
		Auth:            []ssh.AuthMethod{ssh.PublicKeys(signer)},
		HostKeyCallback: ssh.FixedHostKey(s.HostKey.PublicKey()),
	}
}

// Dial connects to the server as a client would (ClientConfig) and closes
// the connection when the test ends.
func (s *Server) Dial(t testing.TB) *ssh.Client {
	t.Helper()
	c, err := ssh.Dial("tcp", s.Addr, s.ClientConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
