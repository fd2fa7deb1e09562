//go:build unix

package helper

import (
	"net"
	"path/filepath"
	"testing"
)

// The push's helper hears each other share once: a report repeated, of
// share 0 or past the count, or not a report, does not count, and all is
// closed once shares 1 to n-1 have each said so.
func TestShareReports(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	tmp := filepath.Join(t.TempDir(), ".f.tmp")
	all, stop := listenShares(tmp, 3)
	defer stop()
	if all == nil {
		t.Fatal("no socket to hear the shares on")
	}
	path, err := reportPath(tmp)
	if err != nil {
		t.Fatal(err)
	}
	send := func(p []byte) {
		c, err := net.Dial("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		c.Write(p)
		c.Close()
	}
	reportShare(tmp, 1)
	reportShare(tmp, 1)
	reportShare(tmp, 0)
	send([]byte{statusOK, 3})
	send([]byte{statusFail, 2})
	send([]byte{statusOK})
	// Share 2 has said nothing: whatever of the above is heard by now,
	// not every share is.
	select {
	case <-all:
		t.Fatal("all shares heard with share 2 silent")
	default:
	}
	reportShare(tmp, 2)
	<-all
	// Another push's new file is another socket.
	reportShare(tmp+"x", 1)
}
