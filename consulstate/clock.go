package consulstate

import (
	"context"
	"time"

	"github.com/xds-server/xds-server/internal/pause"
)

// Clock is the time a loop of this package reads and waits on; tests
// inject their own.
type Clock interface {
	Now() time.Time
	// After returns a channel that receives once d has passed.
	After(d time.Duration) <-chan time.Time
}

type wallClock struct{}

func (wallClock) Now() time.Time                         { return time.Now() }
func (wallClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Wall is the real clock: time.Now and time.After.
var Wall Clock = wallClock{}

// orWall is c, or Wall when c is nil.
func orWall(c Clock) Clock {
	if c == nil {
		return Wall
	}
	return c
}

// Sleep waits d on c (nil: Wall), or until ctx is done; false when ctx is
// done. d <= 0 does not wait.
func Sleep(ctx context.Context, c Clock, d time.Duration) bool {
	if c == nil || d <= 0 {
		return pause.For(ctx, d)
	}
	return pause.Until(ctx, c.After(d))
}
