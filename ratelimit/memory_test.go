package ratelimit

import (
	"context"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func decideOne(t *testing.T, m *Memory, now time.Time, c Check) Result {
	t.Helper()
	res, err := m.Decide(context.Background(), now, []Check{c})
	if err != nil {
		t.Fatal(err)
	}
	return res[0]
}

func TestMemoryBounded(t *testing.T) {
	m, err := NewMemory(MemoryConfig{Shards: 4, MaxKeys: 64})
	if err != nil {
		t.Fatal(err)
	}
	l := Limit{FixedWindow, 10, Hour, 0}
	for i := range 1000 {
		decideOne(t, m, t0, Check{Key: "k" + strconv.Itoa(i), Limit: l, Cap: 10, Hits: 1})
	}
	if n := m.Len(); n > 64 {
		t.Errorf("%d keys held, want at most 64", n)
	}
}

// A full shard drops expired keys before live ones.
func TestMemoryEvictsExpiredFirst(t *testing.T) {
	m, err := NewMemory(MemoryConfig{Shards: 1, MaxKeys: 4})
	if err != nil {
		t.Fatal(err)
	}
	hour := Limit{FixedWindow, 10, Hour, 0}
	sec := Limit{FixedWindow, 10, Second, 0}
	decideOne(t, m, t0, Check{Key: "long", Limit: hour, Cap: 10, Hits: 5})
	for i := range 3 {
		decideOne(t, m, t0, Check{Key: "short" + strconv.Itoa(i), Limit: sec, Cap: 10, Hits: 1})
	}
	later := t0.Add(2 * time.Second)
	for i := range 3 {
		decideOne(t, m, later, Check{Key: "new" + strconv.Itoa(i), Limit: sec, Cap: 10, Hits: 1})
	}
	if r := decideOne(t, m, later, Check{Key: "long", Limit: hour, Cap: 10}); r.Remaining != 5 {
		t.Errorf("the live key was evicted: remaining %d, want 5", r.Remaining)
	}
	if n := m.Len(); n > 4 {
		t.Errorf("%d keys held, want at most 4", n)
	}
}

func TestMemoryLooksDoNotInsert(t *testing.T) {
	m, _ := NewMemory(MemoryConfig{})
	decideOne(t, m, t0, Check{Key: "k", Limit: Limit{FixedWindow, 1, Second, 0}, Cap: 1})
	if n := m.Len(); n != 0 {
		t.Errorf("a look inserted %d keys", n)
	}
}

func TestMemoryConfigValidate(t *testing.T) {
	for name, tc := range map[string]struct {
		cfg  MemoryConfig
		want string
	}{
		"defaults":          {MemoryConfig{}, ""},
		"explicit":          {MemoryConfig{Shards: 8, MaxKeys: 100}, ""},
		"not a power of 2":  {MemoryConfig{Shards: 6}, "shards 6 is not a power of two"},
		"negative shards":   {MemoryConfig{Shards: -1}, "shards -1"},
		"too many shards":   {MemoryConfig{Shards: 1 << 17}, "not a power of two in [1, 65536]"},
		"fewer keys":        {MemoryConfig{Shards: 8, MaxKeys: 4}, "max keys 4 is below the shards 8"},
		"negative max keys": {MemoryConfig{MaxKeys: -1}, "max keys -1"},
		"too few bytes":     {MemoryConfig{Shards: 4, MaxBytes: 1000}, "max bytes 1000 is below 65536"},
		"negative sweep":    {MemoryConfig{SweepInterval: -1}, "sweep interval -1ns is negative"},
	} {
		t.Run(name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if tc.want == "" {
				if err != nil {
					t.Errorf("Validate() = %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate() = %v, want an error containing %q", err, tc.want)
			}
			if _, err := NewMemory(tc.cfg); err == nil {
				t.Error("NewMemory accepted the config")
			}
		})
	}
}

func TestOverLimitCache(t *testing.T) {
	c := newOverLimitCache(overLimitShards) // one key per shard
	l := Limit{FixedWindow, 10, Second, 0}
	now := t0.UnixNano()
	if _, ok := c.get("a", l, now); ok {
		t.Fatal("hit in an empty cache")
	}
	c.put("a", l, now+int64(time.Second), now)
	if d, ok := c.get("a", l, now+int64(400*time.Millisecond)); !ok || d != 600*time.Millisecond {
		t.Errorf("get = %v, %v; want 600ms, true", d, ok)
	}
	if _, ok := c.get("a", Limit{FixedWindow, 20, Second, 0}, now); ok {
		t.Error("hit for another limit")
	}
	if _, ok := c.get("a", l, now+int64(time.Second)); ok {
		t.Error("hit after the entry expired")
	}
	if n := c.size.Load(); n != 0 {
		t.Errorf("size %d after expiry, want 0", n)
	}
	for i := range 100 {
		c.put("k"+strconv.Itoa(i), l, now+int64(time.Second), now)
	}
	if n := c.size.Load(); n > overLimitShards {
		t.Errorf("size %d, want at most %d", n, overLimitShards)
	}
	c.clear()
	if n := c.size.Load(); n != 0 {
		t.Errorf("size %d after clear", n)
	}
}

// A full shard forgets its coldest keys (under half their limit) to make
// room for new ones, and folds its hot ones into the sketch: a hot key
// keeps its usage (or more, never less), and new keys are counted exactly.
func TestMemoryFullEvictsColdKeepsHot(t *testing.T) {
	m, err := NewMemory(MemoryConfig{Shards: 1, MaxKeys: 4})
	if err != nil {
		t.Fatal(err)
	}
	hour := Limit{FixedWindow, 10, Hour, 0}
	for i := range 4 {
		decideOne(t, m, t0, Check{Key: "live" + strconv.Itoa(i), Limit: hour, Cap: 10, Hits: uint32(i + 5)})
	}
	exact := 0
	for i := range 100 {
		r := decideOne(t, m, t0, Check{Key: "new" + strconv.Itoa(i), Limit: hour, Cap: 10, Hits: 1})
		if !r.Allowed {
			t.Fatalf("new%d: %+v, want admitted", i, r)
		}
		if r.Remaining == 9 {
			exact++
		}
	}
	// A new key whose two cells (of 64) both hold a folded live key's
	// usage starts from it: rare, and never refused here.
	if exact < 80 {
		t.Errorf("%d of 100 new keys counted exactly, want at least 80", exact)
	}
	for i := range 4 {
		if r := decideOne(t, m, t0, Check{Key: "live" + strconv.Itoa(i), Limit: hour, Cap: 10}); r.Remaining > uint32(10-i-5) {
			t.Errorf("live%d: remaining %d, want at most %d", i, r.Remaining, 10-i-5)
		}
	}
	if n := m.Len(); n > 4 {
		t.Errorf("%d keys held, want at most 4", n)
	}
	st := memStatsOf(m)
	if st.evictedCold == 0 || st.evictedHot == 0 {
		t.Errorf("evictions %+v, want cold and hot ones", st)
	}
	// Once the keys expire, new keys start afresh.
	later := t0.Add(2 * time.Hour)
	decideOne(t, m, later, Check{Key: "fresh", Limit: hour, Cap: 10, Hits: 3})
	if r := decideOne(t, m, later, Check{Key: "fresh", Limit: hour, Cap: 10}); r.Remaining != 7 {
		t.Errorf("fresh key after expiry: remaining %d, want 7", r.Remaining)
	}
	if r := decideOne(t, m, later, Check{Key: "live3", Limit: hour, Cap: 10, Hits: 10}); !r.Allowed {
		t.Errorf("live3 in a new window: %+v, want admitted", r)
	}
}

// Keys that are hot whenever evicted are never admitted beyond their
// limit, however often they go through the sketch, in a store far too
// small for them (and a sketch of colliding cells).
func TestMemoryHotKeysNeverBeyondLimit(t *testing.T) {
	for _, l := range []Limit{{FixedWindow, 10, Hour, 0}, {SlidingWindow, 10, Hour, 0},
		{SlidingLog, 10, Hour, 0}, {TokenBucket, 10, Hour, 10}} {
		t.Run(l.Algorithm.String(), func(t *testing.T) {
			m, err := NewMemory(MemoryConfig{Shards: 1, MaxKeys: 8})
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(1, uint64(l.Algorithm)))
			admitted := map[int]uint32{}
			for range 20_000 {
				k := rng.IntN(300)
				hits := uint32(1)
				if _, seen := admitted[k]; !seen {
					hits = 5 // hot from its first decision
				}
				r := decideOne(t, m, t0, Check{Key: "k" + strconv.Itoa(k), Limit: l, Cap: 10, Hits: hits})
				if r.Allowed {
					admitted[k] += hits
				} else if _, seen := admitted[k]; !seen {
					admitted[k] = 0
				}
				if admitted[k] > 10 {
					t.Fatalf("key %d admitted %d hits, want at most 10", k, admitted[k])
				}
			}
			if st := memStatsOf(m); st.evictedHot == 0 {
				t.Errorf("evictions %+v, want hot ones", st)
			}
		})
	}
}

// memStatsOf sums the shards' counters.
func memStatsOf(m *Memory) memStats {
	var st memStats
	for i := range m.shards {
		sh := &m.shards[i]
		sh.mu.Lock()
		st.evictedFull += sh.stats.evictedFull
		st.evictedCold += sh.stats.evictedCold
		st.evictedHot += sh.stats.evictedHot
		st.overflowed += sh.stats.overflowed
		sh.mu.Unlock()
	}
	return st
}

// Sweep drops every expired key, and only those; the background sweep
// runs until Close; the metrics follow.
func TestMemorySweepAndMetrics(t *testing.T) {
	m, err := NewMemory(MemoryConfig{Shards: 4, SweepInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	sec, hour := Limit{FixedWindow, 10, Second, 0}, Limit{SlidingLog, 10, Hour, 0}
	for i := range 100 {
		decideOne(t, m, t0, Check{Key: "s" + strconv.Itoa(i), Limit: sec, Cap: 10, Hits: 1})
		decideOne(t, m, t0, Check{Key: "h" + strconv.Itoa(i), Limit: hour, Cap: 10, Hits: 2})
	}
	bytes := m.Bytes()
	if want := int64(100*(memEntryOverhead+2)+100*(memEntryOverhead+2)) + 100*16; bytes < want {
		t.Errorf("%d bytes accounted, want at least %d (keys, entries, logs)", bytes, want)
	}
	if n := m.Sweep(t0.Add(500 * time.Millisecond)); n != 0 {
		t.Errorf("swept %d keys before any expired", n)
	}
	if n := m.Sweep(t0.Add(2 * time.Second)); n != 100 {
		t.Errorf("swept %d keys, want the 100 expired", n)
	}
	if n := m.Len(); n != 100 {
		t.Errorf("%d keys left, want 100", n)
	}
	if b := m.Bytes(); b >= bytes || b <= 0 {
		t.Errorf("%d bytes after the sweep, was %d", b, bytes)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	want := `
# HELP ratelimit_memory_evictions_total Keys dropped by the memory store, by reason: full (expired, to make room for a new key), sweep (expired, by the background sweep), cold (holding under half its limit, forgotten to make room for a new key) or hot (holding at least half its limit, folded into the store's sketch to make room).
# TYPE ratelimit_memory_evictions_total counter
ratelimit_memory_evictions_total{reason="cold"} 0
ratelimit_memory_evictions_total{reason="full"} 0
ratelimit_memory_evictions_total{reason="hot"} 0
ratelimit_memory_evictions_total{reason="sweep"} 100
# HELP ratelimit_memory_keys Keys held by the memory store (bounded by ratelimit.memory.max_keys).
# TYPE ratelimit_memory_keys gauge
ratelimit_memory_keys 100
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "ratelimit_memory_keys", "ratelimit_memory_evictions_total"); err != nil {
		t.Error(err)
	}
}

// The same across windows: fixed-window keys, hot whenever evicted, over
// three hours, never get more than their limit in any window, though the
// sketch holds states of several windows.
func TestMemoryHotKeysNeverBeyondLimitAcrossWindows(t *testing.T) {
	m, err := NewMemory(MemoryConfig{Shards: 1, MaxKeys: 8})
	if err != nil {
		t.Fatal(err)
	}
	l := Limit{FixedWindow, 10, Hour, 0}
	rng := rand.New(rand.NewPCG(2, 3))
	type kw struct{ key, window int64 }
	admitted := map[kw]uint32{}
	now := t0
	for range 20_000 {
		now = now.Add(time.Duration(rng.IntN(1000)) * time.Millisecond)
		k := int64(rng.IntN(300))
		w := now.Unix() / 3600
		hits := uint32(1)
		if _, seen := admitted[kw{k, w}]; !seen {
			hits = 5
		}
		if decideOne(t, m, now, Check{Key: "k" + strconv.FormatInt(k, 10), Limit: l, Cap: 10, Hits: hits}).Allowed {
			admitted[kw{k, w}] += hits
		} else if _, seen := admitted[kw{k, w}]; !seen {
			admitted[kw{k, w}] = 0
		}
		if n := admitted[kw{k, w}]; n > 10 {
			t.Fatalf("key %d admitted %d hits in window %d, want at most 10", k, n, w)
		}
	}
	if now.Sub(t0) < 2*time.Hour {
		t.Fatalf("the test spans %v, want several windows", now.Sub(t0))
	}
	if st := memStatsOf(m); st.evictedHot == 0 {
		t.Errorf("evictions %+v, want hot ones", st)
	}
}
