package ratelimit

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	rlcommonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// flakyStore wraps a store, counting calls, and fails while failing is
// set.
type flakyStore struct {
	Store
	calls   atomic.Int64
	failing atomic.Bool
}

func (f *flakyStore) Decide(ctx context.Context, now time.Time, checks []Check) ([]Result, error) {
	f.calls.Add(1)
	if f.failing.Load() {
		return nil, errors.New("connection refused")
	}
	return f.Store.Decide(ctx, now, checks)
}

type testService struct {
	*Service
	store *flakyStore
	clock *fakeClock
	reg   *prometheus.Registry
	logs  *bytes.Buffer
}

func newTestService(t *testing.T, yaml string, mod func(*ServiceConfig)) *testService {
	t.Helper()
	mem, err := NewMemory(MemoryConfig{})
	if err != nil {
		t.Fatal(err)
	}
	ts := &testService{store: &flakyStore{Store: mem}, clock: &fakeClock{now: fixtureStart},
		reg: prometheus.NewRegistry(), logs: &bytes.Buffer{}}
	cfg := ServiceConfig{Store: ts.store, Config: mustLoad(t, yaml), Now: ts.clock.Now, Registerer: ts.reg,
		Logger: slog.New(slog.NewTextHandler(ts.logs, nil))}
	if mod != nil {
		mod(&cfg)
	}
	if ts.Service, err = NewService(cfg); err != nil {
		t.Fatal(err)
	}
	return ts
}

// request builds a request of one descriptor per entry list ("k=v,k2=v2").
func request(domain string, descriptors ...string) *rlsv3.RateLimitRequest {
	req := &rlsv3.RateLimitRequest{Domain: domain}
	for _, d := range descriptors {
		desc := &rlcommonv3.RateLimitDescriptor{}
		for kv := range strings.SplitSeq(d, ",") {
			k, v, _ := strings.Cut(kv, "=")
			desc.Entries = append(desc.Entries, &rlcommonv3.RateLimitDescriptor_Entry{Key: k, Value: v})
		}
		req.Descriptors = append(req.Descriptors, desc)
	}
	return req
}

func (ts *testService) call(t *testing.T, req *rlsv3.RateLimitRequest) *rlsv3.RateLimitResponse {
	t.Helper()
	resp, err := ts.ShouldRateLimit(context.Background(), req)
	if err != nil {
		t.Fatalf("ShouldRateLimit: %v", err)
	}
	return resp
}

// admitted sends n requests of one descriptor ("k=v,...") in domain d
// and counts the OK answers.
func (ts *testService) admitted(t *testing.T, n int, descriptor string) int {
	t.Helper()
	ok := 0
	for range n {
		if ts.call(t, request("d", descriptor)).OverallCode == rlsv3.RateLimitResponse_OK {
			ok++
		}
	}
	return ok
}

func (ts *testService) counter(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := ts.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metric:
		for _, m := range mf.GetMetric() {
			for i, lp := range m.GetLabel() {
				if 2*i+1 >= len(labels) || lp.GetName() != labels[2*i] || lp.GetValue() != labels[2*i+1] {
					continue metric
				}
			}
			if g := m.GetGauge(); g != nil {
				return g.GetValue()
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

const simpleYAML = `
domain: d
descriptors:
  - key: k
    rate_limit: {unit: second, requests_per_unit: 2}
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: detailed
    detailed_metric: true
    rate_limit: {unit: second, requests_per_unit: 10}
`

func TestServiceFailureMode(t *testing.T) {
	for name, tc := range map[string]struct {
		mode FailureMode
		want rlsv3.RateLimitResponse_Code
	}{
		"allow admits": {FailOpen, rlsv3.RateLimitResponse_OK},
		"deny refuses": {FailClosed, rlsv3.RateLimitResponse_OVER_LIMIT},
	} {
		t.Run(name, func(t *testing.T) {
			ts := newTestService(t, simpleYAML, func(c *ServiceConfig) { c.FailureMode = tc.mode })
			ts.store.failing.Store(true)
			for range 3 {
				resp := ts.call(t, request("d", "k=a", "unmatched=x"))
				if resp.OverallCode != tc.want || resp.Statuses[0].Code != tc.want || resp.Statuses[1].Code != rlsv3.RateLimitResponse_OK {
					t.Fatalf("during the outage: %v", resp)
				}
			}
			if n := ts.counter(t, "ratelimit_store_errors_total"); n != 3 {
				t.Errorf("store errors = %v, want 3", n)
			}
			if n := ts.counter(t, "ratelimit_failure_mode_total", "mode", tc.mode.String()); n != 3 {
				t.Errorf("failure mode decisions = %v, want 3", n)
			}
			if n := strings.Count(ts.logs.String(), "rate-limit store failed"); n != 1 {
				t.Errorf("%d store error log lines within the interval, want 1:\n%s", n, ts.logs)
			}
			if !strings.Contains(ts.logs.String(), "component=ratelimit") {
				t.Errorf("log line without component=ratelimit: %s", ts.logs)
			}
			ts.store.failing.Store(false) // recovery is automatic
			resp := ts.call(t, request("d", "k=a"))
			if resp.OverallCode != rlsv3.RateLimitResponse_OK || resp.Statuses[0].LimitRemaining != 1 {
				t.Errorf("after recovery: %v", resp)
			}
		})
	}
}

// Global shadow mode: limits are counted, nothing is refused, not even by
// a failing store in deny mode.
func TestServiceGlobalShadowMode(t *testing.T) {
	ts := newTestService(t, simpleYAML, func(c *ServiceConfig) { c.ShadowMode, c.FailureMode = true, FailClosed })
	for i := range 5 {
		resp := ts.call(t, request("d", "k=a"))
		if resp.OverallCode != rlsv3.RateLimitResponse_OK || resp.Statuses[0].Code != rlsv3.RateLimitResponse_OK {
			t.Fatalf("call %d in shadow mode: %v", i+1, resp)
		}
	}
	if over, shadow := ts.counter(t, "ratelimit_over_limit_total", "domain", "d", "rule", "k"), ts.counter(t, "ratelimit_shadow_mode_total", "domain", "d", "rule", "k"); over != 3 || shadow != 3 {
		t.Errorf("over_limit %v, shadow_mode %v; want 3 and 3 (limit 2, 5 calls)", over, shadow)
	}
	ts.store.failing.Store(true)
	if resp := ts.call(t, request("d", "k=b")); resp.OverallCode != rlsv3.RateLimitResponse_OK {
		t.Errorf("store failure under deny, in shadow mode: %v, want OK", resp.OverallCode)
	}
}

// envoyproxy/ratelimit's quota_mode loads and answers OK over the limit,
// counted in over_limit; unlimited may carry a requests_per_unit, ignored
// as there.
func TestServiceQuotaModeAndUnlimitedRequests(t *testing.T) {
	ts := newTestService(t, `
domain: d
descriptors:
  - key: q
    quota_mode: true
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: u
    rate_limit: {unlimited: true, requests_per_unit: 5}
`, nil)
	for i := range 3 {
		resp := ts.call(t, request("d", "q=a", "u=b"))
		if resp.OverallCode != rlsv3.RateLimitResponse_OK || resp.Statuses[1].LimitRemaining != math.MaxUint32 {
			t.Fatalf("call %d: %v", i+1, resp)
		}
	}
	if over := ts.counter(t, "ratelimit_over_limit_total", "domain", "d", "rule", "q"); over != 2 {
		t.Errorf("over_limit of the quota_mode rule = %v, want 2", over)
	}
}

// Under failure_mode deny, a shadow_mode rule still answers OK.
func TestServiceShadowRuleFailClosed(t *testing.T) {
	ts := newTestService(t, simpleYAML, func(c *ServiceConfig) { c.FailureMode = FailClosed })
	ts.store.failing.Store(true)
	resp := ts.call(t, request("d", "k=a", "shadow=s"))
	if resp.Statuses[0].Code != rlsv3.RateLimitResponse_OVER_LIMIT || resp.Statuses[1].Code != rlsv3.RateLimitResponse_OK {
		t.Errorf("store down, deny: statuses %v, want OVER_LIMIT for the rule and OK for the shadow rule", resp.Statuses)
	}
}

// A refusal from the local cache reports a fixed window's reset in whole
// seconds, as the store does.
func TestServiceOverLimitCacheReset(t *testing.T) {
	ts := newTestService(t, simpleYAML, nil)
	ts.clock.Set(fixtureStart.Add(300 * time.Millisecond))
	var fromStore, fromCache *rlsv3.RateLimitResponse
	for range 3 { // the limit is 2: the third is refused by the store
		fromStore = ts.call(t, request("d", "k=a"))
	}
	calls := ts.store.calls.Load()
	fromCache = ts.call(t, request("d", "k=a"))
	if ts.store.calls.Load() != calls {
		t.Fatal("the fourth call asked the store: no cache")
	}
	s, c := fromStore.Statuses[0].DurationUntilReset.AsDuration(), fromCache.Statuses[0].DurationUntilReset.AsDuration()
	if fromCache.OverallCode != rlsv3.RateLimitResponse_OVER_LIMIT || s != time.Second || c != s {
		t.Errorf("reset from the store %v, from the cache %v (%v); want 1s both", s, c, fromCache.OverallCode)
	}
}

// Keys known to be over their limit are refused without the store until
// their reset; a new configuration forgets them.
func TestServiceOverLimitCache(t *testing.T) {
	ts := newTestService(t, simpleYAML, nil)
	for range 3 {
		ts.call(t, request("d", "k=a"))
	}
	calls := ts.store.calls.Load()
	for range 5 {
		if resp := ts.call(t, request("d", "k=a")); resp.OverallCode != rlsv3.RateLimitResponse_OVER_LIMIT {
			t.Fatalf("cached key answered %v", resp)
		}
	}
	if n := ts.store.calls.Load() - calls; n != 0 {
		t.Errorf("%d store calls for a cached key, want 0", n)
	}
	if n := ts.counter(t, "ratelimit_over_limit_with_local_cache_total", "domain", "d", "rule", "k"); n != 5 {
		t.Errorf("over_limit_with_local_cache = %v, want 5", n)
	}
	ts.clock.Set(fixtureStart.Add(time.Second))
	if resp := ts.call(t, request("d", "k=a")); resp.OverallCode != rlsv3.RateLimitResponse_OK {
		t.Errorf("next window: %v", resp)
	}
	for range 3 {
		ts.call(t, request("d", "k=a"))
	}
	ts.SetConfig(mustLoad(t, strings.Replace(simpleYAML, "requests_per_unit: 2", "requests_per_unit: 20", 1)))
	if resp := ts.call(t, request("d", "k=a")); resp.OverallCode != rlsv3.RateLimitResponse_OK {
		t.Errorf("after raising the limit: %v", resp)
	}
}

func TestServiceMetrics(t *testing.T) {
	ts := newTestService(t, simpleYAML, func(c *ServiceConfig) { c.MaxMetricKeys = 3; c.OverLimitKeys = -1 })
	for range 3 {
		ts.call(t, request("d", "k=a", "shadow=s"))
	}
	for name, tc := range map[string]struct {
		metric, rule string
		want         float64
	}{
		"total hits":   {"ratelimit_total_hits_total", "k", 3},
		"within limit": {"ratelimit_within_limit_total", "k", 2},
		"over limit":   {"ratelimit_over_limit_total", "k", 1},
		"near limit":   {"ratelimit_near_limit_total", "k", 1}, // the second hit took 2/2 > 80%
		"shadow mode":  {"ratelimit_shadow_mode_total", "shadow", 2},
		"shadow over":  {"ratelimit_over_limit_total", "shadow", 2},
	} {
		t.Run(name, func(t *testing.T) {
			if got := ts.counter(t, tc.metric, "domain", "d", "rule", tc.rule); got != tc.want {
				t.Errorf("%s{rule=%q} = %v, want %v", tc.metric, tc.rule, got, tc.want)
			}
		})
	}
	// detailed_metric keys by value, up to MaxMetricKeys distinct keys.
	ts.call(t, request("d", "detailed=x", "detailed=y"))
	if got := ts.counter(t, "ratelimit_total_hits_total", "domain", "d", "rule", "detailed_x"); got != 1 {
		t.Errorf("detailed_x hits = %v, want 1", got)
	}
	if got := ts.counter(t, "ratelimit_total_hits_total", "domain", "d", "rule", otherRule); got != 1 {
		t.Errorf("%s hits = %v, want 1 (beyond MaxMetricKeys)", otherRule, got)
	}
	if got := ts.counter(t, "ratelimit_requests_total", "result", "over_limit"); got != 1 {
		t.Errorf("over-limit requests = %v, want 1", got)
	}
	if n := testutil.CollectAndCount(ts.reg, "ratelimit_decision_latency_seconds", "ratelimit_store_latency_seconds"); n != 2 {
		t.Errorf("%d latency histograms, want 2", n)
	}
}

func TestServiceInvalidArgument(t *testing.T) {
	ts := newTestService(t, simpleYAML, func(c *ServiceConfig) {
		c.MaxDescriptors, c.MaxEntries, c.MaxValueBytes = 2, 2, 8
	})
	for name, tc := range map[string]struct {
		req  *rlsv3.RateLimitRequest
		want string
	}{
		"nil request":          {nil, "domain must not be empty"},
		"too many":             {request("d", "k=a", "k=b", "k=c"), "3 descriptors exceed the maximum of 2"},
		"too deep":             {request("d", "a=1,b=2,c=3"), "descriptor 0 has 3 entries, more than the maximum of 2"},
		"long value":           {request("d", "k=123456789"), "descriptor 0 entry 0: key or value longer than 8 bytes"},
		"long domain":          {request("domain-too-long", "k=a"), "domain is longer than 8 bytes"},
		"nil descriptor":       {&rlsv3.RateLimitRequest{Domain: "d", Descriptors: []*rlcommonv3.RateLimitDescriptor{nil}}, "descriptor 0 has no entries"},
		"nil entry":            {&rlsv3.RateLimitRequest{Domain: "d", Descriptors: []*rlcommonv3.RateLimitDescriptor{{Entries: []*rlcommonv3.RateLimitDescriptor_Entry{nil}}}}, "descriptor 0 entry 0 has an empty key"},
		"empty key mid-entry":  {request("d", "k=a,=b"), "descriptor 0 entry 1 has an empty key"},
		"invalid UTF-8 value":  {request("d", "k=\xff"), "descriptor 0 entry 0: key or value is not valid UTF-8"},
		"invalid UTF-8 domain": {request("\xc3", "k=a"), "domain is not valid UTF-8"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ts.ShouldRateLimit(context.Background(), tc.req)
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want InvalidArgument containing %q", err, tc.want)
			}
		})
	}
	if got := ts.counter(t, "ratelimit_requests_total", "result", "invalid"); got != 10 {
		t.Errorf("invalid requests = %v, want 10", got)
	}
}

func TestServiceCriticalityEnabledGlobally(t *testing.T) {
	yaml := `
domain: d
descriptors:
  - key: on
    rate_limit: {unit: second, requests_per_unit: 10}
  - key: off
    rate_limit: {unit: second, requests_per_unit: 10, criticality: false}
`
	ts := newTestService(t, yaml, func(c *ServiceConfig) {
		c.Criticality = CriticalityConfig{Key: "class", Enabled: true, Shares: Shares{0.5, 0.5, 0.5, 1}}
	})
	if n := ts.admitted(t, 20, "on=a,class=SHEDDABLE"); n != 5 {
		t.Errorf("SHEDDABLE admitted %d with the service default share 0.5, want 5", n)
	}
	if n := ts.admitted(t, 20, "off=a,class=SHEDDABLE"); n != 10 {
		t.Errorf("SHEDDABLE admitted %d by a rule with criticality: false, want 10", n)
	}
}

// criticality: true takes the service's shares, enabled or not; a
// mapping of the rule's own fills the classes it leaves out from
// DefaultShares.
func TestServiceCriticalityTrueTakesServiceShares(t *testing.T) {
	yaml := `
domain: d
descriptors:
  - key: on
    rate_limit: {unit: second, requests_per_unit: 10, criticality: true}
  - key: own
    rate_limit: {unit: second, requests_per_unit: 10, criticality: {shares: {CRITICAL: 0.9}}}
  - key: plain
    rate_limit: {unit: second, requests_per_unit: 10}
`
	ts := newTestService(t, yaml, func(c *ServiceConfig) {
		c.Criticality = CriticalityConfig{Shares: Shares{0.3, 0.5, 0.9, 1}}
	})
	for descriptor, want := range map[string]int{
		"on=a,criticality=SHEDDABLE":    3,  // the service's 0.3
		"own=a,criticality=SHEDDABLE":   7,  // DefaultShares' 0.7
		"plain=a,criticality=SHEDDABLE": 10, // criticality not enabled: no cap
	} {
		if n := ts.admitted(t, 20, descriptor); n != want {
			t.Errorf("%s: admitted %d of 20, want %d", descriptor, n, want)
		}
	}
}

func TestServiceConfigValidate(t *testing.T) {
	store, _ := NewMemory(MemoryConfig{})
	for name, tc := range map[string]struct {
		cfg  ServiceConfig
		want string
	}{
		"no store":       {ServiceConfig{}, "store is required"},
		"bad ratio":      {ServiceConfig{Store: store, NearLimitRatio: 2}, "near limit ratio 2 not in [0, 1]"},
		"bad shares":     {ServiceConfig{Store: store, Criticality: CriticalityConfig{Shares: Shares{1, 0.5, 1, 1}}}, "below the share"},
		"negative bound": {ServiceConfig{Store: store, MaxEntries: -1}, "max entries -1 is negative"},
		"bad mode":       {ServiceConfig{Store: store, FailureMode: 7}, "failure mode 7 unknown"},
	} {
		t.Run(name, func(t *testing.T) {
			if err := tc.cfg.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate() = %v, want an error containing %q", err, tc.want)
			}
		})
	}
	if _, err := ParseFailureMode("maybe"); err == nil {
		t.Error("ParseFailureMode(maybe) succeeded")
	}
	reg := prometheus.NewRegistry()
	if _, err := NewService(ServiceConfig{Store: store, Registerer: reg}); err != nil {
		t.Fatal(err)
	}
	if _, err := NewService(ServiceConfig{Store: store, Registerer: reg}); err == nil {
		t.Error("a second service on the same registry succeeded")
	}
}
