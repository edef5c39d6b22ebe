package ratelimit

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// runStoreSuite checks a Store implementation: the algorithm tables, the
// batch semantics, atomicity under concurrency, and the conformance
// fixtures through the service. newStore returns a store with no keys
// (e.g. a fresh Redis database or key prefix) and registers its cleanup.
func runStoreSuite(t *testing.T, newStore func(t *testing.T) Store) {
	t.Run("algorithms", func(t *testing.T) {
		for name, tc := range algorithmCases {
			t.Run(name, func(t *testing.T) {
				runSteps(t, storeDecider(t, newStore(t)), tc.limit, tc.steps)
			})
		}
	})
	t.Run("batch", func(t *testing.T) { testStoreBatch(t, newStore(t)) })
	t.Run("checks do not count", func(t *testing.T) { testStoreChecks(t, newStore(t)) })
	t.Run("concurrent", func(t *testing.T) { testStoreConcurrent(t, newStore(t)) })
	t.Run("conformance", func(t *testing.T) { runConformance(t, newStore) })
}

func storeDecider(t *testing.T, st Store) func(time.Time, Check) Result {
	return func(now time.Time, c Check) Result {
		t.Helper()
		res, err := st.Decide(context.Background(), now, []Check{c})
		if err != nil || len(res) != 1 {
			t.Fatalf("Decide: %v, %d results", err, len(res))
		}
		return res[0]
	}
}

// One call decides its checks in order, each on its own key and
// algorithm; a refused check does not undo the others.
func testStoreBatch(t *testing.T, st Store) {
	fixed := Limit{FixedWindow, 2, Minute, 0}
	bucket := Limit{TokenBucket, 1, Second, 2}
	checks := []Check{
		{Key: "b_a_", Limit: fixed, Cap: 2, Hits: 1},
		{Key: "b_a_", Limit: fixed, Cap: 2, Hits: 1},
		{Key: "b_a_", Limit: fixed, Cap: 2, Hits: 1},
		{Key: "b_b_", Limit: bucket, Cap: 2, Hits: 2},
		{Key: "b_c_", Limit: fixed, Cap: 2, Hits: 1},
	}
	res, err := st.Decide(context.Background(), t0, checks)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		allowed   bool
		remaining uint32
	}{{true, 1}, {true, 0}, {false, 0}, {true, 0}, {true, 1}}
	if len(res) != len(want) {
		t.Fatalf("%d results, want %d", len(res), len(want))
	}
	for i, w := range want {
		if res[i].Allowed != w.allowed || res[i].Remaining != w.remaining {
			t.Errorf("check %d: allowed=%v remaining=%d, want %v %d", i, res[i].Allowed, res[i].Remaining, w.allowed, w.remaining)
		}
	}
}

// A check of zero hits changes nothing, for every algorithm.
func testStoreChecks(t *testing.T, st Store) {
	for _, a := range []Algorithm{FixedWindow, SlidingWindow, SlidingLog, TokenBucket, LeakyBucket} {
		l := Limit{Algorithm: a, Requests: 2, Unit: Minute, Burst: 2}
		key := "c_" + a.String() + "_"
		look := Check{Key: key, Limit: l, Cap: 2}
		hit := Check{Key: key, Limit: l, Cap: 2, Hits: 2}
		res, err := st.Decide(context.Background(), t0, []Check{look, look, look, hit, look})
		if err != nil {
			t.Fatal(err)
		}
		if !res[2].Allowed || res[2].Remaining != 2 || !res[3].Allowed || res[4].Remaining != 0 {
			t.Errorf("%s: looks changed the usage: %+v", a, res)
		}
	}
}

// Concurrent callers on one key are admitted exactly up to the limit.
func testStoreConcurrent(t *testing.T, st Store) {
	for _, a := range []Algorithm{FixedWindow, SlidingWindow, SlidingLog, TokenBucket, LeakyBucket} {
		t.Run(a.String(), func(t *testing.T) {
			const limit, workers, each = 100, 8, 50
			l := Limit{Algorithm: a, Requests: limit, Unit: Hour, Burst: limit}
			var admitted atomic.Int64
			var wg sync.WaitGroup
			for range workers {
				wg.Go(func() {
					for range each {
						c := Check{Key: "conc_" + a.String() + "_", Limit: l, Cap: limit, Hits: 1}
						res, err := st.Decide(context.Background(), t0, []Check{c})
						if err != nil {
							t.Error(err)
							return
						}
						if res[0].Allowed {
							admitted.Add(1)
						}
					}
				})
			}
			wg.Wait()
			if n := admitted.Load(); n != limit {
				t.Errorf("%d of %d admitted, want exactly %d", n, workers*each, limit)
			}
		})
	}
}

func TestMemoryStoreSuite(t *testing.T) {
	runStoreSuite(t, func(t *testing.T) Store {
		m, err := NewMemory(MemoryConfig{Shards: 4, MaxKeys: 1024})
		if err != nil {
			t.Fatal(err)
		}
		return m
	})
}

func ExampleMemory() {
	m, _ := NewMemory(MemoryConfig{})
	l := Limit{Algorithm: FixedWindow, Requests: 2, Unit: Minute}
	for range 3 {
		res, _ := m.Decide(context.Background(), t0, []Check{{Key: "d_user_u1_", Limit: l, Cap: 2, Hits: 1}})
		fmt.Println(res[0].Allowed, res[0].Remaining, res[0].Reset)
	}
	// Output:
	// true 1 1m0s
	// true 0 1m0s
	// false 0 1m0s
}
