package console

import (
	"sync"
	"time"
)

// refreshEvery is how long the console reuses what is costly to gather
// (the metrics, the node list, a service's subset summary): any number
// of open pages cost one gathering per second.
const refreshEvery = time.Second

// every is a value computed at most once per refreshEvery.
type every[T any] struct {
	mu sync.Mutex
	at time.Time
	v  T
}

// get returns the value, computing it first if it is older than
// refreshEvery at now (or was never computed).
func (e *every[T]) get(now time.Time, compute func() T) T {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.at.IsZero() || !fresh(e.at, now) {
		e.v, e.at = compute(), now
	}
	return e.v
}

// fresh: at is less than refreshEvery before now (and not after it: a
// clock stepped back refreshes).
func fresh(at, now time.Time) bool {
	return !now.Before(at) && now.Sub(at) < refreshEvery
}
