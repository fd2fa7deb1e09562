//go:build unix

package helper

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// pipeChan is the client's end of a channel made of two pipes.
type pipeChan struct {
	r, w *os.File
	read atomic.Int64
}

func (c *pipeChan) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.read.Add(int64(n))
	return n, err
}
func (c *pipeChan) Write(p []byte) (int, error) { return c.w.Write(p) }
func (c *pipeChan) Close() error {
	c.w.Close()
	return c.r.Close()
}

// remote is the helper's end of a channel: the process's stdin and stdout.
type remote struct{ in, out *os.File }

func channelPair(t *testing.T) (*pipeChan, remote) {
	t.Helper()
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	return &pipeChan{r: outR, w: inW}, remote{in: inR, out: outW}
}

func newJob(t *testing.T) string {
	t.Helper()
	b := make([]byte, jobLen/2)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// runStriped runs command through a helper over n channels made of
// pipes, the first led and the others joined, with stdin; it returns the
// command's output, its exit and Stripe's error.
func runStriped(t *testing.T, n int, command string, stdin io.Reader, cut func([]*pipeChan)) (string, string, Exit, error) {
	return runStripedVia(t, n, command, stdin, cut, nil)
}

// runStripedVia is runStriped with the client's channels seen through
// wrap (nil: as they are), which may inject faults.
func runStripedVia(t *testing.T, n int, command string, stdin io.Reader, cut func([]*pipeChan), wrap func(int, *pipeChan) Channel) (string, string, Exit, error) {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", "hpncp-helper-test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	t.Setenv("XDG_RUNTIME_DIR", dir)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	name := newJob(t)

	var chans []*pipeChan
	leadDone := make(chan error, 1)
	first, far := channelPair(t)
	chans = append(chans, first)
	go func() {
		leadDone <- Lead(ctx, LeadOptions{Job: name, Channels: n, Shell: "/bin/sh", In: far.in, Out: far.out})
		far.out.Close()
	}()
	if err := Start(first, command); err != nil {
		t.Fatal(err)
	}
	for range n - 1 {
		c, far := channelPair(t)
		chans = append(chans, c)
		go func() {
			Join(ctx, name, far.in, far.out)
			far.in.Close()
			far.out.Close()
		}()
	}
	if cut != nil {
		cut(chans)
	}
	var out, errOut bytes.Buffer
	// The channels after the first join while the command runs, as the
	// further connections' dials end.
	via := func(i int, c *pipeChan) Channel {
		if wrap == nil {
			return c
		}
		return wrap(i, c)
	}
	more := make(chan Channel)
	go func() {
		for i, c := range chans[1:] {
			time.Sleep(10 * time.Millisecond)
			more <- via(i+1, c)
		}
		close(more)
	}()
	exit, err := Stripe(ctx, StripeOptions{Channels: []Channel{via(0, first)}, More: more, Stdin: stdin, Stdout: &out, Stderr: &errOut, Frame: 64 << 10})
	for _, c := range chans {
		c.Close()
	}
	select {
	case <-leadDone:
	case <-ctx.Done():
		t.Fatal("the helper's first process did not end")
	}
	return out.String(), errOut.String(), exit, err
}

func TestStripedCommandCarriesStdinAndOutput(t *testing.T) {
	src := make([]byte, 8<<20+1234)
	rand.Read(src)
	for _, n := range []int{1, 4} {
		var chans []*pipeChan
		out, errOut, exit, err := runStriped(t, n, "cat; echo done >&2", bytes.NewReader(src), func(c []*pipeChan) { chans = c })
		if err != nil {
			t.Fatalf("%d channels: %v", n, err)
		}
		if out != string(src) {
			t.Errorf("%d channels: %d bytes came back of %d, not the same", n, len(out), len(src))
		}
		for i, c := range chans {
			if c.read.Load() < 64<<10 {
				t.Errorf("%d channels: channel %d brought back %d bytes; want each to carry a share", n, i, c.read.Load())
			}
		}
		if errOut != "done\n" || exit != (Exit{Status: 0}) {
			t.Errorf("%d channels: stderr %q, exit %+v; want \"done\\n\", status 0", n, errOut, exit)
		}
	}
}

func TestStripedCommandExit(t *testing.T) {
	for _, c := range []struct {
		command string
		want    Exit
	}{
		{"exit 3", Exit{Status: 3}},
		{"kill -TERM $$", Exit{Status: -1, Signal: "TERM"}},
		{"cat >/dev/null; exit 0", Exit{Status: 0}},
	} {
		_, _, exit, err := runStriped(t, 2, c.command, strings.NewReader("some input\n"), nil)
		if err != nil {
			t.Fatalf("%s: %v", c.command, err)
		}
		if exit != c.want {
			t.Errorf("%s: exit %+v, want %+v", c.command, exit, c.want)
		}
	}
	// No stdin (-n): the command reads its end at once.
	out, _, exit, err := runStriped(t, 2, "wc -c", nil, nil)
	if err != nil || strings.TrimSpace(out) != "0" || exit.Status != 0 {
		t.Errorf("wc -c with no stdin: %q, %+v, %v", out, exit, err)
	}
}

// TestLostChannelStopsTheCommand: a channel lost while stdin flows ends the
// client's run with an error and the command is killed, never given an
// early end of its input (it would write a short file and exit 0).
func TestLostChannelStopsTheCommand(t *testing.T) {
	dir := t.TempDir()
	target := dir + "/f"
	src := make([]byte, 32<<20)
	rand.Read(src)
	pr, pw := io.Pipe()
	go func() {
		pw.Write(src[:4<<20])
		time.Sleep(100 * time.Millisecond)
		pw.Write(src[4<<20:])
		pw.Close()
	}()
	_, _, exit, err := runStriped(t, 3, "cat > "+target+" && echo written > "+target+".ok", pr, func(chans []*pipeChan) {
		go func() {
			time.Sleep(50 * time.Millisecond)
			chans[1].Close() // the connection under it reset
		}()
	})
	if err == nil {
		t.Fatalf("a lost channel: exit %+v and no error", exit)
	}
	if _, serr := os.Stat(target + ".ok"); !errors.Is(serr, os.ErrNotExist) {
		t.Errorf("the command ended as if its input were whole (%v)", serr)
	}
}

func TestHelloRefusesWhatIsNotAHelper(t *testing.T) {
	for _, in := range []string{"", "sh: 1: hpncp: not found\n", strings.Repeat("x", 40)} {
		if err := Hello(strings.NewReader(in)); !errors.Is(err, ErrNoHelper) {
			t.Errorf("%q: %v, want ErrNoHelper", in, err)
		}
	}
}

func TestValidJob(t *testing.T) {
	for name, ok := range map[string]bool{
		strings.Repeat("a", 32):              true,
		"0123456789abcdef0123456789abcdef":   true,
		strings.Repeat("a", 31):              false,
		strings.Repeat("A", 32):              false,
		"../../../../../../../../etc/passwd": false,
	} {
		if ValidJob(name) != ok {
			t.Errorf("ValidJob(%q) = %v, want %v", name, !ok, ok)
		}
	}
}

// TestOtherProtocolRunsPlain: a helper of another protocol answers with
// an error frame, which the client takes as no helper.
func TestOtherProtocolRunsPlain(t *testing.T) {
	var b bytes.Buffer
	if err := Refuse(&b, "v0.test", Protocol+1); err == nil {
		t.Fatal("Refuse returned no error")
	}
	err := Hello(&b)
	if !errors.Is(err, ErrNoHelper) || !strings.Contains(err.Error(), "speaks helper protocol 1, not 2") {
		t.Errorf("Hello after a refusal: %v, want ErrNoHelper saying why", err)
	}
}
