package protocol

import (
	"errors"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
)

// Starting an SFTP end costs round trips before the first byte: a session
// for the limits question (channel, subsystem, INIT, the question) and
// pkg/sftp's main session (channel, subsystem, INIT). Both are set up at
// once, pkg/sftp's with the packet size every server takes, raised to
// the size the server states once the answer is in and before the client
// is used. The limits session is kept for the first stream rather than
// closed. At 50 ms of RTT, start-up falls from seven round trips and a
// close to four, and the first stream needs none.

// started is an SFTP end's sessions, ready to use.
type started struct {
	c      *sftp.Client
	limits Limits
	spare  ssh.Channel            // the limits session, for the pool; nil when closed
	early  map[earlyKey]earlyStat // the answers to the early stats
	// made is what the spare's requests for Options.PreCreate made.
	made startMade
}

// startSFTP opens the limits session and pkg/sftp's main session on conn
// at once, the limits session with the stats of names behind its
// question; opts gives pkg/sftp's options for a packet size.
func startSFTP(conn *ssh.Client, opts func(packet int) []sftp.ClientOption, names []string, f startFiles) (*started, error) {
	type answer struct {
		ch    ssh.Channel
		lim   Limits
		early map[earlyKey]earlyStat
		made  startMade
		err   error
	}
	asked := make(chan answer, 1)
	go func() {
		ch, lim, early, made, err := limitsSession(conn, names, f)
		asked <- answer{ch, lim, early, made, err}
	}()
	c, err := sftp.NewClient(conn, opts(SafePacket)...)
	a := <-asked
	// giveUp closes the limits session, removing what it made first.
	giveUp := func() {
		if a.ch != nil {
			dropMade(a.ch, a.made, f)
			_ = a.ch.Close()
		}
	}
	var oce *ssh.OpenChannelError
	if errors.As(err, &oce) || errors.As(a.err, &oce) {
		// A server that takes one session at a time (MaxSessions 1)
		// refuses the second: ask first, then start, one after the other.
		giveUp()
		if c != nil {
			_ = c.Close()
		}
		return startInTurn(conn, opts)
	}
	if a.err != nil {
		if c != nil {
			_ = c.Close()
		}
		return nil, a.err
	}
	if err != nil {
		giveUp()
		return nil, err
	}
	// Nothing uses the client yet: it may now take the size the server
	// states, so that mid-sized files and --hpn-disabled, which write
	// through it, do not go in 32 KiB requests.
	for _, opt := range opts(a.lim.Packet()) {
		if err := opt(c); err != nil {
			giveUp()
			_ = c.Close()
			return nil, err
		}
	}
	return &started{c: c, limits: a.lim, spare: a.ch, early: a.early, made: a.made}, nil
}

// startInTurn asks for the limits on a session it closes, then starts
// pkg/sftp's session: never more than one session open at a time.
func startInTurn(conn *ssh.Client, opts func(packet int) []sftp.ClientOption) (*started, error) {
	lim, err := QueryLimits(conn)
	if err != nil {
		return nil, err
	}
	c, err := sftp.NewClient(conn, opts(lim.Packet())...)
	if err != nil {
		return nil, err
	}
	return &started{c: c, limits: lim}, nil
}
