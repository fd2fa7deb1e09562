package transfer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hpncp/hpncp/protocol"
)

// feedFiles returns n tarFiles of size bytes each, named f0000 on.
func feedFiles(n int, size int64) []*tarFile {
	out := make([]*tarFile, n)
	for i := range out {
		rel := fmt.Sprintf("f%04d", i)
		n := &tarNode{rel: rel, stat: smallStat{size: size}}
		n.info = (*smallInfo)(n)
		out[i] = &tarFile{tarNode: n}
	}
	return out
}

func TestFeedTakeHandsOutInOrderUntilDry(t *testing.T) {
	files := feedFiles(10, 4096)
	f := &tarFeed{files: files}
	// 4096 bytes cost 4608 in an archive: two files reach 9,000 bytes.
	got := f.take(9000)
	if len(got) != 2 || got[0] != files[0] || got[1] != files[1] {
		t.Fatalf("take(9000) = %d files; want the first two", len(got))
	}
	// At least one file, however little is asked.
	if got := f.take(1); len(got) != 1 || got[0] != files[2] {
		t.Fatalf("take(1) = %d files; want the third alone", len(got))
	}
	if got := f.take(1 << 30); len(got) != 7 {
		t.Fatalf("take(all) = %d files; want the 7 left", len(got))
	}
	if got := f.take(1 << 30); len(got) != 0 {
		t.Fatalf("a dry feed handed out %d files", len(got))
	}
	if left := f.left(); len(left) != 0 {
		t.Fatalf("a dry feed has %d files left", len(left))
	}
}

// TestFeedStreamRoomFollowsArrivals: a stream is handed feedStart before
// anything arrived, then up to twice what arrived over the last
// feedWindow; once it stops receiving it gets nothing more until
// feedStall has passed.
func TestFeedStreamRoomFollowsArrivals(t *testing.T) {
	const size = 64 << 10
	cost := tarCost(size)
	f := &tarFeed{files: feedFiles(1000, size)}
	s := newFeedStream(f)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	next, stop := iter.Pull(s.names(ctx))
	defer stop()
	first, ok := next()
	if !ok {
		t.Fatal("no names handed out")
	}
	if got, want := int64(len(first))*cost, int64(feedStart); got < want || got >= want+cost {
		t.Fatalf("first batch %d bytes; want feedStart, %d", got, want)
	}
	now := time.Now()
	if room := s.room(now); room > 0 {
		t.Fatalf("room %d with feedStart outstanding and nothing arrived", room)
	}
	// Half of it arrives: it may have twice that outstanding.
	half := len(first) / 2
	s.arrived(half)
	arrived := int64(half) * cost
	outstanding := int64(len(first)-half) * cost
	if got, want := s.room(time.Now()), max(2*arrived, feedStart)-outstanding; got != want {
		t.Fatalf("room after half arrived = %d; want %d", got, want)
	}
	// Once the arrivals are older than feedWindow, feedStart is the
	// allowance again.
	later := time.Now().Add(feedWindow + 10*time.Millisecond)
	if got, want := s.room(later), feedStart-outstanding; got != want {
		t.Fatalf("room a window later = %d; want %d", got, want)
	}
	// With nothing arriving for feedStall, feedStart more, once.
	stalled := time.Now().Add(feedStall)
	if got := s.room(stalled); got != feedStart {
		t.Fatalf("room after a stall = %d; want feedStart", got)
	}
	if got := s.room(stalled); got == feedStart {
		t.Fatal("a stall handed out feedStart twice at once")
	}
}

// TestFeedStreamWaitsForArrivals: names() hands out nothing more until
// something arrives, and ends when ctx does.
func TestFeedStreamWaitsForArrivals(t *testing.T) {
	f := &tarFeed{files: feedFiles(1000, 64<<10)}
	s := newFeedStream(f)
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan int, 10)
	go func() {
		defer close(got)
		for batch := range s.names(ctx) {
			got <- len(batch)
		}
	}()
	n := <-got
	select {
	case m := <-got:
		t.Fatalf("a second batch of %d before anything arrived", m)
	case <-time.After(100 * time.Millisecond):
	}
	s.arrived(n)
	select {
	case <-got:
	case <-time.After(feedStall / 2):
		t.Fatal("nothing handed out after the first batch arrived")
	}
	cancel()
	for range got {
	}
}

// slowTar is a server with GNU tar whose tar -c streams numbered in slow
// send each entry late, as a connection held back at a small congestion
// window does; fail names a stream that fails at once. It counts the
// names each stream was sent.
type slowTar struct {
	Local
	slow map[int]bool
	fail int // a stream that cannot start; 0 for none
	mu   sync.Mutex
	sent map[int]int
}

func (*slowTar) Label() string { return "fake:" }

func (*slowTar) TarProbe(context.Context) (protocol.TarSupport, error) {
	return protocol.TarSupport{GNU: true, Version: "tar (GNU tar) 1.35"}, nil
}

func (*slowTar) TarExtract(context.Context, string, protocol.TarOptions) (io.WriteCloser, error) {
	return nil, errors.New("slowTar: only creates")
}

func (s *slowTar) TarCreate(_ context.Context, dir string, names iter.Seq[[]string], o protocol.TarOptions) (io.ReadCloser, error) {
	if s.fail != 0 && o.Stream == s.fail {
		return nil, errors.New("slowTar: cannot open a channel")
	}
	counted := func(yield func([]string) bool) {
		for batch := range names {
			s.mu.Lock()
			s.sent[o.Stream] += len(batch)
			s.mu.Unlock()
			if !yield(batch) {
				return
			}
		}
	}
	r := serveTar(dir, counted, nil, "")
	if s.slow[o.Stream] {
		return &slowReader{r, 2 * time.Millisecond}, nil
	}
	return r, nil
}

type slowReader struct {
	io.ReadCloser
	pause time.Duration
}

func (r *slowReader) Read(p []byte) (int, error) {
	time.Sleep(r.pause)
	return r.ReadCloser.Read(p)
}

// TestDownloadStreamsShareTheFeed: a download's tar streams take their
// files from one feed, so that a slow stream carries a small share and
// the others the rest; every file arrives once, whole; a stream that
// could not start leaves its share to the others and fails nothing.
func TestDownloadStreamsShareTheFeed(t *testing.T) {
	src := filepath.Join(t.TempDir(), "tree")
	const files = 2000
	for i := range files {
		write(t, filepath.Join(src, fmt.Sprintf("d%02d", i%20), fmt.Sprintf("f%04d", i)), strings.Repeat(fmt.Sprint(i%10), 4096))
	}
	for _, fail := range []int{0, 2} {
		server := &slowTar{slow: map[int]bool{0: true}, fail: fail, sent: map[int]int{}}
		target := filepath.Join(t.TempDir(), "copy")
		var logs []string
		var mu sync.Mutex
		o := Options{Recursive: true, Tar: TarOptions{Mode: TarForce, Streams: 4},
			Logf: func(f string, a ...any) { mu.Lock(); logs = append(logs, fmt.Sprintf(f, a...)); mu.Unlock() }}
		res, err := Copy(context.Background(), []Endpoint{{server, src}}, local(target), o)
		if err != nil || len(res.Errors) > 0 {
			t.Fatalf("fail %d: %v %v", fail, err, res.Errors)
		}
		if res.Files != files {
			t.Errorf("fail %d: %d files copied; want %d", fail, res.Files, files)
		}
		if got, want := shortTree(t, target), shortTree(t, src); got != want {
			t.Errorf("fail %d: target differs from the source", fail)
		}
		sum := 0
		for _, n := range server.sent {
			sum += n
		}
		if sum != files {
			t.Errorf("fail %d: %d names sent in all (%v); want each of %d once", fail, sum, server.sent, files)
		}
		// Its 4 KiB entries at 2 ms a read: the slow stream alone would
		// take over 8 s for all; it should carry well under a quarter.
		if slow := server.sent[0]; slow >= files/8 {
			t.Errorf("fail %d: the slow stream was sent %d names of %d (%v)", fail, slow, files, server.sent)
		}
		if fail != 0 && server.sent[fail] != 0 {
			t.Errorf("fail %d: the stream that failed was sent %d names", fail, server.sent[fail])
		}
	}
}
