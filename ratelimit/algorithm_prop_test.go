package ratelimit

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// admission is one admitted check of a property run.
type admission struct {
	t    int64 // Unix ns
	hits uint64
}

// randomRun drives one key with random arrivals, hits and class caps and
// returns the admissions; it also checks every refusal's Reset and
// Exhausted against a copy of the state.
func randomRun(t *testing.T, rng *rand.Rand, l Limit, events int) []admission {
	t.Helper()
	var st State
	now := t0.Add(time.Duration(rng.Int64N(int64(l.Unit.Duration()))))
	var adm []admission
	for range events {
		now = now.Add(time.Duration(rng.Int64N(int64(l.Unit.Duration()) / 8)))
		c := Check{Key: "k", Limit: l, Cap: l.Capacity(), Hits: uint32(rng.IntN(4))}
		if rng.IntN(3) == 0 {
			c.Cap = uint32(rng.IntN(int(l.Capacity()) + 1))
		}
		if rng.IntN(50) == 0 {
			c.Hits = l.Capacity() + 1
		}
		r := Decide(&st, now, c)
		if r.Remaining > c.Cap {
			t.Fatalf("%v at %v: remaining %d above cap %d", l, now, r.Remaining, c.Cap)
		}
		if r.Allowed {
			if c.Hits > 0 {
				adm = append(adm, admission{now.UnixNano(), uint64(c.Hits)})
			}
			continue
		}
		checkRefusal(t, st, now, c, r)
	}
	return adm
}

// checkRefusal: given the state after a refusal, retrying at now+Reset
// is admitted (when it can ever be), and no 1-hit check at the full
// capacity passes before now+Exhausted. The exact algorithms must not
// admit 1 ns before Reset either.
func checkRefusal(t *testing.T, after State, now time.Time, c Check, r Result) {
	t.Helper()
	try := func(at time.Time, c Check) bool {
		st := cloneState(after)
		return Decide(&st, at, c).Allowed
	}
	if r.Reset <= 0 {
		t.Fatalf("%v at %v: refused with reset %v", c.Limit, now, r.Reset)
	}
	if c.Hits <= c.Cap && !try(now.Add(r.Reset), c) {
		t.Fatalf("%v at %v: %d hits (cap %d) refused again after reset %v", c.Limit, now, c.Hits, c.Cap, r.Reset)
	}
	exact := c.Limit.Algorithm == SlidingLog || c.Limit.Algorithm.bucket()
	if exact && c.Hits <= c.Cap && r.Reset > 1 && try(now.Add(r.Reset-1), c) {
		t.Fatalf("%v at %v: %d hits admitted 1ns before reset %v", c.Limit, now, c.Hits, r.Reset)
	}
	if r.Exhausted > 0 {
		one := Check{Key: c.Key, Limit: c.Limit, Cap: c.Limit.Capacity(), Hits: 1}
		if try(now.Add(r.Exhausted-1), one) {
			t.Fatalf("%v at %v: admitted 1ns before exhaustion ends (%v)", c.Limit, now, r.Exhausted)
		}
	}
}

func cloneState(st State) State {
	st.Log = slices.Clone(st.Log)
	return st
}

func randomLimit(rng *rand.Rand, a Algorithm) Limit {
	l := Limit{Algorithm: a, Requests: uint32(1 + rng.IntN(20)), Unit: []Unit{Second, Minute}[rng.IntN(2)]}
	if a.bucket() {
		l.Burst = uint32(1 + rng.IntN(2*int(l.Requests)))
	}
	return l
}

// The window algorithms never admit more than the limit in an aligned
// window; the sliding log never more than the limit in any unit-long
// window, the other two at most twice the limit there.
func TestPropertyWindows(t *testing.T) {
	for _, a := range []Algorithm{FixedWindow, SlidingWindow, SlidingLog} {
		t.Run(a.String(), func(t *testing.T) {
			for seed := range uint64(200) {
				rng := rand.New(rand.NewPCG(seed, 1))
				l := randomLimit(rng, a)
				adm := randomRun(t, rng, l, 300)
				u := int64(l.Unit.Duration())
				perWindow := map[int64]uint64{}
				for _, x := range adm {
					perWindow[x.t-floorMod(x.t, u)] += x.hits
				}
				for w, n := range perWindow {
					if n > uint64(l.Requests) {
						t.Fatalf("seed %d %v: %d admitted in the window at %d", seed, l, n, w)
					}
				}
				bound := uint64(l.Requests)
				if a != SlidingLog {
					bound *= 2 // a window's end and the next one's start
				}
				if n, end := maxInWindow(adm, u); n > bound {
					t.Fatalf("seed %d %v: %d admitted in the unit ending at %d, bound %d", seed, l, n, end, bound)
				}
			}
		})
	}
}

// maxInWindow is the most hits admitted in any window (t-u, t] ending at
// an admission.
func maxInWindow(adm []admission, u int64) (uint64, int64) {
	var best uint64
	var end int64
	for j := range adm {
		var n uint64
		for i := j; i >= 0 && adm[i].t > adm[j].t-u; i-- {
			n += adm[i].hits
		}
		if n > best {
			best, end = n, adm[j].t
		}
	}
	return best, end
}

// The bucket algorithms never admit more than burst + elapsed/T in any
// interval, T being the time one request costs.
func TestPropertyBuckets(t *testing.T) {
	for _, a := range []Algorithm{TokenBucket, LeakyBucket} {
		t.Run(a.String(), func(t *testing.T) {
			for seed := range uint64(200) {
				rng := rand.New(rand.NewPCG(seed, 2))
				l := randomLimit(rng, a)
				adm := randomRun(t, rng, l, 300)
				u := int64(l.Unit.Duration())
				T := (u + int64(l.Requests) - 1) / int64(l.Requests)
				for i := range adm {
					var n uint64
					for j := i; j < len(adm); j++ {
						n += adm[j].hits
						if bound := uint64(l.Burst) + uint64((adm[j].t-adm[i].t)/T); n > bound {
							t.Fatalf("seed %d %v: %d admitted in [%d, %d], bound %d", seed, l, n, adm[i].t, adm[j].t, bound)
						}
					}
				}
			}
		})
	}
}

// Under a steady demand above the limit, every algorithm admits close to
// the limit over time (no starvation, no drift).
func TestPropertyThroughput(t *testing.T) {
	for _, a := range []Algorithm{FixedWindow, SlidingWindow, SlidingLog, TokenBucket, LeakyBucket} {
		t.Run(a.String(), func(t *testing.T) {
			l := Limit{Algorithm: a, Requests: 100, Unit: Second, Burst: defaultBurst(a, 100)}
			var st State
			admitted := 0
			const units, perUnit = 50, 300 // 3x overload
			for i := range units * perUnit {
				now := t0.Add(time.Duration(i) * time.Second / perUnit)
				if Decide(&st, now, Check{Limit: l, Cap: l.Capacity(), Hits: 1}).Allowed {
					admitted++
				}
			}
			got := float64(admitted) / units
			if got < 97 || got > 100+float64(l.Burst)/units+0.1 {
				t.Errorf("%s admitted %.1f/s under 3x overload of a 100/s limit", a, got)
			}
		})
	}
}

func BenchmarkDecide(b *testing.B) {
	for _, a := range []Algorithm{FixedWindow, SlidingWindow, SlidingLog, TokenBucket, LeakyBucket} {
		b.Run(a.String(), func(b *testing.B) {
			l := Limit{Algorithm: a, Requests: 1000, Unit: Second, Burst: defaultBurst(a, 1000)}
			var st State
			now := t0
			for i := 0; b.Loop(); i++ {
				now = now.Add(500 * time.Microsecond)
				Decide(&st, now, Check{Limit: l, Cap: 1000, Hits: 1})
			}
		})
	}
}

func ExampleDecide() {
	var st State
	l := Limit{Algorithm: TokenBucket, Requests: 2, Unit: Second, Burst: 2}
	for i := range 3 {
		r := Decide(&st, t0, Check{Key: "k", Limit: l, Cap: 2, Hits: 1})
		fmt.Println(i, r.Allowed, r.Remaining, r.Reset)
	}
	// Output:
	// 0 true 1 500ms
	// 1 true 0 1s
	// 2 false 0 500ms
}
