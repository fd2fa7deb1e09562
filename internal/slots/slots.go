// Package slots bounds how many of something run at once: files in
// flight, directories being listed, sessions busy. It is its own package,
// importing nothing of hpncp, so that the copy engine and the SFTP wire
// code share one helper.
package slots

import (
	"context"
	"sync"
)

// Slots is a counting semaphore: a slot is taken by sending, given back
// by receiving. The zero value has no slots and takes none.
type Slots chan struct{}

// New returns n free slots.
func New(n int) Slots { return make(Slots, n) }

// Acquire waits for a free slot and takes it, or returns ctx's error
// when ctx is done first. A slot free at once is taken even when ctx is
// done: the caller checks ctx where it matters.
func (s Slots) Acquire(ctx context.Context) error {
	select {
	case s <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TryAcquire takes a slot if one is free now, and reports whether it did.
func (s Slots) TryAcquire() bool {
	select {
	case s <- struct{}{}:
		return true
	default:
		return false
	}
}

// Release gives back a slot Acquire or TryAcquire took.
func (s Slots) Release() { <-s }

// ForEach runs f(0) to f(n-1), at most workers of them at once (at
// least one), and returns once every one has. It takes no context: a caller that cleans
// up (removes temporary files) must run to the end even when its run
// was cancelled, and f checks a context where it has one.
func ForEach(n, workers int, f func(i int)) {
	var wg sync.WaitGroup
	next := make(chan int)
	for range min(n, max(workers, 1)) {
		wg.Go(func() {
			for i := range next {
				f(i)
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}
