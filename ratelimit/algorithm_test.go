package ratelimit

import (
	"testing"
	"time"
)

// t0 is the start of a minute (and of a second): 1699999980 = 28333333 * 60.
var t0 = time.Unix(1_699_999_980, 0)

func at(d time.Duration) time.Time { return t0.Add(d) }

const s = time.Second

// step is one check of an algorithm table: at t0+at, hits (cap: the
// class cap, 0 meaning the capacity), and the expected result.
type algStep struct {
	at        time.Duration
	hits      uint32
	cap       uint32
	allowed   bool
	remaining uint32
	reset     time.Duration
	exhausted time.Duration
}

func runSteps(t *testing.T, run func(now time.Time, c Check) Result, l Limit, steps []algStep) {
	t.Helper()
	for i, st := range steps {
		c := Check{Key: "k", Limit: l, Cap: l.Capacity(), Hits: st.hits}
		if st.cap > 0 {
			c.Cap = st.cap
		}
		r := run(at(st.at), c)
		if r.Allowed != st.allowed || r.Remaining != st.remaining || r.Reset != st.reset || r.Exhausted != st.exhausted {
			t.Errorf("step %d (at %v, %d hits): got allowed=%v remaining=%d reset=%v exhausted=%v,\n"+
				"                        want allowed=%v remaining=%d reset=%v exhausted=%v",
				i, st.at, st.hits, r.Allowed, r.Remaining, r.Reset, r.Exhausted,
				st.allowed, st.remaining, st.reset, st.exhausted)
		}
	}
}

func decider() func(time.Time, Check) Result {
	var st State
	return func(now time.Time, c Check) Result { return Decide(&st, now, c) }
}

// algorithmCases are the algorithm tables, run against Decide and
// against every Store (runStoreSuite).
var algorithmCases = map[string]struct {
	limit Limit
	steps []algStep
}{
	"fixed window: fills, refuses, resets at the window's end": {Limit{FixedWindow, 3, Minute, 0}, []algStep{
		{at: 0, hits: 1, allowed: true, remaining: 2, reset: 60 * s},
		{at: 10 * s, hits: 1, allowed: true, remaining: 1, reset: 50 * s},
		{at: 20*s + 500*time.Millisecond, hits: 1, allowed: true, remaining: 0, reset: 40 * s},
		{at: 30 * s, hits: 1, reset: 30 * s, exhausted: 30 * s},
		{at: 59*s + 999*time.Millisecond, hits: 0, reset: 1 * s, exhausted: time.Millisecond},
		{at: 60 * s, hits: 1, allowed: true, remaining: 2, reset: 60 * s},
	}},
	"fixed window: refused hits count, as in envoyproxy/ratelimit": {Limit{FixedWindow, 10, Second, 0}, []algStep{
		{at: 0, hits: 8, allowed: true, remaining: 2, reset: s},
		{at: 0, hits: 5, reset: s, exhausted: s},
		{at: 0, hits: 1, reset: s, exhausted: s},
	}},
	"fixed window: a check at the limit is OK with nothing left": {Limit{FixedWindow, 2, Second, 0}, []algStep{
		{at: 0, hits: 2, allowed: true, remaining: 0, reset: s},
		{at: 0, hits: 0, allowed: true, remaining: 0, reset: s},
	}},
	"fixed window: class caps refuse without counting": {Limit{FixedWindow, 10, Second, 0}, []algStep{
		{at: 0, hits: 7, cap: 7, allowed: true, remaining: 0, reset: s},
		{at: 0, hits: 1, cap: 7, reset: s},
		{at: 0, hits: 3, cap: 7, reset: s},
		{at: 0, hits: 3, allowed: true, remaining: 0, reset: s},
		{at: 0, hits: 1, reset: s, exhausted: s},
	}},
	"fixed window: zero limit refuses all": {Limit{FixedWindow, 0, Second, 0}, []algStep{
		{at: 0, hits: 1, reset: s, exhausted: s},
	}},
	"sliding window: the previous window weighs on the next": {Limit{SlidingWindow, 10, Minute, 0}, []algStep{
		{at: 0, hits: 10, allowed: true, remaining: 0, reset: 120 * s},
		{at: 30 * s, hits: 1, reset: 36 * s, exhausted: 36 * s},
		{at: 60 * s, hits: 1, reset: 6 * s, exhausted: 6 * s},
		{at: 66 * s, hits: 1, allowed: true, remaining: 0, reset: 114 * s},
		{at: 90 * s, hits: 1, allowed: true, remaining: 3, reset: 90 * s},
		{at: 90 * s, hits: 5, reset: 12 * s},
		{at: 200 * s, hits: 0, allowed: true, remaining: 10, reset: 40 * s},
	}},
	"sliding window: hits above the cap can never pass": {Limit{SlidingWindow, 10, Minute, 0}, []algStep{
		{at: 0, hits: 11, reset: 60 * s},
	}},
	"sliding log: exact, resets when the oldest hit leaves": {Limit{SlidingLog, 3, Minute, 0}, []algStep{
		{at: 0, hits: 1, allowed: true, remaining: 2, reset: 60 * s},
		{at: 10 * s, hits: 1, allowed: true, remaining: 1, reset: 60 * s},
		{at: 20 * s, hits: 1, allowed: true, remaining: 0, reset: 60 * s},
		{at: 30 * s, hits: 1, reset: 30 * s, exhausted: 30 * s},
		{at: 60 * s, hits: 1, allowed: true, remaining: 0, reset: 60 * s},
		{at: 61 * s, hits: 2, reset: 19 * s, exhausted: 9 * s},
		{at: 61 * s, hits: 4, reset: 60 * s, exhausted: 9 * s},
		{at: 70 * s, hits: 0, allowed: true, remaining: 1, reset: 50 * s},
	}},
	"token bucket: a burst, then the refill rate": {Limit{TokenBucket, 1, Second, 3}, []algStep{
		{at: 0, hits: 1, allowed: true, remaining: 2, reset: 1 * s},
		{at: 0, hits: 2, allowed: true, remaining: 0, reset: 3 * s},
		{at: 0, hits: 1, reset: 1 * s, exhausted: 1 * s},
		{at: 1500 * time.Millisecond, hits: 1, allowed: true, remaining: 0, reset: 2500 * time.Millisecond},
		{at: 1500 * time.Millisecond, hits: 0, allowed: true, remaining: 0, reset: 2500 * time.Millisecond},
		{at: 1500 * time.Millisecond, hits: 1, reset: 500 * time.Millisecond, exhausted: 500 * time.Millisecond},
		{at: 10 * s, hits: 3, allowed: true, remaining: 0, reset: 3 * s},
		{at: 10 * s, hits: 4, reset: 1 * s, exhausted: 1 * s},
	}},
	"token bucket: caps reserve tokens for higher classes": {Limit{TokenBucket, 10, Second, 10}, []algStep{
		{at: 0, hits: 7, cap: 7, allowed: true, remaining: 0, reset: 700 * time.Millisecond},
		{at: 0, hits: 1, cap: 7, reset: 100 * time.Millisecond},
		{at: 0, hits: 3, allowed: true, remaining: 0, reset: s},
		{at: 0, hits: 1, reset: 100 * time.Millisecond, exhausted: 100 * time.Millisecond},
	}},
	"leaky bucket: strict pacing by default": {Limit{LeakyBucket, 2, Second, 1}, []algStep{
		{at: 0, hits: 1, allowed: true, remaining: 0, reset: 500 * time.Millisecond},
		{at: 250 * time.Millisecond, hits: 1, reset: 250 * time.Millisecond, exhausted: 250 * time.Millisecond},
		{at: 500 * time.Millisecond, hits: 1, allowed: true, remaining: 0, reset: 500 * time.Millisecond},
		{at: 5 * s, hits: 2, reset: 60 * s / 60, exhausted: 0},
	}},
	"buckets: zero rate refuses all": {Limit{TokenBucket, 0, Second, 1}, []algStep{
		{at: 0, hits: 1, reset: s, exhausted: s},
	}},
}

func TestAlgorithms(t *testing.T) {
	for name, tc := range algorithmCases {
		t.Run(name, func(t *testing.T) { runSteps(t, decider(), tc.limit, tc.steps) })
	}
}

// A state written by another algorithm (after a reload changed a rule's
// algorithm) starts afresh.
func TestDecideResetsForeignState(t *testing.T) {
	var st State
	Decide(&st, t0, Check{Limit: Limit{FixedWindow, 1, Second, 0}, Cap: 1, Hits: 1})
	r := Decide(&st, t0, Check{Limit: Limit{SlidingLog, 1, Second, 0}, Cap: 1, Hits: 1})
	if !r.Allowed {
		t.Errorf("sliding log after fixed window state refused: %+v", r)
	}
}

func TestFixedWindowKey(t *testing.T) {
	if got, want := FixedWindowKey("d_k_v_", at(61*s+300*time.Millisecond), Minute), "d_k_v_1700000040"; got != want {
		t.Errorf("FixedWindowKey = %q, want %q", got, want)
	}
}

func TestStateExpiry(t *testing.T) {
	for name, tc := range map[string]struct {
		limit Limit
		hits  uint32
		want  time.Duration // after t0+10s
	}{
		"fixed window: window end":      {Limit{FixedWindow, 5, Minute, 0}, 1, 50 * s},
		"sliding window: one unit more": {Limit{SlidingWindow, 5, Minute, 0}, 1, 110 * s},
		"sliding log: newest plus unit": {Limit{SlidingLog, 5, Minute, 0}, 1, 60 * s},
		"token bucket: TAT":             {Limit{TokenBucket, 6, Minute, 6}, 2, 20 * s},
	} {
		t.Run(name, func(t *testing.T) {
			var st State
			now := at(10 * s)
			Decide(&st, now, Check{Limit: tc.limit, Cap: tc.limit.Capacity(), Hits: tc.hits})
			if got := time.Duration(st.Expiry(tc.limit) - now.UnixNano()); got != tc.want {
				t.Errorf("expiry in %v, want %v", got, tc.want)
			}
		})
	}
}
