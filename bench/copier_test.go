package bench

import (
	"bytes"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hpncp/hpncp/job"
	"github.com/hpncp/hpncp/transfer"
)

// TestCopierAgainstDemo runs the bench's transfers through hpncp's copy
// against the embedded demo's server, on an unlimited path.
func TestCopierAgainstDemo(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	demo, err := StartDemo(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer demo.Close()

	// Above the parallel pipeline's smallest file (four 1 MiB chunks).
	want := make([]byte, 6<<20)
	rand.Read(want)
	local := filepath.Join(t.TempDir(), "scratch")
	if err := os.WriteFile(local, want, 0o600); err != nil {
		t.Fatal(err)
	}
	var done int
	r := &Copier{
		Conn: job.Conn{ConfigFile: demo.ConfigFile, Batch: true},
		Host: transfer.Location{Host: DemoHost},
		Done: func(res *transfer.Result, took time.Duration) {
			done++
			if res.Files != 1 || res.Bytes != int64(len(want)) || took <= 0 {
				t.Errorf("Done told of %d file(s), %d bytes in %v; want 1 file of %d bytes", res.Files, res.Bytes, took, len(want))
			}
		},
	}
	for _, c := range Configs {
		if c.Legacy {
			continue // the demo's server runs no commands, scp among them
		}
		t.Run(c.Name, func(t *testing.T) {
			done = 0
			// A file already there is replaced: every run moves every byte.
			if err := os.WriteFile(filepath.Join(demo.Root, "scratch"), []byte("old"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := r.Upload(t.Context(), c, local, "scratch"); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(filepath.Join(demo.Root, "scratch"))
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("uploaded: %d bytes, %v; want the %d scratch bytes", len(got), err, len(want))
			}
			streams := r.LastStreams()
			switch {
			case r.LastTransfer() <= 0:
				t.Errorf("LastTransfer %v after an upload, want its time", r.LastTransfer())
			case c.HPNDisabled && streams != 1:
				t.Errorf("%s used %d streams, want 1", c.Name, streams)
			case c.Streams > 0 && (streams < 1 || streams > c.Streams):
				t.Errorf("%s used %d streams, want 1 to %d", c.Name, streams, c.Streams)
			case streams < 1:
				t.Errorf("%s used %d streams, want the parallel pipeline's count", c.Name, streams)
			}

			back := filepath.Join(t.TempDir(), "back")
			if err := r.Download(t.Context(), c, "scratch", back); err != nil {
				t.Fatal(err)
			}
			if got, err := os.ReadFile(back); err != nil || !bytes.Equal(got, want) {
				t.Fatalf("downloaded: %d bytes, %v; want the %d scratch bytes", len(got), err, len(want))
			}
			if done != 2 {
				t.Errorf("Done called %d times for two transfers", done)
			}
		})
	}

	// Removing connects, unless the remote side is on this machine.
	if err := r.Remove(t.Context(), "scratch"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(demo.Root, "scratch")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after Remove: %v, want the file gone", err)
	}

	// A failed transfer is an error naming the file, with nothing kept
	// of the last transfer's figures.
	done = 0
	err = r.Download(t.Context(), Configs[0], "scratch", filepath.Join(t.TempDir(), "none"))
	var te *transfer.Error
	if !errors.As(err, &te) || r.LastStreams() != 0 || r.LastTransfer() != 0 || done != 0 {
		t.Errorf("download of a missing file: %v (streams %d, took %v, Done %d); want a transfer.Error and no figures",
			err, r.LastStreams(), r.LastTransfer(), done)
	}
}
