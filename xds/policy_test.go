package xds

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/xds-server/xds-server/discovery"
	"github.com/xds-server/xds-server/policy"
)

// canaryWorld is web with two v1 and two v2 endpoints.
func canaryWorld() discovery.Snapshot {
	svc := discovery.Service{Name: "web"}
	for i, v := range []string{"v1", "v1", "v2", "v2"} {
		svc.Endpoints = append(svc.Endpoints, discovery.Endpoint{ID: "web-" + string(rune('1'+i)), Address: "10.0.0.1",
			Port: 8080 + i, Health: discovery.HealthHealthy, Meta: map[string]string{"version": v}})
	}
	return discovery.Snapshot{Services: []discovery.Service{svc}}
}

func canaryPolicy(t testing.TB, splits ...policy.Split) policy.Policy {
	t.Helper()
	r := &policy.Resolver{}
	for _, v := range []string{"v1", "v2"} {
		f, err := policy.CompileFilter("Service.Meta.version == " + v)
		if err != nil {
			t.Fatal(err)
		}
		r.Subsets = append(r.Subsets, policy.Subset{Name: v, Filter: f})
	}
	return policy.Policy{Service: "web", Resolver: r, Splits: splits}
}

// TestPolicyClusterLingers: a target's cluster no policy names any more
// stays served for policyLinger (the route moves off it at once), then
// goes; the pass that drops it is scheduled, not awaited by a poll.
func TestPolicyClusterLingers(t *testing.T) {
	now := time.Unix(1000, 0)
	var mu sync.Mutex
	var scheduled []time.Duration
	s := newTestServer(t, Config{Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now }})
	s.rec.linger.after = func(d time.Duration, _ func()) { scheduled = append(scheduled, d) }
	connect(s, 1, "n1")
	s.Update(canaryWorld())
	s.SetPolicies(map[string]policy.Policy{"web": canaryPolicy(t, policy.Split{Weight: 90, ServiceSubset: "v1"}, policy.Split{Weight: 10, ServiceSubset: "v2"})})
	s.rec.reconcile()
	if got := resourceNames(t, s, "n1", types.Cluster); !slices.Equal(got, []string{"web", "web~v1", "web~v2"}) {
		t.Fatalf("clusters %v", got)
	}
	s.SetPolicies(nil)
	s.rec.reconcile()
	if got := resourceNames(t, s, "n1", types.Cluster); !slices.Equal(got, []string{"web", "web~v1", "web~v2"}) {
		t.Errorf("right after the policy went: clusters %v, want the targets lingering", got)
	}
	if len(scheduled) != 1 || scheduled[0] != policyLinger {
		t.Errorf("scheduled passes %v, want one after %v", scheduled, policyLinger)
	}
	checkConsistent(t, s, "n1")
	mu.Lock()
	now = now.Add(policyLinger)
	mu.Unlock()
	s.rec.redo(func() {})
	s.rec.reconcile()
	if got := resourceNames(t, s, "n1", types.Cluster); !slices.Equal(got, []string{"web"}) {
		t.Errorf("after %v: clusters %v, want web alone", policyLinger, got)
	}
}

// TestPolicyUnserved: a policy splitting to an undefined subset is served
// as without one and counted; fixing it clears the count.
func TestPolicyUnserved(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := newTestServer(t, Config{Registerer: reg})
	connect(s, 1, "n1")
	s.Update(canaryWorld())
	s.SetPolicies(map[string]policy.Policy{"web": canaryPolicy(t, policy.Split{Weight: 100, ServiceSubset: "v3"})})
	s.rec.reconcile()
	if got := testutil.ToFloat64(s.m.policyUnserved); got != 1 {
		t.Errorf("xds_policy_unserved %v, want 1", got)
	}
	if got := resourceNames(t, s, "n1", types.Cluster); !slices.Equal(got, []string{"web"}) {
		t.Errorf("clusters %v, want web alone", got)
	}
	s.SetPolicies(map[string]policy.Policy{"web": canaryPolicy(t, policy.Split{Weight: 100, ServiceSubset: "v2"})})
	s.rec.reconcile()
	if got := testutil.ToFloat64(s.m.policyUnserved); got != 0 {
		t.Errorf("xds_policy_unserved %v after the fix, want 0", got)
	}
	if got := resourceNames(t, s, "n1", types.Route); !slices.Contains(got, "web") || !slices.Contains(got, "web~v2") {
		t.Errorf("routes %v", got)
	}
}
