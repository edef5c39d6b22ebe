package ratelimit

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rlcommonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"

	"github.com/xds-server/xds-server/e2e/harness"
)

const redisServiceYAML = `
domain: d
descriptors:
  - key: k
    rate_limit: {unit: hour, requests_per_unit: 2}
`

// newRedisService is a service (fake clock) over a Redis store on srv.
func newRedisService(t *testing.T, srv *harness.RedisServer, yaml string, mod func(*ServiceConfig)) *testService {
	t.Helper()
	st := newRedisStore(t, srv, RedisConfig{KeyPrefix: "svc:"})
	return newTestService(t, yaml, func(c *ServiceConfig) {
		c.Store = st
		if mod != nil {
			mod(c)
		}
	})
}

// Redis killed mid-test: the failure mode answers, quickly, with a
// metric and a log line; Redis back on the same port: decisions are
// enforced again, without touching the service.
func TestRedisOutageAndRecovery(t *testing.T) {
	for _, mode := range []FailureMode{FailOpen, FailClosed} {
		t.Run(mode.String(), func(t *testing.T) {
			srv := harness.Redis(t, harness.RedisOptions{})
			ts := newRedisService(t, srv, redisServiceYAML, func(c *ServiceConfig) { c.FailureMode = mode })
			code := func(v string) rlsv3.RateLimitResponse_Code { return ts.call(t, request("d", "k="+v)).OverallCode }
			enforced := func(v string) {
				t.Helper()
				for i, want := range []rlsv3.RateLimitResponse_Code{rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT} {
					if got := code(v); got != want {
						t.Fatalf("k=%s, request %d: %v, want %v", v, i+1, got, want)
					}
				}
			}
			enforced("before")

			srv.Stop()
			want := rlsv3.RateLimitResponse_OK
			if mode == FailClosed {
				want = rlsv3.RateLimitResponse_OVER_LIMIT
			}
			start := time.Now()
			const down = 50 // more than the limit, and than the pool's size: its dials back off
			for i := range down {
				if got := code("during"); got != want {
					t.Fatalf("Redis down, request %d: %v, want %v", i+1, got, want)
				}
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("%d requests took %v with Redis down", down, d)
			}
			if n := ts.counter(t, "ratelimit_store_errors_total"); n != down {
				t.Errorf("store errors %v, want %d", n, down)
			}
			if n := ts.counter(t, "ratelimit_failure_mode_total", "mode", mode.String()); n != down {
				t.Errorf("failure mode answers %v, want %d", n, down)
			}
			if logs := ts.logs.String(); !containsAll(logs, "rate-limit store failed", "failure_mode="+mode.String()) {
				t.Errorf("no store error log line:\n%s", logs)
			}

			srv.Start()
			// The pool redials on demand (at most a second after its
			// dial failures): poll until a call gets the store's answer.
			deadline := time.Now().Add(15 * time.Second)
			for i := 0; ; i++ {
				errs := ts.counter(t, "ratelimit_store_errors_total")
				code("probe" + strconv.Itoa(i))
				if ts.counter(t, "ratelimit_store_errors_total") == errs {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("decisions did not recover within 15s of Redis coming back")
				}
				time.Sleep(20 * time.Millisecond) // the probe is the observation; no event to await
			}
			enforced("after")
		})
	}
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// Two services (replicas) sharing one Redis, under concurrent load,
// admit one global limit.
func TestRedisReplicasShareOneLimit(t *testing.T) {
	const limit, workers, each = 1000, 4, 500 // 2 replicas x 4 x 500 = 4x the limit
	yaml := "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: " + strconv.Itoa(limit) + "}\n"
	srv := harness.Redis(t, harness.RedisOptions{})
	replicas := []*testService{newRedisService(t, srv, yaml, nil), newRedisService(t, srv, yaml, nil)}
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for _, ts := range replicas {
		for range workers {
			wg.Go(func() {
				for range each {
					resp, err := ts.ShouldRateLimit(context.Background(), request("d", "k=shared"))
					if err != nil {
						t.Error(err)
						return
					}
					if resp.OverallCode == rlsv3.RateLimitResponse_OK {
						admitted.Add(1)
					}
				}
			})
		}
	}
	wg.Wait()
	n := admitted.Load()
	if n < limit*99/100 || n > limit*101/100 {
		t.Errorf("%d of %d requests admitted by 2 replicas, want %d within 1%%", n, 2*workers*each, limit)
	}
	t.Logf("%d of %d requests admitted, limit %d", n, 2*workers*each, limit)
}

// Requests of more descriptors (and entries) than a plan, a Redis call
// and a response have inline room for get the same answers from both
// stores, descriptor by descriptor.
func TestManyDescriptorsBothStores(t *testing.T) {
	const yaml = `
domain: d
descriptors:
  - key: k
    rate_limit: {unit: hour, requests_per_unit: 3}
  - key: a
    descriptors:
      - key: b
        descriptors:
          - key: c
            descriptors:
              - key: e
                rate_limit: {unit: hour, requests_per_unit: 1}
`
	// k=x appears three times: its hits add up within the request.
	req := request("d", "k=x", "k=y", "a=1,b=2,c=3,e=4", "k=x", "nomatch=1", "k=x", "a=1,b=2,c=3,e=4")
	if len(req.Descriptors) <= inlineDescriptors {
		t.Fatalf("%d descriptors: the test needs more than %d", len(req.Descriptors), inlineDescriptors)
	}
	type status struct {
		code      rlsv3.RateLimitResponse_Code
		remaining uint32
	}
	ok, over := rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT
	want := [][]status{
		{{ok, 2}, {ok, 2}, {ok, 0}, {ok, 1}, {ok, 0}, {ok, 0}, {over, 0}},
		{{over, 0}, {ok, 1}, {over, 0}, {over, 0}, {ok, 0}, {over, 0}, {over, 0}},
	}
	srv := harness.Redis(t, harness.RedisOptions{})
	for name, ts := range map[string]*testService{"memory": newTestService(t, yaml, nil), "redis": newRedisService(t, srv, yaml, nil)} {
		for call, w := range want {
			resp := ts.call(t, req)
			var got []status
			for _, st := range resp.Statuses {
				got = append(got, status{st.Code, st.LimitRemaining})
			}
			if !slices.Equal(got, w) {
				t.Errorf("%s, call %d: statuses %v, want %v", name, call+1, got, w)
			}
			if resp.OverallCode != over {
				t.Errorf("%s, call %d: overall %v, want OVER_LIMIT", name, call+1, resp.OverallCode)
			}
		}
	}
}

// A rule and a request's override on one descriptor count apart, in both
// stores: alternating them, each refuses only past its own limit.
func TestOverrideAndRuleCountApart(t *testing.T) {
	const yaml = "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 2}\n"
	rule := request("d", "k=x")
	override := request("d", "k=x")
	override.Descriptors[0].Limit = &rlcommonv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1, Unit: typev3.RateLimitUnit_HOUR}
	ok, over := rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT
	steps := []struct {
		req  *rlsv3.RateLimitRequest
		want rlsv3.RateLimitResponse_Code
	}{{rule, ok}, {override, ok}, {rule, ok}, {override, over}, {rule, over}, {override, over}}
	srv := harness.Redis(t, harness.RedisOptions{})
	for name, ts := range map[string]*testService{"memory": newTestService(t, yaml, nil), "redis": newRedisService(t, srv, yaml, nil)} {
		ts.clock.Set(fixtureStart.Add(90 * time.Second)) // the minute and the hour windows start apart
		for i, s := range steps {
			if got := ts.call(t, s.req).OverallCode; got != s.want {
				t.Errorf("%s, step %d: %v, want %v", name, i+1, got, s.want)
			}
		}
	}
}

// Two replicas sharing one Redis, each with half of a 2x overload of an
// equal mix of classes: each scales the demand it sees by its share of
// the usage, so together they keep the reserve CRITICAL_PLUS needs.
func TestCriticalityAcrossReplicas(t *testing.T) {
	const yaml = "domain: d\ndescriptors:\n  - key: api\n    rate_limit: {unit: second, requests_per_unit: 1000}\n"
	srv := harness.Redis(t, harness.RedisOptions{})
	replicas := []*testService{newRedisService(t, srv, yaml, nil), newRedisService(t, srv, yaml, nil)}
	classes := [4]string{"CRITICAL_PLUS", "CRITICAL", "SHEDDABLE_PLUS", "SHEDDABLE"}
	const seconds, rate = 4, 2000
	var sent, admitted [4]int
	for i := range seconds * rate {
		at := fixtureStart.Add(time.Duration(i) * time.Second / rate)
		ts := replicas[i%2]
		ts.clock.Set(at)
		c := (i / 2) % 4 // each replica sees every class
		sent[c]++
		if ts.call(t, request("d", "api=x,criticality="+classes[c])).OverallCode == rlsv3.RateLimitResponse_OK {
			admitted[c]++
		}
	}
	checkShedding(t, sent, admitted, seconds, 0.9)
}

// Regression (issue 14): a hung Redis (SIGSTOP: connections accepted,
// nothing answered) made every decision wait twice the timeout, and
// throughput fell to a few dozen decisions/s. Now, from many callers at
// once, each decision returns within about the timeout; after
// breaker_failures timed-out runs the breaker opens and decisions get the
// failure mode at once; after SIGCONT a probe closes it and limits are
// enforced again.
func TestRedisHungBreaker(t *testing.T) {
	const timeout = 300 * time.Millisecond
	srv := harness.Redis(t, harness.RedisOptions{})
	st := newRedisStore(t, srv, RedisConfig{KeyPrefix: "hung:", Timeout: timeout, BreakerFailures: 3, BreakerBackoff: 200 * time.Millisecond})
	ts := newTestService(t, redisServiceYAML, func(c *ServiceConfig) { c.Store = st })
	code := func(v string) rlsv3.RateLimitResponse_Code { return ts.call(t, request("d", "k="+v)).OverallCode }
	if code("x") != rlsv3.RateLimitResponse_OK || code("x") != rlsv3.RateLimitResponse_OK || code("x") != rlsv3.RateLimitResponse_OVER_LIMIT {
		t.Fatal("limit not enforced before the hang")
	}

	srv.Pause()
	t.Cleanup(srv.Resume) // before the harness's Stop
	var wg sync.WaitGroup
	var slowest atomic.Int64
	const callers, each = 16, 4
	for c := range callers {
		wg.Go(func() {
			for i := range each {
				start := time.Now()
				resp, err := ts.ShouldRateLimit(context.Background(), request("d", "k=c"+strconv.Itoa(c)+"_"+strconv.Itoa(i)))
				d := time.Since(start)
				for old := slowest.Load(); d > time.Duration(old) && !slowest.CompareAndSwap(old, int64(d)); old = slowest.Load() {
				}
				if err != nil || resp.OverallCode != rlsv3.RateLimitResponse_OK {
					t.Errorf("hung Redis, fail open: %v, %v", resp, err)
				}
			}
		})
	}
	wg.Wait()
	if d := time.Duration(slowest.Load()); d > timeout*3/2 {
		t.Errorf("slowest decision with a hung Redis %v, want at most about the %v timeout (it was twice)", d, timeout)
	}
	if got := ts.counter(t, "ratelimit_redis_breaker_trips_total"); got != 1 {
		t.Errorf("breaker trips %v, want 1", got)
	}
	if got := ts.counter(t, "ratelimit_redis_breaker_state"); got != float64(breakerOpen) && got != float64(breakerHalfOpen) {
		t.Errorf("breaker state %v, want open", got)
	}
	if got := ts.counter(t, "ratelimit_redis_breaker_rejected_total"); got == 0 {
		t.Error("no decision failed fast on the open breaker")
	}
	if got := ts.counter(t, "ratelimit_store_errors_total"); got != callers*each {
		t.Errorf("store errors %v, want %d", got, callers*each)
	}

	srv.Resume()
	// The breaker lets a probe through every backoff (doubling while
	// probes fail): poll until one is decided by Redis.
	deadline := time.Now().Add(15 * time.Second)
	for i := 0; ts.counter(t, "ratelimit_redis_breaker_state") != float64(breakerClosed); i++ {
		if time.Now().After(deadline) {
			t.Fatal("the breaker did not close within 15s of SIGCONT")
		}
		code("probe" + strconv.Itoa(i))
		time.Sleep(10 * time.Millisecond) // the probe is the observation; no event to await
	}
	if code("y") != rlsv3.RateLimitResponse_OK || code("y") != rlsv3.RateLimitResponse_OK || code("y") != rlsv3.RateLimitResponse_OVER_LIMIT {
		t.Error("limit not enforced after the breaker closed")
	}
	if code("x") != rlsv3.RateLimitResponse_OVER_LIMIT {
		t.Error("usage from before the hang lost")
	}
	if got := ts.counter(t, "ratelimit_redis_breaker_trips_total"); got != 1 {
		t.Errorf("breaker trips %v after recovery, want 1", got)
	}
}
