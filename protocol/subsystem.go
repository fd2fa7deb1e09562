package protocol

import (
	"fmt"

	"golang.org/x/crypto/ssh"
)

// HasSFTP asks the server whether it offers the sftp subsystem, so that a
// server without one can be told from a failure to start it.
func HasSFTP(client *ssh.Client) (bool, error) {
	ch, reqs, err := client.OpenChannel("session", nil)
	if err != nil {
		return false, fmt.Errorf("open session channel: %w", err)
	}
	go ssh.DiscardRequests(reqs)
	defer ch.Close()
	ok, err := ch.SendRequest("subsystem", true, ssh.Marshal(struct{ Name string }{"sftp"}))
	if err != nil {
		return false, fmt.Errorf("request sftp subsystem: %w", err)
	}
	return ok, nil
}
