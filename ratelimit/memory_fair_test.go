package ratelimit

import (
	"strconv"
	"testing"
	"time"
)

// floodFairness floods m with flood distinct keys (one hit each of l),
// then asks the first hit of fresh brand-new keys and returns the share
// of them refused.
func floodFairness(t testing.TB, m *Memory, l Limit, flood, fresh int) float64 {
	now := t0
	for i := range flood {
		decideTB(t, m, now, Check{Key: "flood_" + strconv.Itoa(i) + "_", Limit: l, Cap: l.Capacity(), Hits: 1})
	}
	refused := 0
	if fresh == 0 {
		return 0
	}
	for i := range fresh {
		if !decideTB(t, m, now, Check{Key: "new_user_" + strconv.Itoa(i) + "_", Limit: l, Cap: l.Capacity(), Hits: 1}).Allowed {
			refused++
		}
	}
	return float64(refused) / float64(fresh)
}

func decideTB(t testing.TB, m *Memory, now time.Time, c Check) Result {
	res, err := m.Decide(t.Context(), now, []Check{c})
	if err != nil {
		t.Fatal(err)
	}
	return res[0]
}

// Regression (issue 24, item 3): with the store full of hour-window keys,
// new keys were counted in shared overflow counters, and after a flood of
// ten times the store's keys 62% of brand-new users were refused their
// first request. Now the flood's cold keys make room for the new ones: no
// brand-new key is refused, the store stays within its bound, and a key
// near its limit keeps its usage through the flood.
func TestMemoryFloodNewKeysFair(t *testing.T) {
	const maxKeys = 4000
	for name, l := range map[string]Limit{
		"fixed window 10/hour":   {FixedWindow, 10, Hour, 0},
		"sliding window 10/hour": {SlidingWindow, 10, Hour, 0},
		"token bucket 10/hour":   {TokenBucket, 10, Hour, 10},
	} {
		t.Run(name, func(t *testing.T) {
			m, err := NewMemory(MemoryConfig{Shards: 4, MaxKeys: maxKeys})
			if err != nil {
				t.Fatal(err)
			}
			victim := Check{Key: "victim_", Limit: l, Cap: 10, Hits: 9}
			decideTB(t, m, t0, victim)
			rate := floodFairness(t, m, l, 11*maxKeys, 2000)
			t.Logf("%s: %.1f%% of 2000 brand-new keys refused their first hit after a flood of %d keys; %d keys held",
				name, 100*rate, 11*maxKeys, m.Len())
			if rate > 0.01 {
				t.Errorf("%.1f%% of brand-new keys refused their first hit, want at most 1%%", 100*rate)
			}
			if n := m.Len(); n > maxKeys {
				t.Errorf("%d keys held, want at most %d", n, maxKeys)
			}
			victim.Hits = 2
			if r := decideTB(t, m, t0, victim); r.Allowed {
				t.Errorf("the victim at 9/10 was admitted 2 more hits after the flood: %+v", r)
			}
		})
	}
}

// BenchmarkMemoryFlood is the memory store under a key flood: full of
// keys of one hit of 10 per hour, each op is the first hit of a new key
// (every one needs room). It reports the decisions per second and the
// share of those first hits refused.
func BenchmarkMemoryFlood(b *testing.B) {
	const maxKeys = 1 << 16
	m, err := NewMemory(MemoryConfig{MaxKeys: maxKeys})
	if err != nil {
		b.Fatal(err)
	}
	l := Limit{FixedWindow, 10, Hour, 0}
	floodFairness(b, m, l, 4*maxKeys, 0)
	refused := 0
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if !decideTB(b, m, t0, Check{Key: "bench_new_" + strconv.Itoa(i) + "_", Limit: l, Cap: 10, Hits: 1}).Allowed {
			refused++
		}
	}
	reportDecisions(b, 1)
	b.ReportMetric(float64(refused)/float64(b.N), "refused/op")
}
