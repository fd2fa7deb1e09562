package ends

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hpncp/hpncp/delta"
	"github.com/hpncp/hpncp/internal/sshtest"
	"github.com/hpncp/hpncp/protocol"
	"github.com/hpncp/hpncp/transfer"
)

// A push's basis asked to be signed ahead comes in parts on the channels
// of the push's other shares, opened with the helper; the push of that
// file (into the directory named, here) diffs against them and asks its
// own helper for no signature, and the file is rebuilt right. A push of
// another file signs as before. Either way the shares take the channels
// opened ahead rather than open more.
func TestPushAhead(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	old := bytes.Repeat([]byte("an old version of the file\n"), 2_500_000) // 67 MB: four shares
	next := bytes.Clone(old)
	copy(next[1_000_000:], "changed")
	copy(next[60_000_000:], "changed too")
	mtime := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, c := range []struct {
		name   string
		pushed string // the file pushed, in the directory
		ahead  bool
	}{
		{"the file signed", "f", true},
		{"another file", "g", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, f := range []string{"f", "g"} {
				os.WriteFile(filepath.Join(dir, f), old, 0o644)
			}
			var execs atomic.Int32
			srv := sshtest.Start(t, sshtest.Options{Exec: func(cmd string, stdin io.Reader, stdout, stderr io.Writer) int {
				execs.Add(1)
				return deltaExec(cmd, stdin, stdout)
			}})
			h, hosts, logged := loggedDeltaHosts(t, srv)
			const n = 4
			h.PushAhead(remote(dir), dir, "f", int64(len(next)), mtime, n)
			e, err := h.Endpoint(t.Context(), remote(dir))
			if err != nil {
				t.Fatal(err)
			}
			s, release, err := hosts.DeltaSession(t.Context(), e.FS)
			if err != nil {
				t.Fatal(err)
			}
			defer release()
			basis, tmp := filepath.Join(dir, c.pushed), filepath.Join(dir, ".tmp")
			size := int64(len(next))
			diff := func(w io.Writer, sh delta.Share, sig *delta.Signature, blocks func(context.Context, int64) (*delta.Signature, error)) error {
				_, err := delta.Diff(t.Context(), sig, bytes.NewReader(next), size, w, delta.DiffOptions{Blocks: blocks, Share: sh, Ahead: true})
				return err
			}
			others := func(ctx context.Context, under bool, sig *delta.Signature, blocks func(context.Context, int64) (*delta.Signature, error)) (delta.Stats, error) {
				var all delta.Stats
				var wg sync.WaitGroup
				var amu sync.Mutex
				var first error
				for i := 1; i < n; i++ {
					o, rel, err := hosts.DeltaSession(ctx, e.FS)
					if err != nil {
						return all, err
					}
					defer rel()
					wg.Go(func() {
						sh := delta.Share{N: n, I: i}
						st, err := o.PatchShare(ctx, basis, int64(len(old)), tmp, size, under, sh, func(w io.Writer) error { return diff(w, sh, sig, blocks) })
						amu.Lock()
						defer amu.Unlock()
						all.Add(st)
						if first == nil {
							first = err
						}
					})
				}
				wg.Wait()
				return all, first
			}
			_, _, err = s.SignPatch(t.Context(), basis, int64(len(old)), tmp, basis, size, protocol.PutAttrs{}, transfer.PushShares{N: n, Others: others},
				func(sig *delta.Signature, blocks func(context.Context, int64) (*delta.Signature, error), w io.Writer) error {
					return diff(w, delta.Share{N: n}, sig, blocks)
				})
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := os.ReadFile(basis); !bytes.Equal(got, next) {
				t.Fatalf("the push rebuilt %d bytes, not the new file's %d", len(got), len(next))
			}
			log := logged()
			if took := strings.Contains(log, "came ahead, in 3 parts"); took != c.ahead {
				t.Errorf("the signature asked ahead taken %v, want %v; log:\n%s", took, c.ahead, log)
			}
			if got := execs.Load(); got != n {
				t.Errorf("%d helpers started, want %d: one a share", got, n)
			}
		})
	}
}
