package consulstate

import (
	"testing"
	"time"
)

func TestNextIndex(t *testing.T) {
	for name, tc := range map[string]struct {
		prev, got, next uint64
		changed         bool
	}{
		"first read":                          {prev: 0, got: 42, next: 42, changed: true},
		"advanced":                            {prev: 42, got: 43, next: 43, changed: true},
		"wait expired without a change":       {prev: 42, got: 42, next: 42, changed: false},
		"went backwards: reset, process":      {prev: 42, got: 7, next: 0, changed: true},
		"zero on the first read is 1":         {prev: 0, got: 0, next: 1, changed: true},
		"zero after 1 went backwards: reset":  {prev: 1, got: 0, next: 0, changed: true},
		"went backwards to 1: reset":          {prev: 5, got: 1, next: 0, changed: true},
		"non-blocking read after a reset":     {prev: 0, got: 7, next: 7, changed: true},
		"one past the treated-as-1 zero read": {prev: 1, got: 2, next: 2, changed: true},
		"still 1":                             {prev: 1, got: 1, next: 1, changed: false},
	} {
		t.Run(name, func(t *testing.T) {
			next, changed := NextIndex(tc.prev, tc.got)
			if next != tc.next || changed != tc.changed {
				t.Errorf("NextIndex(%d, %d) = %d, %v; want %d, %v", tc.prev, tc.got, next, changed, tc.next, tc.changed)
			}
		})
	}
}

func TestBackoff(t *testing.T) {
	const base, ceiling = 100 * time.Millisecond, time.Second
	for name, tc := range map[string]struct {
		attempt       int
		base, ceiling time.Duration
		rnd           float64
		want          time.Duration
	}{
		"first retry, no jitter":             {attempt: 1, base: base, ceiling: ceiling, rnd: 0, want: 50 * time.Millisecond},
		"first retry, full jitter":           {attempt: 1, base: base, ceiling: ceiling, rnd: 1, want: 100 * time.Millisecond},
		"first retry, half jitter":           {attempt: 1, base: base, ceiling: ceiling, rnd: 0.5, want: 75 * time.Millisecond},
		"doubles":                            {attempt: 2, base: base, ceiling: ceiling, rnd: 1, want: 200 * time.Millisecond},
		"doubles again":                      {attempt: 4, base: base, ceiling: ceiling, rnd: 0, want: 400 * time.Millisecond},
		"capped":                             {attempt: 5, base: base, ceiling: ceiling, rnd: 1, want: time.Second},
		"capped at the ceiling, not 2x":      {attempt: 5, base: base, ceiling: ceiling, rnd: 0, want: 500 * time.Millisecond},
		"huge attempt does not overflow":     {attempt: 1 << 30, base: base, ceiling: ceiling, rnd: 1, want: time.Second},
		"huge ceiling does not overflow":     {attempt: 200, base: time.Second, ceiling: 1<<63 - 1, rnd: 0, want: (1<<63 - 1) / 2},
		"attempt 0 is the first retry":       {attempt: 0, base: base, ceiling: ceiling, rnd: 0, want: 50 * time.Millisecond},
		"no base: no delay":                  {attempt: 3, base: 0, ceiling: ceiling, rnd: 1, want: 0},
		"ceiling below base is raised":       {attempt: 3, base: base, ceiling: time.Millisecond, rnd: 1, want: base},
		"randomness above 1 is clamped":      {attempt: 1, base: base, ceiling: ceiling, rnd: 7, want: base},
		"negative randomness is clamped":     {attempt: 1, base: base, ceiling: ceiling, rnd: -1, want: base / 2},
		"capped exactly at a power of two":   {attempt: 4, base: base, ceiling: 800 * time.Millisecond, rnd: 1, want: 800 * time.Millisecond},
		"ceiling between powers of two wins": {attempt: 4, base: base, ceiling: 700 * time.Millisecond, rnd: 1, want: 700 * time.Millisecond},
		"ha's watch defaults, far retry":     {attempt: 20, base: 250 * time.Millisecond, ceiling: 30 * time.Second, rnd: 0, want: 15 * time.Second},
	} {
		t.Run(name, func(t *testing.T) {
			got := Backoff(tc.attempt, tc.base, tc.ceiling, func() float64 { return tc.rnd })
			if got != tc.want {
				t.Errorf("Backoff(%d, %v, %v, %v) = %v, want %v", tc.attempt, tc.base, tc.ceiling, tc.rnd, got, tc.want)
			}
		})
	}
}
