package e2e

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"github.com/hashicorp/consul/api"

	"github.com/xds-server/xds-server/console"
	"github.com/xds-server/xds-server/e2e/harness"
)

// The traffic policy of issue 27 for proxyless gRPC: config entries
// written through Consul's API, served by the real binary, followed by
// grpc-go's own xDS resolver (xds:///web). Helpers: policy_helpers_test.go.

// TestPolicyCanarySplit: a service-splitter 90/10 between the resolver's
// subsets v1 and v2 (by Service.Meta.version) sends v2 10% +- 3 points of
// 2,000 RPCs; shifting it 90/10 -> 50/50 -> 0/100 while a loader runs
// fails no RPC, and after each shift the measured share is the new one
// (0/100 written as one split: the 0 is TestPolicySplitZeroWeight's).
func TestPolicyCanarySplit(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	e, v1, v2 := startWeb(t, versionSubsets("web", ""), splitter("web", 90, 10))

	e.awaitSplit(t, 90, 10)
	got := measure(t, e.call, 2000)
	checkShare(t, "90/10", got, v2, 0.10)
	if !onlyFrom(got, backendIDs(v1, v2)) {
		t.Errorf("90/10: RPCs reached %v; want every backend of both subsets", got)
	}

	l := startLoader(t, e.call, 4)
	for _, s := range []struct{ v1, v2 float32 }{{50, 50}, {0, 100}} {
		what := fmt.Sprintf("%v/%v", s.v1, s.v2)
		e.set(t, splitter("web", s.v1, s.v2))
		e.awaitSplit(t, s.v1, s.v2)
		l.window(t, 100) // the resolver's update reaches the picker just after the ACK
		// 4,000 RPCs: at 50/50, 3 points are 3.8 standard deviations.
		got := l.window(t, 4000)
		checkShare(t, what, got, v2, float64(s.v2)/100)
		if s.v1 == 0 && !onlyFrom(got, backendIDs(v2)) {
			t.Errorf("%s: RPCs reached %v; want only v2's backends", what, got)
		}
		l.check(t, "shifting to "+what)
	}
	l.stop()
	l.check(t, "90/10 -> 50/50 -> 0/100 under load")
}

// awaitSplit waits until the node was sent and acked route "web" whose
// catch-all splits between web~v1 and web~v2 by percent (a 0 left out).
func (e *policyEnv) awaitSplit(t *testing.T, v1, v2 float32) {
	t.Helper()
	want := map[string]float64{}
	for sub, w := range map[string]float32{"web~v1": v1, "web~v2": v2} {
		if w > 0 {
			want[sub] = float64(w) / 100
		}
	}
	e.awaitSent(t, fmt.Sprintf("the split %v/%v", v1, v2), func(c nodeConfig) bool {
		for name := range want {
			if c.cluster(name) == nil {
				return false
			}
		}
		return sameShares(c.catchAll("web"), want)
	})
}

// TestPolicySplitZeroWeight: the end of a canary as Consul users write
// it, 0/100 with the 0 kept (Consul accepts it and leaves the 0 out of
// its own routes), sends every RPC to v2.
func TestPolicySplitZeroWeight(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	e, _, v2 := startWeb(t, versionSubsets("web", ""), splitter("web", 50, 50))
	e.awaitSplit(t, 50, 50)
	e.set(t, &api.ServiceSplitterConfigEntry{Kind: api.ServiceSplitter, Name: "web",
		Splits: []api.ServiceSplit{{Weight: 0, ServiceSubset: "v1"}, {Weight: 100, ServiceSubset: "v2"}}})
	e.awaitSplit(t, 0, 100)
	if got := measure(t, e.call, 200); !onlyFrom(got, backendIDs(v2)) {
		t.Errorf("0/100: 200 RPCs reached %v; want only v2's backends", got)
	}
}

// checkShare fails the test unless the backends in sub served want
// (+- 3 points) of the RPCs in got.
func checkShare(t *testing.T, what string, got map[string]int, sub []*harness.Backend, want float64) {
	t.Helper()
	if have := shareOf(got, backendIDs(sub)); math.Abs(have-want) > 0.03 {
		t.Errorf("%s: the subset got %.1f%% of %d RPCs, want %.0f%% +- 3 points (%v)", what, 100*have, rpcCount(got), 100*want, got)
	} else {
		t.Logf("%s: the subset got %.1f%% of %d RPCs (%v)", what, 100*have, rpcCount(got), got)
	}
}

// TestPolicyRouterHeader: a service-router route matching header
// x-canary exactly "1" sends to subset v2; other RPCs go to the
// resolver's default subset v1.
func TestPolicyRouterHeader(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	router := &api.ServiceRouterConfigEntry{Kind: api.ServiceRouter, Name: "web", Routes: []api.ServiceRoute{{
		Match: &api.ServiceRouteMatch{HTTP: &api.ServiceRouteHTTPMatch{
			Header: []api.ServiceRouteHTTPMatchHeader{{Name: "x-canary", Exact: "1"}}}},
		Destination: &api.ServiceRouteDestination{ServiceSubset: "v2"}}}}
	e, v1, v2 := startWeb(t, versionSubsets("web", "v1"), router)

	e.awaitSent(t, "the x-canary route before the catch-all", func(c nodeConfig) bool {
		rs := c.routes("web")
		return len(rs) == 2 && len(rs[0].GetMatch().GetHeaders()) == 1 &&
			sameShares(routeShares(rs[0]), map[string]float64{"web~v2": 1}) &&
			sameShares(routeShares(rs[1]), map[string]float64{"web": 1}) &&
			slices.Equal(c.endpointAddrs("web"), addrsOf(v1)) && slices.Equal(c.endpointAddrs("web~v2"), addrsOf(v2))
	})
	for _, tc := range []struct {
		what string
		call callFunc
		want []*harness.Backend
	}{
		{"x-canary: 1", withHeader(e.call, "x-canary", "1"), v2},
		{"no x-canary", e.call, v1},
		{"x-canary: 2", withHeader(e.call, "x-canary", "2"), v1},
	} {
		if got := measure(t, tc.call, 200); !onlyFrom(got, backendIDs(tc.want)) {
			t.Errorf("%s: 200 RPCs reached %v; want only %v", tc.what, got, backendIDs(tc.want))
		}
	}
}

// TestPolicyRouterRetry: a path-prefix route with RetryOn unavailable
// retries. The backend answers UNAVAILABLE to every other call, as one
// whose dependency blips does: an honest gRPC failure that retry_on
// "unavailable" is about (a port with nothing listening would be a
// connect failure, which grpc-go's load balancer handles before any RPC
// is attempted, retry policy or not). It is the only endpoint, so a retry
// can only succeed by being made.
func TestPolicyRouterRetry(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	consul := harness.Consul(t)
	f, host, port := startFlaky(t, "web-flaky")
	registerVersioned(t, consul, "web", "v1", f.id, host, port)
	e := startPolicy(t, consul, "web", grpcDefaults("web")...)
	e.awaitSent(t, "web without a router", func(c nodeConfig) bool {
		return sameShares(c.catchAll("web"), map[string]float64{"web": 1}) && len(c.endpointAddrs("web")) == 1
	})

	failed := 0
	for range 20 {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		if _, err := e.call(ctx); err != nil {
			failed++
		}
		cancel()
	}
	if failed < 5 {
		t.Fatalf("without a retry policy %d of 20 RPCs failed; want about half (the backend fails every other call)", failed)
	}

	prefix := "/grpc.testing.TestService/"
	e.set(t, &api.ServiceRouterConfigEntry{Kind: api.ServiceRouter, Name: "web", Routes: []api.ServiceRoute{{
		Match:       &api.ServiceRouteMatch{HTTP: &api.ServiceRouteHTTPMatch{PathPrefix: prefix}},
		Destination: &api.ServiceRouteDestination{NumRetries: 3, RetryOn: []string{"unavailable"}}}}})
	e.awaitSent(t, "the retrying route", func(c nodeConfig) bool {
		rs := c.routes("web")
		return len(rs) == 2 && rs[0].GetMatch().GetPrefix() == prefix &&
			rs[0].GetRoute().GetRetryPolicy().GetNumRetries().GetValue() == 3
	})
	before := f.calls.Load()
	// 100 RPCs: each retry waits grpc-go's backoff (up to 25 ms, Envoy's
	// default base_interval; Consul's router has no field for it).
	measure(t, e.call, 100) // fails the test on a failed RPC
	if attempts := f.calls.Load() - before; attempts < 199 {
		t.Errorf("100 RPCs made %d attempts at the backend; want 199 or 200 (each retried once)", attempts)
	} else {
		t.Logf("100 RPCs, 0 failed, %d attempts at a backend failing every other call", attempts)
	}
}

// TestPolicyResolver: a service-resolver's redirect to another service,
// its default subset and connect timeout, and its ring_hash load
// balancer with a header hash policy.
func TestPolicyResolver(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	consul := harness.Consul(t)
	v1 := startVersioned(t, consul, "web", "v1", 2)
	v2 := startVersioned(t, consul, "web", "v2", 2)
	apis := startVersioned(t, consul, "api", "v1", 2)
	e := startPolicy(t, consul, "web", append(grpcDefaults("web", "api"), &api.ServiceResolverConfigEntry{
		Kind: api.ServiceResolver, Name: "web", Redirect: &api.ServiceResolverRedirect{Service: "api"}})...)

	e.awaitSent(t, "web redirected to api", func(c nodeConfig) bool {
		return sameShares(c.catchAll("web"), map[string]float64{"api": 1}) && slices.Equal(c.endpointAddrs("api"), addrsOf(apis))
	})
	if got := measure(t, e.call, 200); !onlyFrom(got, backendIDs(apis)) {
		t.Errorf("redirect: 200 RPCs reached %v; want only api's backends", got)
	}

	r := versionSubsets("web", "v1")
	r.ConnectTimeout = 7 * time.Second
	e.set(t, r)
	e.awaitSent(t, "web's default subset v1 with a 7s connect timeout", func(c nodeConfig) bool {
		return sameShares(c.catchAll("web"), map[string]float64{"web": 1}) &&
			c.cluster("web").GetConnectTimeout().AsDuration() == 7*time.Second &&
			slices.Equal(c.endpointAddrs("web"), addrsOf(v1))
	})
	if got := measure(t, e.call, 200); !onlyFrom(got, backendIDs(v1)) {
		t.Errorf("default subset: 200 RPCs reached %v; want only v1's backends", got)
	}

	r = versionSubsets("web", "")
	r.LoadBalancer = &api.LoadBalancer{Policy: "ring_hash", HashPolicies: []api.HashPolicy{{Field: "header", FieldValue: "x-user"}}}
	e.set(t, r)
	e.awaitSent(t, "ring_hash on header x-user", func(c nodeConfig) bool {
		rs := c.routes("web")
		return len(rs) > 0 && hashesHeader(rs[len(rs)-1], "x-user") &&
			c.cluster("web").GetLbPolicy() == clusterv3.Cluster_RING_HASH && len(c.endpointAddrs("web")) == 4
	})
	if got := measure(t, withHeader(e.call, "x-user", "alice"), 200); len(got) != 1 {
		t.Errorf("ring_hash: 200 RPCs with x-user alice reached %v; want one backend", got)
	}
	spread := map[string]int{}
	for i := range 20 {
		got := measure(t, withHeader(e.call, "x-user", fmt.Sprintf("user-%d", i)), 10)
		if len(got) != 1 {
			t.Errorf("ring_hash: 10 RPCs with x-user user-%d reached %v; want one backend", i, got)
		}
		for id := range got {
			spread[id]++
		}
	}
	if len(spread) < 2 || !slices.ContainsFunc(slices.Collect(maps.Keys(spread)), func(id string) bool {
		return slices.Contains(backendIDs(v1, v2), id)
	}) {
		t.Errorf("ring_hash: 20 users reached %v; want more than one of web's backends", spread)
	} else {
		t.Logf("ring_hash: 20 users on %v", spread)
	}
}

// hashesHeader reports whether r hashes on header name.
func hashesHeader(r *routev3.Route, name string) bool {
	return slices.ContainsFunc(r.GetRoute().GetHashPolicy(), func(h *routev3.RouteAction_HashPolicy) bool {
		return h.GetHeader().GetHeaderName() == name
	})
}

// TestPolicyBadEntryKeptAndReported: a resolver that xds-server rejects
// leaves the last good one in use (traffic unchanged), is counted in
// xds_policy_rejections_total and listed by the console's fleet JSON;
// deleting the entries returns web to its defaults: one cluster "web"
// with all four backends.
func TestPolicyBadEntryKeptAndReported(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	e, v1, v2 := startWeb(t, versionSubsets("web", "v1"))
	goodSent := func(c nodeConfig) bool {
		return sameShares(c.catchAll("web"), map[string]float64{"web": 1}) && slices.Equal(c.endpointAddrs("web"), addrsOf(v1))
	}
	e.awaitSent(t, "the good resolver (web is v1)", goodSent)

	// Consul 1.14 compiles subset filters on write and refuses one that
	// does not parse; it accepts a filter on Node.Meta, which xds-server
	// cannot evaluate (no node meta in its model) and rejects. The bad
	// version also moves the default to v2: were it used, traffic would move.
	unparsable := versionSubsets("web", "v2")
	unparsable.Subsets["v1"] = api.ServiceResolverSubset{Filter: "Service.Meta.version =="}
	if _, _, err := e.entries.Set(unparsable, nil); err == nil {
		t.Log("consul accepted a filter that does not parse")
	} else {
		t.Logf("consul refused a filter that does not parse on write: %v", err)
	}
	bad := versionSubsets("web", "v2")
	bad.Subsets["v2"] = api.ServiceResolverSubset{Filter: "Node.Meta.rack == r1"}
	e.set(t, bad)
	awaitMetric(t, e.srv, `xds_policy_rejections_total{kind="service-resolver",reason="bad_filter"} `)
	awaitMetric(t, e.srv, `xds_policy_rejected_entries{kind="service-resolver"} 1`)
	var f console.FleetView
	awaitJSON(t, e.srv.AdminURL("/ui/api/fleet"), &f, "the rejected resolver in the fleet JSON", func() bool {
		return len(f.PolicyRejections) == 1
	})
	if r := f.PolicyRejections[0]; r.Kind != api.ServiceResolver || r.Name != "web" || r.Field != "Subsets[v2].Filter" {
		t.Errorf("fleet JSON rejection = %+v", r)
	}
	e.awaitSent(t, "the last good resolver after the bad one", goodSent)
	if got := measure(t, e.call, 200); !onlyFrom(got, backendIDs(v1)) {
		t.Errorf("after the bad resolver: 200 RPCs reached %v; want only v1's (the last good resolver)", got)
	}

	e.del(t, "web", api.ServiceResolver, api.ServiceDefaults)
	e.awaitSent(t, "web back to its defaults", func(c nodeConfig) bool {
		return sameShares(c.catchAll("web"), map[string]float64{"web": 1}) && !slices.ContainsFunc(c.clusters(), isSubsetCluster) &&
			slices.Equal(c.endpointAddrs("web"), addrsOf(v1, v2))
	})
	if got := measure(t, e.call, 400); !onlyFrom(got, backendIDs(v1, v2)) {
		t.Errorf("after deleting the entries: 400 RPCs reached %v; want all four backends", got)
	}
	awaitJSON(t, e.srv.AdminURL("/ui/api/fleet"), &f, "no rejection after the delete", func() bool {
		return len(f.PolicyRejections) == 0
	})
}

// isSubsetCluster reports whether a cluster is a (service, subset) one.
func isSubsetCluster(name string) bool { return strings.Contains(name, "~") }

// TestPolicySubsetHealth: with a 90/10 split, every v2 instance turning
// critical sends v2's share to v1 (services.<name>.unhealthy_split:
// redistribute, the default) while a loader runs: 0 failed RPCs, and
// once converged v1 serves every RPC.
func TestPolicySubsetHealth(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	e, v1, v2 := startWeb(t, versionSubsets("web", ""), splitter("web", 90, 10))
	e.awaitSplit(t, 90, 10)
	checkShare(t, "90/10 before", measure(t, e.call, 1000), v2, 0.10)

	l := startLoader(t, e.call, 4)
	critical := map[string]bool{}
	for _, id := range backendIDs(v2) {
		critical[id] = true
	}
	setTTLs(t, e.consul, critical, api.HealthCritical)
	// Converged when a batch of 500 RPCs has none on v2 (at 10% that
	// happens by chance with probability 0.9^500).
	awaitNoneOn(t, e.call, backendIDs(v2), "v2's share moved to v1")
	// The route moves first; web~v2's endpoints turn unhealthy a moment
	// later (xds's policyHold): keep the load on until they have (in the
	// node's snapshot: grpc-go, no longer routing to web~v2, unsubscribes
	// from it and never acks that).
	e.awaitSnapshot(t, "web~v2 without serving endpoints", func(c nodeConfig) bool { return len(c.endpointAddrs("web~v2")) == 0 })
	got := measure(t, e.call, 2000)
	l.stop()
	if !onlyFrom(got, backendIDs(v1)) {
		t.Errorf("with v2 critical: 2000 RPCs reached %v; want only v1's backends", got)
	}
	l.check(t, "v2 turning critical under load")
}
