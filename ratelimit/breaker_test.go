package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The breaker's transitions, at given times (ns): opening after the
// threshold, one probe per backoff, doubling after a failed probe,
// closing on success, error replies counting as answers.
func TestBreaker(t *testing.T) {
	timeout := errors.Join(context.DeadlineExceeded)
	const s = int64(time.Second)
	type step struct {
		at    int64 // s
		allow bool  // want allow(at) (when record is nil)
		rec   error // else: record this outcome at at
		ok    bool  // record a success
		state int32 // want afterwards
	}
	for name, tc := range map[string]struct {
		threshold int
		steps     []step
	}{
		"opens after three timeouts in a row, probes after the backoff, closes on success": {3, []step{
			{at: 0, rec: timeout}, {at: 0, rec: timeout}, {at: 0, allow: true},
			{at: 0, rec: timeout, state: breakerOpen},
			{at: 0, allow: false, state: breakerOpen}, {at: 1*s - 1, allow: false, state: breakerOpen},
			{at: 1 * s, allow: true, state: breakerHalfOpen}, {at: 1 * s, allow: false, state: breakerHalfOpen},
			{at: 1 * s, ok: true, state: breakerClosed}, {at: 1 * s, allow: true},
		}},
		"a success resets the count": {3, []step{
			{at: 0, rec: timeout}, {at: 0, rec: timeout}, {at: 0, ok: true}, {at: 0, rec: timeout}, {at: 0, rec: timeout},
			{at: 0, allow: true, state: breakerClosed},
		}},
		"an error reply is an answer": {2, []step{
			{at: 0, rec: timeout}, {at: 0, rec: redis.Nil}, {at: 0, rec: timeout}, {at: 0, allow: true, state: breakerClosed},
		}},
		"a failed probe doubles the backoff, up to the cap": {1, []step{
			{at: 0, rec: timeout, state: breakerOpen},
			{at: 1 * s, allow: true, state: breakerHalfOpen}, {at: 1 * s, rec: timeout, state: breakerOpen},
			{at: 3*s - 1, allow: false, state: breakerOpen}, {at: 3 * s, allow: true, state: breakerHalfOpen},
			{at: 3 * s, rec: fmt.Errorf("dial: %w", errors.New("connection refused")), state: breakerOpen},
			{at: 7 * s, allow: true, state: breakerHalfOpen}, {at: 7 * s, ok: true, state: breakerClosed},
			{at: 7 * s, rec: timeout, state: breakerOpen}, {at: 8 * s, allow: true, state: breakerHalfOpen},
		}},
		"a probe that never reports lets another through after twice the timeout": {1, []step{
			{at: 0, rec: timeout, state: breakerOpen}, {at: 1 * s, allow: true, state: breakerHalfOpen},
			{at: 1*s + 499*int64(time.Millisecond), allow: false, state: breakerHalfOpen},
			{at: 1*s + 500*int64(time.Millisecond), allow: true, state: breakerHalfOpen},
		}},
		"off": {-1, []step{{at: 0, rec: timeout}, {at: 0, rec: timeout}, {at: 0, allow: true, state: breakerClosed}}},
	} {
		t.Run(name, func(t *testing.T) {
			b := newBreaker(tc.threshold, time.Second, 250*time.Millisecond)
			for i, st := range tc.steps {
				switch {
				case st.ok:
					b.record(nil, st.at)
				case st.rec != nil:
					b.record(st.rec, st.at)
				default:
					if got := b.allow(st.at); got != st.allow {
						t.Fatalf("step %d: allow(%v) = %v, want %v", i, time.Duration(st.at), got, st.allow)
					}
				}
				if got := b.state.Load(); got != st.state {
					t.Fatalf("step %d: state %d, want %d", i, got, st.state)
				}
			}
		})
	}
	b := newBreaker(1, 20*time.Second, time.Second)
	b.record(context.DeadlineExceeded, 0)
	for i := range 3 {
		at := b.probeAt.Load()
		b.allow(at)
		b.record(context.DeadlineExceeded, at)
		if want := min(20*s<<(i+1), int64(MaxRedisBreakerBackoff)); b.backoff.Load() != want {
			t.Errorf("backoff after %d failed probes %v, want %v", i+1, time.Duration(b.backoff.Load()), time.Duration(want))
		}
	}
	if b.trips.Load() != 1 {
		t.Errorf("trips %d, want 1 (failed probes are not trips)", b.trips.Load())
	}
}
