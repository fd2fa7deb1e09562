package slots

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

func TestAcquireBoundsHolders(t *testing.T) {
	s := New(2)
	ctx := context.Background()
	for range 2 {
		if err := s.Acquire(ctx); err != nil {
			t.Fatalf("Acquire with a free slot: %v", err)
		}
	}
	if s.TryAcquire() {
		t.Fatal("TryAcquire took a third of two slots")
	}
	got := make(chan error, 1)
	go func() { got <- s.Acquire(ctx) }()
	select {
	case err := <-got:
		t.Fatalf("Acquire returned %v with every slot taken; want it to wait", err)
	case <-time.After(50 * time.Millisecond):
	}
	s.Release()
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("Acquire after a Release: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Acquire still waits after a slot was given back")
	}
}

func TestAcquireEndsWithContext(t *testing.T) {
	s := New(1)
	s.TryAcquire()
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan error, 1)
	go func() { got <- s.Acquire(ctx) }()
	cancel()
	select {
	case err := <-got:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Acquire after cancel: %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Acquire did not return once its context was cancelled")
	}
	// The cancelled Acquire took nothing: the one slot is free after one
	// Release.
	s.Release()
	if !s.TryAcquire() {
		t.Fatal("a cancelled Acquire held a slot")
	}
}

func TestForEachRunsEachOnceWithinBound(t *testing.T) {
	for _, tc := range []struct{ n, workers int }{{0, 4}, {1, 4}, {100, 3}, {5, 0}} {
		var mu sync.Mutex
		ran := make([]int, tc.n)
		busy, most := 0, 0
		ForEach(tc.n, tc.workers, func(i int) {
			mu.Lock()
			ran[i]++
			busy++
			most = max(most, busy)
			mu.Unlock()
			time.Sleep(time.Millisecond)
			mu.Lock()
			busy--
			mu.Unlock()
		})
		for i, k := range ran {
			if k != 1 {
				t.Fatalf("ForEach(%d, %d): f(%d) ran %d times, want once", tc.n, tc.workers, i, k)
			}
		}
		if bound := max(tc.workers, 1); most > bound {
			t.Fatalf("ForEach(%d, %d): %d ran at once, want at most %d", tc.n, tc.workers, most, bound)
		}
	}
}
