package pause

import (
	"context"
	"time"
)

// For waits d or until ctx is done; false when ctx is done (before d
// passed, or already). d <= 0 does not wait.
func For(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// Until waits for ch (a timer's channel from an injected clock) or until
// ctx is done; false when ctx is done first.
func Until(ctx context.Context, ch <-chan time.Time) bool {
	select {
	case <-ch:
		return true
	case <-ctx.Done():
		return false
	}
}

// Every calls f every d (> 0), the first time d from now, until ctx is
// done; it never calls f once ctx is done.
func Every(ctx context.Context, d time.Duration, f func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if ctx.Err() != nil {
				return
			}
			f()
		}
	}
}
