package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hpncp/hpncp/internal/sshtest"
)

// TestKilledConnectionMidTransfer kills one of several connections, or
// every one, while a large file is being copied: the copy must finish on
// the remaining ones or on new ones (or fail cleanly), never leave a
// corrupt file under the final name.
func TestKilledConnectionMidTransfer(t *testing.T) {
	slow(t)
	t.Parallel()
	for _, tc := range []struct{ dir, kill string }{
		{"upload", "one"}, {"download", "one"}, {"upload", "all"}, {"download", "all"},
	} {
		dir := tc.dir
		t.Run(dir+"/"+tc.kill, func(t *testing.T) {
			srv := sshtest.Start(t, sshtest.Options{})
			work := t.TempDir()
			src := filepath.Join(work, "big")
			if err := writeNoise(src, 48<<20); err != nil {
				t.Fatal(err)
			}
			dst := filepath.Join(work, "copy")
			from, to := src, "testhost:"+dst
			if dir == "download" {
				from, to = "testhost:"+src, dst
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			done := make(chan error, 1)
			go func() {
				done <- run(ctx, []string{"hpncp", "-F", srv.ConfigFile, "-q", "-l", "120000",
					"--streams", "4", "--connections", "4", from, to}, nil, io.Discard, io.Discard)
			}()
			// Kill the third connection once a quarter of the file arrived.
			killed := false
			for !killed {
				select {
				case err := <-done:
					t.Fatalf("copy ended before a connection could be killed: %v", err)
				case <-time.After(20 * time.Millisecond):
				}
				matches, _ := filepath.Glob(filepath.Join(work, ".hpncp.copy.*.part"))
				for _, m := range matches {
					if fi, err := os.Stat(m); err == nil && fi.Size() > 12<<20 {
						if tc.kill == "all" {
							srv.KillConnections()
							killed = true
						} else {
							killed = srv.KillConnection(2)
						}
					}
				}
			}
			err := <-done
			if err != nil && tc.kill == "all" {
				t.Fatalf("the copy did not connect again after every connection was killed: %v", err)
			}
			if err != nil {
				t.Logf("copy failed after the kill: %v", err)
				if _, serr := os.Stat(dst); serr == nil {
					t.Fatal("a failed copy left a file under the final name")
				}
				return
			}
			want, _ := os.ReadFile(src)
			got, _ := os.ReadFile(dst)
			if !bytes.Equal(got, want) {
				t.Fatal("the copy finished but differs from the source")
			}
		})
	}
}
