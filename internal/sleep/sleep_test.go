package sleep

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestForWaitsOutTheDuration(t *testing.T) {
	const d = 20 * time.Millisecond
	start := time.Now()
	if err := For(context.Background(), d); err != nil {
		t.Fatalf("For: %v", err)
	}
	if took := time.Since(start); took < d {
		t.Errorf("For returned after %s, before %s", took, d)
	}
}

func TestForEndsWithTheContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	// An hour's wait a done context must end at once: the test's own
	// timeout is the failure if it does not.
	if err := For(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("For with a cancelled context: %v, want context.Canceled", err)
	}
}
