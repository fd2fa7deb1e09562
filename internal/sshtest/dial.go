package sshtest

import (
	"os"
	"testing"

	"golang.org/x/crypto/ssh"
)

// Dial connects to the server as a client would, with ClientKeyFile and
// the server's own host key, and closes the connection when the test ends.
func (s *Server) Dial(t testing.TB) *ssh.Client {
	t.Helper()
	key, err := os.ReadFile(s.ClientKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.ParsePrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := ssh.Dial("tcp", s.Addr, &ssh.ClientConfig{
		User:            "test",
		Auth:            []ssh.AuthMethod{ssh.PublicKeys(signer)},
		HostKeyCallback: ssh.FixedHostKey(s.HostKey.PublicKey()),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
