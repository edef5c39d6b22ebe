package xds

import (
	"slices"
	"testing"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/xds-server/xds-server/discovery"
	"github.com/xds-server/xds-server/xdscache"
)

// TestRouteToUnknownService: a route whose service has no instances is
// counted in xds_route_unknown_service until the service appears.
func TestRouteToUnknownService(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := newTestServer(t, Config{Listeners: testListeners(), RateLimitAddress: "127.0.0.1:18081", Registerer: reg})
	unknown := func(service string) float64 {
		return testutil.ToFloat64(s.m.unknownRoute.WithLabelValues(service))
	}
	s.Update(world(2, 2)) // svc-000 and svc-001; svc-002 (routed by "internal") is missing
	s.rec.reconcile()
	if got := unknown("svc-002"); got != 1 {
		t.Errorf("svc-002 without instances: %v routes counted, want 1", got)
	}
	if got := unknown("svc-000"); got != 0 {
		t.Errorf("svc-000 with instances: %v, want 0", got)
	}
	s.Update(world(3, 2))
	s.rec.reconcile()
	if got := unknown("svc-002"); got != 0 {
		t.Errorf("svc-002 registered: %v, want 0", got)
	}
}

// TestRoutedServiceKeepsItsCluster: the cluster of a service a route
// names is served, with an empty load assignment, while the service has
// no instances (before it appears and after it leaves), and is unchanged
// when it comes and goes: only its load assignment changes, so Envoy never
// has the route without the cluster (503 NC) or re-warms the cluster.
func TestRoutedServiceKeepsItsCluster(t *testing.T) {
	s := newTestServer(t, Config{Listeners: testListeners(), RateLimitAddress: "127.0.0.1:18081"})
	connectAs(s, 1, "mesh-envoy", "mesh", "envoy") // gets "internal", routing to svc-002
	step := func(w discovery.Snapshot) (cluster, cla string, endpoints int) {
		t.Helper()
		s.Update(w)
		s.rec.reconcile()
		snap, _ := s.rec.snapshotOf("mesh-envoy")
		_, ok := snap.Resources[types.Cluster].Items["svc-002"]
		a, ok2 := snap.Resources[types.Endpoint].Items["svc-002"]
		if !ok || !ok2 {
			t.Fatalf("routed svc-002: cluster served %v, load assignment served %v", ok, ok2)
		}
		checkConsistent(t, s, "mesh-envoy")
		m, err := xdscache.Decode(a.Resource)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range m.(*endpointv3.ClusterLoadAssignment).GetEndpoints() {
			endpoints += len(l.GetLbEndpoints())
		}
		return snap.VersionMap[resource.ClusterType]["svc-002"], snap.VersionMap[resource.EndpointType]["svc-002"], endpoints
	}
	c0, a0, n0 := step(world(2, 2)) // svc-002 unknown
	c1, a1, n1 := step(world(3, 2)) // registered
	c2, a2, n2 := step(world(2, 2)) // gone again
	if n0 != 0 || n1 != 2 || n2 != 0 {
		t.Errorf("svc-002 endpoints: %d, %d, %d; want 0, 2, 0", n0, n1, n2)
	}
	if c0 != c1 || c1 != c2 {
		t.Errorf("svc-002 cluster changed as the service came and went: %s, %s, %s", c0, c1, c2)
	}
	if a0 == a1 || a1 == a2 {
		t.Errorf("svc-002 load assignment versions %s, %s, %s: want a change at each step", a0, a1, a2)
	}
	if got := resourceNames(t, s, "mesh-envoy", types.Cluster); slices.Contains(got, "svc-003") {
		t.Errorf("clusters %v: an unrouted, unknown service got one", got)
	}
}
