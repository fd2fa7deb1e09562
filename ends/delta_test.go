package ends

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/hpncp/hpncp/delta"
	"github.com/hpncp/hpncp/helper"
	"github.com/hpncp/hpncp/internal/sshtest"
	"github.com/hpncp/hpncp/sshconn"
	"github.com/hpncp/hpncp/transfer"
)

// deltaServer is an in-process SSH server whose exec runs the helper's
// delta service, as hpncp serve --delta would, for the command line
// helperCmd.
func deltaServer(t *testing.T) *sshtest.Server {
	return sshtest.Start(t, sshtest.Options{Exec: func(cmd string, stdin io.Reader, stdout, stderr io.Writer) int {
		return deltaExec(cmd, stdin, stdout)
	}})
}

// deltaExec runs cmd, helperCmd's, as hpncp serve --delta would.
func deltaExec(cmd string, stdin io.Reader, stdout io.Writer) int {
	words := strings.Fields(cmd)
	if len(words) < 3 || words[0] != helperCmd {
		return 127
	}
	in := stdin
	for i, w := range words {
		if w == "--"+helper.RequestFlag && i+1 < len(words) {
			var err error
			if in, err = helper.RequestInput(words[i+1], stdin); err != nil {
				return 2
			}
		}
	}
	if err := helper.ServeDelta(context.Background(), in, stdout); err != nil {
		return 1
	}
	return 0
}

const helperCmd = "hpncp-test-helper"

// loggedDeltaHosts are hosts connecting to srv, closed with the test, and
// their delta services started by helperCmd; logged is what they said
// with -vv so far.
func loggedDeltaHosts(t *testing.T, srv *sshtest.Server) (h *Hosts, hosts transfer.DeltaHosts, logged func() string) {
	var b strings.Builder
	var mu sync.Mutex
	o := connOptions(srv)
	o.Logf = func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		b.WriteString(strings.TrimSpace(fmt.Sprintf(format, args...)) + "\n")
	}
	h = New(Options{SSH: o})
	t.Cleanup(func() { h.Close() })
	hosts = h.DeltaHosts(func(host, extra string) (string, error) { return helperCmd + " serve --delta " + extra, nil })
	return h, hosts, func() string {
		mu.Lock()
		defer mu.Unlock()
		return b.String()
	}
}

// A pull asked ahead is taken by the same file's pull; a session asked
// for anything else first (another file's pull, a sum) asks on a new
// channel and gets its answer, the channel of the pull asked ahead given
// up.
func TestPullAhead(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	dir := t.TempDir()
	old := bytes.Repeat([]byte("an old version of the file\n"), 40000)
	next := bytes.Clone(old)
	copy(next[500_000:], "changed")
	src, other := filepath.Join(dir, "src"), filepath.Join(dir, "other")
	os.WriteFile(src, next, 0o644)
	os.WriteFile(other, next, 0o644)
	pull := func(ctx context.Context, s interface {
		DiffStream(context.Context, string, int64, func(io.Writer) error, bool, delta.Share, func(io.Reader) error) (delta.Stats, error)
	}, path string) error {
		bl := delta.BlockSize(int64(len(old)))
		out := &memAt{}
		_, err := s.DiffStream(ctx, path, int64(len(next)), func(w io.Writer) error {
			return delta.SignTo(ctx, bytes.NewReader(old), int64(len(old)), bl, w)
		}, false, delta.Share{}, func(r io.Reader) error {
			_, _, err := delta.Apply(ctx, r, delta.Basis{R: bytes.NewReader(old), Size: int64(len(old)), BlockLen: bl}, out, int64(len(next)))
			return err
		})
		if err == nil && !bytes.Equal(out.bytes(), next) {
			t.Errorf("pull of %s: not the new file", path)
		}
		return err
	}
	for _, first := range []string{"the same file's pull", "another file's pull", "a sum"} {
		t.Run(first, func(t *testing.T) {
			h, hosts, logged := loggedDeltaHosts(t, deltaServer(t))
			var signs atomic.Int32
			h.PullAhead(remote(src), src, false, false, 1, func(ctx context.Context, w io.Writer) error {
				signs.Add(1)
				return delta.SignTo(ctx, bytes.NewReader(old), int64(len(old)), delta.BlockSize(int64(len(old))), w)
			})
			e, err := h.Endpoint(t.Context(), remote(src))
			if err != nil {
				t.Fatal(err)
			}
			s, release, err := hosts.DeltaSession(t.Context(), e.FS)
			if err != nil {
				t.Fatal(err)
			}
			defer release()
			switch first {
			case "the same file's pull":
				err = pull(t.Context(), s, src)
			case "another file's pull":
				err = pull(t.Context(), s, other)
			case "a sum":
				var sums [][]byte
				var errs []error
				sums, errs, err = s.SHA256s(t.Context(), []string{src}, []int64{int64(len(next))})
				if err == nil && (errs[0] != nil || !bytes.Equal(sums[0], sha256Of(next))) {
					t.Errorf("the sum asked after a pull asked ahead: %x, %v", sums[0], errs[0])
				}
			}
			if err != nil {
				t.Fatalf("%s after a pull asked ahead: %v", first, err)
			}
			took := strings.Contains(logged(), "was asked for ahead")
			// Given up, the pull asked ahead may have begun its
			// signing, never more than once.
			if took != (first == "the same file's pull") || signs.Load() > 1 || took && signs.Load() != 1 {
				t.Errorf("%s: the pull asked ahead taken %v, signed %d times; log:\n%s", first, took, signs.Load(), logged())
			}
		})
	}
}

// A pull asked ahead in shares goes out on as many channels as the
// helper starts, the basis signed once; the sessions the copy then takes
// hold the shares, each saying which, and the shares' deltas together
// rebuild the file.
func TestPullAheadShares(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	dir := t.TempDir()
	old := bytes.Repeat([]byte("an old version of the file\n"), 80000)
	next := bytes.Clone(old)
	copy(next[100_000:], "changed")
	copy(next[1_900_000:], "changed too")
	src := filepath.Join(dir, "src")
	os.WriteFile(src, next, 0o644)
	srv := deltaServer(t)
	h := New(Options{SSH: connOptions(srv)})
	defer h.Close()
	hosts := h.DeltaHosts(func(host, extra string) (string, error) { return helperCmd + " serve --delta " + extra, nil })
	var signs atomic.Int32
	bl := delta.BlockSize(int64(len(old)))
	const n = 3
	h.PullAhead(remote(src), src, false, false, n, func(ctx context.Context, w io.Writer) error {
		signs.Add(1)
		return delta.SignTo(ctx, bytes.NewReader(old), int64(len(old)), bl, w)
	})
	e, err := h.Endpoint(t.Context(), remote(src))
	if err != nil {
		t.Fatal(err)
	}
	out := &memAt{}
	g := delta.Gather(t.Context(), n, delta.Basis{R: bytes.NewReader(old), Size: int64(len(old)), BlockLen: bl}, out, int64(len(next)))
	var wg sync.WaitGroup
	seen := map[int]bool{}
	for range n {
		s, release, err := hosts.DeltaSession(t.Context(), e.FS)
		if err != nil {
			t.Fatal(err)
		}
		defer release()
		sh, ok := s.(session).AheadShare(src)
		if !ok || sh.N != n || seen[sh.I] {
			t.Fatalf("a session holds share %+v (asked ahead %v), seen %v", sh, ok, seen)
		}
		seen[sh.I] = true
		wg.Go(func() {
			_, err := s.DiffStream(t.Context(), src, int64(len(next)), func(io.Writer) error {
				t.Error("a share asked ahead signed again")
				return nil
			}, false, sh, g.Apply(sh.I))
			if err != nil {
				t.Errorf("share %d: %v", sh.I, err)
			}
		})
	}
	wg.Wait()
	if !bytes.Equal(out.bytes(), next) || signs.Load() != 1 {
		t.Errorf("shares asked ahead: the new file rebuilt %v, signed %d times", bytes.Equal(out.bytes(), next), signs.Load())
	}
}

func sha256Of(p []byte) []byte { s := sha256.Sum256(p); return s[:] }

// memAt is a file in memory written at offsets.
type memAt struct {
	mu sync.Mutex
	b  []byte
}

func (m *memAt) WriteAt(p []byte, off int64) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if end := int(off) + len(p); end > len(m.b) {
		m.b = append(m.b, make([]byte, end-len(m.b))...)
	}
	copy(m.b[off:], p)
	return len(p), nil
}

func (m *memAt) bytes() []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	return bytes.Clone(m.b)
}

// New delta channels go on the destination's connections in turn, and
// the shares of a pull asked ahead on connections of their own: share i
// on the i-th once it is up, or, once the helper is up on the first with
// no other come, on those there are.
func TestDeltaConnections(t *testing.T) {
	cs := []*sshconn.Client{{}, {}, {}}
	var mu sync.Mutex
	up, more := 1, make(chan struct{})
	d := &deltaHost{c: cs[0], opened: 1, conns: func() ([]*sshconn.Client, <-chan struct{}) {
		mu.Lock()
		defer mu.Unlock()
		return cs[:up], more
	}}
	comeUp := func() {
		mu.Lock()
		defer mu.Unlock()
		up++
		close(more)
		more = make(chan struct{})
	}
	got := make(chan *sshconn.Client)
	firstUp := make(chan struct{})
	go func() { got <- d.apart(t.Context(), 2, firstUp) }()
	comeUp()
	comeUp()
	if c := <-got; c != cs[2] {
		t.Errorf("share 2 went on connection %d, want 2", slices.Index(cs, c))
	}
	up = 1
	close(firstUp)
	if c := d.apart(t.Context(), 1, firstUp); c != cs[0] {
		t.Errorf("share 1, no other connection up: went on %d, want 0", slices.Index(cs, c))
	}
	up = 3
	var on []int
	for range 4 {
		on = append(on, slices.Index(cs, d.next()))
	}
	if !slices.Equal(on, []int{1, 2, 0, 1}) {
		t.Errorf("new channels went on connections %v, want 1 2 0 1", on)
	}
}

// A channel whose turn is on a connection that is gone goes on the first.
func TestDeltaConnectionGone(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	srv := deltaServer(t)
	d := sshconn.NewDialer(connOptions(srv))
	var cs []*sshconn.Client
	for range 2 {
		c, err := d.Dial(t.Context(), "testhost")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		cs = append(cs, c)
	}
	cs[1].Close()
	dh := &deltaHost{c: cs[0], host: "testhost", line: helperCmd + " serve --delta", opened: 1,
		conns: func() ([]*sshconn.Client, <-chan struct{}) { return cs, nil }}
	c, err := dh.openNext(t.Context())
	if err != nil {
		t.Fatalf("with the next connection gone: %v", err)
	}
	c.Close()
}
