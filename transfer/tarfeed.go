package transfer

import (
	"context"
	"iter"
	"sync"
	"time"
)

// The small files of a download, handed to its tar streams as each takes
// them in, rather than cut into one batch per stream beforehand: a
// stream is sent names while what it was sent before is arriving, so
// that a stream on a connection the server's congestion control holds
// back carries less, and the others carry the rest. A connection whose
// first round trips meet the queue the others built can leave slow
// start at a small window, and with fixed batches its streams would set
// the end of the copy at several times its length.

const (
	// feedStart is what a stream is handed before anything arrived.
	feedStart = 512 << 10
	// feedWindow is how far back a stream's arrivals are counted: it may
	// have twice what arrived over the last feedWindow outstanding, and
	// feedStart at least. That keeps ahead of a slow start, which doubles
	// what arrives each round trip, and leaves a slow stream with about a
	// second of its own work when the feed runs dry.
	feedWindow = 500 * time.Millisecond
	// feedStall: a stream that has received nothing for this long is
	// handed feedStart more all the same. tar -c says nothing on stdout
	// of a file it could not read (tarSkipped), so files it passed over
	// last count as outstanding until the next entry arrives; without
	// this, a run of such files as large as the allowance would wait on
	// names that are never sent.
	feedStall = time.Second
	// feedSample is the least time between two recorded arrivals.
	feedSample = 10 * time.Millisecond
	// feedBatch is the least a stream is handed at once: names go out
	// in writes of a few hundred, not one per file that arrived.
	feedBatch = 64 << 10
)

// tarCost is what a file adds to an archive: a header block and its
// bytes padded to whole blocks.
func tarCost(size int64) int64 { return 512 + (size+511)&^511 }

// tarFeed holds the files no stream has been handed yet.
type tarFeed struct {
	mu    sync.Mutex
	files []*tarFile
	next  int // files[next:] are still to be handed out
}

// take hands out the next files, about bytes' worth and at least one;
// none once every file was handed out.
func (f *tarFeed) take(bytes int64) []*tarFile {
	f.mu.Lock()
	defer f.mu.Unlock()
	start := f.next
	var sum int64
	for f.next < len(f.files) && (f.next == start || sum < bytes) {
		sum += tarCost(f.files[f.next].info.Size())
		f.next++
	}
	return f.files[start:f.next:f.next]
}

// left returns the files never handed out.
func (f *tarFeed) left() []*tarFile {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.files[f.next:]
}

// feedStream is one stream's share of a feed: the files it was handed,
// in the order sent, and what of them has arrived.
type feedStream struct {
	feed *tarFeed
	wake chan struct{} // signalled when something arrived

	mu     sync.Mutex
	taken  []*tarFile
	sent   int64 // tarCost of taken
	recv   int64 // tarCost of taken[:passed]
	passed int
	// hist records recv as it grew over the last feedWindow, oldest
	// first, from a mark of 0 when the stream began.
	hist    []feedMark
	lastGot time.Time
}

type feedMark struct {
	at   time.Time
	recv int64
}

func newFeedStream(f *tarFeed) *feedStream {
	return &feedStream{feed: f, wake: make(chan struct{}, 1)}
}

// files returns the files the stream was handed so far.
func (s *feedStream) files() []*tarFile {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.taken
}

// room is how many more bytes the stream may be handed now.
func (s *feedStream) room(now time.Time) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	allow := int64(feedStart)
	// hist[0] holds what had arrived when the window began.
	for len(s.hist) > 1 && now.Sub(s.hist[1].at) > feedWindow {
		s.hist = s.hist[1:]
	}
	if len(s.hist) > 0 {
		allow = max(allow, 2*(s.recv-s.hist[0].recv))
	}
	if now.Sub(s.lastGot) >= feedStall {
		// Handed more, once per feedStall without arrivals.
		s.lastGot = now
		return feedStart
	}
	return allow - (s.sent - s.recv)
}

// arrived records that taken[:passed] arrived or were passed over.
func (s *feedStream) arrived(passed int) {
	s.mu.Lock()
	now := time.Now()
	for _, f := range s.taken[s.passed:passed] {
		s.recv += tarCost(f.info.Size())
	}
	s.passed = passed
	s.lastGot = now
	// The last mark moves with each arrival until it is feedSample
	// past the one before.
	if n := len(s.hist); n > 1 && s.hist[n-1].at.Sub(s.hist[n-2].at) < feedSample {
		s.hist[n-1] = feedMark{now, s.recv}
	} else {
		s.hist = append(s.hist, feedMark{now, s.recv})
	}
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// names yields the names of the files handed to the stream, a batch at
// a time, as it has room for them, until the feed runs dry or ctx ends.
func (s *feedStream) names(ctx context.Context) iter.Seq[[]string] {
	return func(yield func([]string) bool) {
		s.mu.Lock()
		s.lastGot = time.Now()
		s.hist = append(s.hist, feedMark{s.lastGot, s.recv})
		s.mu.Unlock()
		stall := time.NewTimer(feedStall)
		defer stall.Stop()
		for {
			room := s.room(time.Now())
			if room < feedBatch {
				stall.Reset(feedStall)
				select {
				case <-s.wake:
				case <-stall.C:
				case <-ctx.Done():
					return
				}
				continue
			}
			batch := s.feed.take(room)
			if len(batch) == 0 {
				return
			}
			names := make([]string, len(batch))
			var cost int64
			for i, f := range batch {
				names[i] = f.rel
				cost += tarCost(f.info.Size())
			}
			s.mu.Lock()
			s.taken = append(s.taken, batch...)
			s.sent += cost
			s.mu.Unlock()
			if !yield(names) {
				return
			}
		}
	}
}
