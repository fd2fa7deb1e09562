// Package slots bounds how many of something run at once: files in
// flight, directories being listed, sessions busy. It is its own package,
// importing nothing of hpncp, so that the copy engine and the SFTP wire
// code share one helper.
package slots

import "context"

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
