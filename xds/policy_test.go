package xds

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/xds-server/xds-server/discovery"
	"github.com/xds-server/xds-server/policy"
	"github.com/xds-server/xds-server/xdscache"
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
	if errs := s.PolicyErrors(); len(errs) != 1 || errs["web"] == "" {
		t.Errorf("PolicyErrors %v, want web's", errs)
	}
	if got := resourceNames(t, s, "n1", types.Cluster); !slices.Equal(got, []string{"web"}) {
		t.Errorf("clusters %v, want web alone", got)
	}
	s.SetPolicies(map[string]policy.Policy{"web": canaryPolicy(t, policy.Split{Weight: 100, ServiceSubset: "v2"})})
	s.rec.reconcile()
	if got := testutil.ToFloat64(s.m.policyUnserved); got != 0 {
		t.Errorf("xds_policy_unserved %v after the fix, want 0", got)
	}
	if errs := s.PolicyErrors(); len(errs) != 0 {
		t.Errorf("PolicyErrors %v after the fix, want none", errs)
	}
	if got := resourceNames(t, s, "n1", types.Route); !slices.Contains(got, "web") || !slices.Contains(got, "web~v2") {
		t.Errorf("routes %v", got)
	}
}

// routeClusters are the clusters node n's route name sends to, in order.
func routeClusters(t *testing.T, s *Server, n, name string) []string {
	t.Helper()
	snap, ok := s.rec.snapshotOf(n)
	if !ok {
		t.Fatalf("node %s has no snapshot", n)
	}
	m, err := xdscache.Decode(snap.Resources[types.Route].Items[name].Resource)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range m.(*routev3.RouteConfiguration).GetVirtualHosts()[0].GetRoutes() {
		a := r.GetRoute()
		if c := a.GetCluster(); c != "" {
			out = append(out, c)
		}
		for _, wc := range a.GetWeightedClusters().GetClusters() {
			out = append(out, fmt.Sprintf("%s:%d", wc.GetName(), wc.GetWeight().GetValue()))
		}
	}
	return out
}

// servingIn counts the HEALTHY endpoints of node n's load assignment name.
func servingIn(t *testing.T, s *Server, n, name string) int {
	t.Helper()
	snap, _ := s.rec.snapshotOf(n)
	m, err := xdscache.Decode(snap.Resources[types.Endpoint].Items[name].Resource)
	if err != nil {
		t.Fatal(err)
	}
	k := 0
	for _, l := range m.(*endpointv3.ClusterLoadAssignment).GetEndpoints() {
		for _, e := range l.GetLbEndpoints() {
			if e.GetHealthStatus() == core.HealthStatus_HEALTHY {
				k++
			}
		}
	}
	return k
}

// TestPolicyHoldsServingChanges: when every v2 endpoint turns critical,
// the route moves v2's share to v1 at once while web~v2's load assignment
// keeps its serving endpoints for policyHold (a client that gets the
// endpoints first never finds v2 empty); when v2 serves again, its load
// assignment says so at once and the route gives it its share back after
// policyHold.
func TestPolicyHoldsServingChanges(t *testing.T) {
	now := time.Unix(1000, 0)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	s := newTestServer(t, Config{Now: clock})
	var scheduled []time.Duration
	s.rec.linger.after = func(d time.Duration, _ func()) { scheduled = append(scheduled, d) }
	connect(s, 1, "n1")
	w := canaryWorld()
	s.Update(w)
	s.SetPolicies(map[string]policy.Policy{"web": canaryPolicy(t, policy.Split{Weight: 90, ServiceSubset: "v1"}, policy.Split{Weight: 10, ServiceSubset: "v2"})})
	s.rec.reconcile()
	step := func(label string, wantRoute []string, wantV2 int) {
		t.Helper()
		if got := routeClusters(t, s, "n1", "web"); !slices.Equal(got, wantRoute) {
			t.Errorf("%s: route web sends to %v, want %v", label, got, wantRoute)
		}
		if got := servingIn(t, s, "n1", "web~v2"); got != wantV2 {
			t.Errorf("%s: web~v2 has %d healthy endpoints, want %d", label, got, wantV2)
		}
	}
	step("start", []string{"web~v1:9000", "web~v2:1000"}, 2)
	setV2 := func(h discovery.Health) {
		w.Services[0].Endpoints = slices.Clone(w.Services[0].Endpoints)
		for k := 2; k < 4; k++ {
			w.Services[0].Endpoints[k].Health = h
		}
		s.Update(w)
		s.rec.reconcile()
	}
	setV2(discovery.HealthUnhealthy)
	step("v2 critical", []string{"web~v1"}, 2)
	if len(scheduled) == 0 || scheduled[len(scheduled)-1] != policyHold {
		t.Errorf("scheduled passes %v, want one after %v", scheduled, policyHold)
	}
	advance(policyHold)
	s.rec.redo(func() {})
	s.rec.reconcile()
	step("v2 critical, after the hold", []string{"web~v1"}, 0)
	setV2(discovery.HealthHealthy)
	step("v2 back", []string{"web~v1"}, 2)
	advance(policyHold)
	s.rec.redo(func() {})
	s.rec.reconcile()
	step("v2 back, after the hold", []string{"web~v1:9000", "web~v2:1000"}, 2)
}
