package ratelimit

import (
	"errors"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Defaults of the Redis circuit breaker.
const (
	// DefaultRedisBreakerFailures is how many script runs in a row must
	// fail (time out, or lose the connection) to open the breaker.
	DefaultRedisBreakerFailures = 3
	// DefaultRedisBreakerBackoff is how long an open breaker answers
	// every call at once before it lets one call probe Redis; each
	// failed probe doubles it, up to MaxRedisBreakerBackoff.
	DefaultRedisBreakerBackoff = time.Second
	MaxRedisBreakerBackoff     = 30 * time.Second
)

// ErrBreakerOpen is the error of a Redis Decide call that was not tried
// because the breaker is open: the service answers per its failure mode
// without waiting.
var ErrBreakerOpen = errors.New("circuit breaker open (redis timed out repeatedly)")

// Breaker states, as the ratelimit_redis_breaker_state gauge shows them.
const (
	breakerClosed   int32 = iota // calls go to Redis
	breakerOpen                  // calls fail at once until the backoff ends
	breakerHalfOpen              // one call is probing Redis; the others fail at once
)

// breaker is the Redis store's circuit breaker. Closed, it costs a call
// one atomic load. Times are ns of monoNow given by the caller, so its logic is
// testable without a clock.
type breaker struct {
	threshold int32 // failed runs in a row that open it; <= 0: never opens
	base, max int64 // backoff in ns
	probeWait int64 // ns a probe may take before another is let through

	state    atomic.Int32
	failures atomic.Int32 // failed runs in a row
	probeAt  atomic.Int64 // open: when the next probe may go
	backoff  atomic.Int64 // ns of the current backoff
	trips    atomic.Uint64
	rejected atomic.Uint64 // calls failed at once
}

func newBreaker(threshold int, backoff, timeout time.Duration) *breaker {
	b := &breaker{threshold: int32(min(threshold, 1<<30)), base: int64(backoff),
		max: int64(max(MaxRedisBreakerBackoff, backoff)), probeWait: 2 * int64(timeout)}
	b.backoff.Store(b.base)
	return b
}

// allow reports whether a call may go to Redis at now: always when
// closed; when open, only the first call after the backoff (the probe),
// or after a probe that did not report within probeWait.
func (b *breaker) allow(now int64) bool {
	if b.state.Load() == breakerClosed {
		return true
	}
	at := b.probeAt.Load()
	if now < at || !b.probeAt.CompareAndSwap(at, now+b.probeWait) {
		b.rejected.Add(1)
		return false
	}
	b.state.Store(breakerHalfOpen)
	return true
}

// record takes the outcome of one script run at now: a success closes
// the breaker; threshold failures in a row open it; a failed probe opens
// it again for twice the backoff. Errors that Redis replied (a script
// error, say) show that it answers: they count as successes.
func (b *breaker) record(err error, now int64) {
	if err == nil || !breakerFailure(err) {
		if b.failures.Load() != 0 {
			b.failures.Store(0)
		}
		if b.state.Load() != breakerClosed {
			b.backoff.Store(b.base)
			b.state.Store(breakerClosed)
		}
		return
	}
	n := b.failures.Add(1)
	switch b.state.Load() {
	case breakerClosed:
		if b.threshold > 0 && n >= b.threshold && b.state.CompareAndSwap(breakerClosed, breakerOpen) {
			b.trips.Add(1)
			b.probeAt.Store(now + b.backoff.Load())
		}
	case breakerHalfOpen:
		if b.state.CompareAndSwap(breakerHalfOpen, breakerOpen) {
			bo := min(2*b.backoff.Load(), b.max)
			b.backoff.Store(bo)
			b.probeAt.Store(now + bo)
		}
	}
}

// breakerFailure reports whether err means Redis did not answer (a
// timeout, a lost or refused connection) rather than an error reply.
func breakerFailure(err error) bool {
	var reply redis.Error
	return !errors.As(err, &reply)
}
