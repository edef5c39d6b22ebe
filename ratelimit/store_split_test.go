package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/xds-server/xds-server/e2e/harness"
)

// The store suite on a Split over two Redis servers.
func TestSplitStoreSuite(t *testing.T) {
	main, sec := harness.Redis(t, harness.RedisOptions{}), harness.Redis(t, harness.RedisOptions{})
	runStoreSuite(t, func(t *testing.T) Store {
		return NewSplit(newRedisStore(t, main, RedisConfig{}), newRedisStore(t, sec, RedisConfig{}))
	})
}

// Checks per second land only in the per-second Redis, every other unit
// only in the main one, and the answers are the memory store's.
func TestSplitRoutesByUnit(t *testing.T) {
	main, sec := harness.Redis(t, harness.RedisOptions{}), harness.Redis(t, harness.RedisOptions{})
	split := NewSplit(newRedisStore(t, main, RedisConfig{}), newRedisStore(t, sec, RedisConfig{}))
	mem, err := NewMemory(MemoryConfig{Shards: 4, MaxKeys: 1024})
	if err != nil {
		t.Fatal(err)
	}
	var checks []Check
	perSecond := 0
	for _, a := range []Algorithm{FixedWindow, SlidingWindow, SlidingLog, TokenBucket, LeakyBucket} {
		for _, u := range []Unit{Second, Minute, Hour, Day} {
			l := Limit{Algorithm: a, Requests: 3, Unit: u, Burst: 3}
			checks = append(checks, Check{Key: fmt.Sprintf("r_%s_%s_", a, u), Limit: l, Cap: 3, Hits: 1})
			if u == Second {
				perSecond++
			}
		}
	}
	ctx := context.Background()
	for step := range 6 { // past the limits, across second boundaries
		now := t0.Add(time.Duration(step) * 300 * time.Millisecond)
		got, err := split.Decide(ctx, now, checks)
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		want, _ := mem.Decide(ctx, now, checks)
		for i := range checks {
			if got[i] != want[i] {
				t.Errorf("step %d, %s: split %+v, memory %+v", step, checks[i].Key, got[i], want[i])
			}
		}
	}
	// DBSIZE: a key per check, plus the second window of the fixed
	// window per second (the steps span 1.5s); names: each on its side.
	for _, side := range []struct {
		srv       *harness.RedisServer
		keys      int64
		perSecond bool
	}{{sec, int64(perSecond) + 1, true}, {main, int64(len(checks) - perSecond), false}} {
		c := redisClient(t, side.srv)
		if n := c.DBSize(ctx).Val(); n != side.keys {
			t.Errorf("per-second %v: the Redis holds %d keys, want %d", side.perSecond, n, side.keys)
		}
		for _, k := range c.Keys(ctx, "*").Val() {
			if strings.Contains(k, "_second_") != side.perSecond {
				t.Errorf("per-second %v: key %s", side.perSecond, k)
			}
		}
	}
}

// failStore fails every call.
type failStore struct{}

func (failStore) Decide(context.Context, time.Time, []Check) ([]Result, error) {
	return nil, errors.New("down")
}

// One store failing fails only its checks (a PartialError); both
// failing fail the call.
func TestSplitPartialFailure(t *testing.T) {
	mem := func() Store {
		m, err := NewMemory(MemoryConfig{Shards: 4, MaxKeys: 1024})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	checks := []Check{
		{Key: "p_a_", Limit: Limit{FixedWindow, 2, Second, 0}, Cap: 2, Hits: 1},
		{Key: "p_b_", Limit: Limit{FixedWindow, 2, Minute, 0}, Cap: 2, Hits: 1},
		{Key: "p_c_", Limit: Limit{TokenBucket, 2, Second, 2}, Cap: 2, Hits: 1},
	}
	for name, tc := range map[string]struct {
		main, sec  Store
		wantFailed []bool // nil: the whole call fails
	}{
		"per-second store down": {mem(), failStore{}, []bool{true, false, true}},
		"main store down":       {failStore{}, mem(), []bool{false, true, false}},
		"both down":             {failStore{}, failStore{}, nil},
	} {
		t.Run(name, func(t *testing.T) {
			res, err := NewSplit(tc.main, tc.sec).Decide(context.Background(), t0, checks)
			var pe *PartialError
			if tc.wantFailed == nil {
				if err == nil || errors.As(err, &pe) {
					t.Fatalf("err %v, want a plain error", err)
				}
				return
			}
			if !errors.As(err, &pe) {
				t.Fatalf("err %v, want a PartialError", err)
			}
			for i, f := range tc.wantFailed {
				if pe.Failed[i] != f || (!f && !res[i].Allowed) {
					t.Errorf("check %d: failed %v, result %+v; want failed %v", i, pe.Failed[i], res[i], f)
				}
			}
		})
	}
}

const splitServiceYAML = `
domain: d
descriptors:
  - key: s
    rate_limit: {unit: second, requests_per_unit: 100}
  - key: h
    rate_limit: {unit: hour, requests_per_unit: 2}
`

// Through the service, with one Redis stopped: the checks of its unit
// get the failure mode, the others are still decided (and enforced).
func TestSplitServiceOneStoreDown(t *testing.T) {
	for _, tc := range []struct {
		down string
		mode FailureMode
	}{{"per_second", FailClosed}, {"main", FailClosed}, {"per_second", FailOpen}} {
		t.Run(tc.down+"/"+tc.mode.String(), func(t *testing.T) {
			main, sec := harness.Redis(t, harness.RedisOptions{}), harness.Redis(t, harness.RedisOptions{})
			split := NewSplit(newRedisStore(t, main, RedisConfig{BreakerFailures: -1}),
				newRedisStore(t, sec, RedisConfig{BreakerFailures: -1}))
			ts := newTestService(t, splitServiceYAML, func(c *ServiceConfig) {
				c.Store, c.FailureMode, c.OverLimitKeys = split, tc.mode, -1
			})
			stopped, failedAt, decidedAt := sec, 0, 1 // descriptor indexes
			if tc.down == "main" {
				stopped, failedAt, decidedAt = main, 1, 0
			}
			stopped.Stop()
			wantFailed := map[FailureMode]rlsv3.RateLimitResponse_Code{
				FailClosed: rlsv3.RateLimitResponse_OVER_LIMIT, FailOpen: rlsv3.RateLimitResponse_OK}[tc.mode]
			const n = 4
			for i := range n {
				resp := ts.call(t, request("d", "s=x", "h=x"))
				if f := resp.Statuses[failedAt]; f.Code != wantFailed || f.DurationUntilReset != nil {
					t.Errorf("request %d: the stopped store's descriptor is %v (reset %v), want the failure mode's %v", i, f.Code, f.DurationUntilReset, wantFailed)
				}
				st := resp.Statuses[decidedAt]
				wantOK := decidedAt == 0 || i < 2 // per second: 100; per hour: 2
				if (st.Code == rlsv3.RateLimitResponse_OK) != wantOK || st.DurationUntilReset == nil {
					t.Errorf("request %d: the running store's descriptor is %v (reset %v), want decided, OK %v", i, st.Code, st.DurationUntilReset, wantOK)
				}
			}
			if got := ts.counter(t, "ratelimit_failure_mode_total", "mode", tc.mode.String()); got != n {
				t.Errorf("failure mode answers %v, want %d (one check per request)", got, n)
			}
			if !hasLabel(t, ts, "ratelimit_redis_breaker_state", "store", tc.down) {
				t.Errorf("no ratelimit_redis_breaker_state{store=%q}", tc.down)
			}
		})
	}
}

// hasLabel reports whether metric name has a series with label k=v.
func hasLabel(t *testing.T, ts *testService, name, k, v string) bool {
	mfs, err := ts.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if mf.GetName() == name && lp.GetName() == k && lp.GetValue() == v {
					return true
				}
			}
		}
	}
	return false
}
