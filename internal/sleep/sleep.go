// Package sleep waits out a duration that a context may cut short: the
// gaps between dials in protocol's pool and between attempts in sshconn's
// dialer, so that an interrupted copy does not sit out a retry's wait.
package sleep

import (
	"context"
	"time"
)

// For waits d, or until ctx is done, whichever comes first; it returns
// ctx's error in the second case.
func For(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
