//go:build unix

package helper

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net"
	"path/filepath"
	"time"
)

// A push in shares is finished by the helper that made its new file once
// the client's verdict says every other share was applied. At 100 ms
// that verdict is a round trip after the last share was: its helper's
// status goes to the client and the verdict comes back. The helpers of
// the other shares also say so themselves, on this host, over a socket
// in the user's run directory named after the new file (whose name the
// client made unique): the push's helper finishes as soon as every other
// share has said it applied and checked its ranges, and reads the
// verdict after its answer. A share that said nothing (a helper of an
// earlier version, no run directory, a share that failed) leaves it to
// the verdict, as before.

// reportPath is the socket the helper that made tmp listens on for the
// other shares' reports.
func reportPath(tmp string) (string, error) {
	dir, err := runDir()
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(tmp))
	return filepath.Join(dir, "push-"+hex.EncodeToString(sum[:12])+".sock"), nil
}

// listenShares listens for the reports of shares 1 to n-1 of a push
// into tmp: all is closed once each has said it is applied. stop ends
// the listening.
func listenShares(tmp string, n int) (all <-chan struct{}, stop func()) {
	path, err := reportPath(tmp)
	if err != nil {
		return nil, func() {}
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, func() {}
	}
	ln.SetUnlinkOnClose(true)
	done := make(chan struct{})
	go func() {
		seen := map[int]bool{}
		for {
			uc, err := ln.AcceptUnix()
			if err != nil {
				return
			}
			i, ok := readReport(uc)
			uc.Close()
			if ok && i >= 1 && i < n && !seen[i] {
				if seen[i] = true; len(seen) == n-1 {
					close(done)
				}
			}
		}
	}()
	return done, func() { ln.Close() }
}

// readReport reads a share's report from uc, a process of this user's.
func readReport(uc *net.UnixConn) (share int, ok bool) {
	if ours, err := thisUsers(uc); err != nil || !ours {
		return 0, false
	}
	uc.SetReadDeadline(time.Now().Add(10 * time.Second))
	var b [2]byte
	if _, err := io.ReadFull(uc, b[:]); err != nil || b[0] != statusOK {
		return 0, false
	}
	return int(b[1]), true
}

// reportShare tells the helper that made tmp that share i of its push is
// applied and checked; nothing where it does not listen.
func reportShare(tmp string, i int) {
	path, err := reportPath(tmp)
	if err != nil || i < 1 || i > 255 {
		return
	}
	c, err := net.DialTimeout("unix", path, time.Second)
	if err != nil {
		return
	}
	defer c.Close()
	c.SetWriteDeadline(time.Now().Add(time.Second))
	c.Write([]byte{statusOK, byte(i)})
}
