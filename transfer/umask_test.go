package transfer

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"strings"
	"testing"

	"github.com/hpncp/hpncp/protocol"
)

// lostReplyFS is a local end whose Mkdir makes the directory and then
// fails, as a remote end's does when the connection under its session is
// lost after the server made it and the repeat on a new connection finds
// it there; prober, when set, is its Umask, which fails likewise.
type lostReplyFS struct {
	Local
	prober bool
}

var errLostThenExists = errors.New("mkdir: the reply was lost, and the repeat found the directory")

func (f lostReplyFS) Mkdir(name string) error {
	if err := os.Mkdir(name, 0o777); err != nil {
		return err
	}
	return errLostThenExists
}

// Umask makes the probe and fails with a lost session, or with another
// error once the directory is made.
func (f lostReplyFS) Umask(ctx context.Context, probe string) (fs.FileMode, error) {
	if !f.prober {
		return 0, protocol.ErrNoBatch
	}
	if err := os.Mkdir(probe, 0o777); err != nil {
		return 0, err
	}
	return 0, errors.New("stat: the server's reply did not parse")
}

// TestUmaskProbeLeavesNothing: whatever error learning the umask ends
// with, the probe's directory, which bears a name of this run's own, is
// not left behind (fault seed 8003: a run that exited 0 left
// .hpncp.umask.*.part after its first connection was cut in set-up).
func TestUmaskProbeLeavesNothing(t *testing.T) {
	for _, prober := range []bool{false, true} {
		dir := t.TempDir()
		_, err := probeUmask(context.Background(), lostReplyFS{prober: prober}, dir)
		if err == nil {
			t.Fatalf("prober %v: the probe succeeded although its end failed it", prober)
		}
		ents, rerr := os.ReadDir(dir)
		if rerr != nil {
			t.Fatal(rerr)
		}
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), tempPrefix) {
				t.Errorf("prober %v: %s left after %v", prober, e.Name(), err)
			}
		}
	}
}
