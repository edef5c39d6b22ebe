package xds

import (
	"testing"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/xds-server/xds-server/discovery"
	"github.com/xds-server/xds-server/subsetting"
	"github.com/xds-server/xds-server/xdscache"
)

// weightsOf returns endpoint id -> EDS weight of a service in a node's snapshot.
func weightsOf(t *testing.T, s *Server, node, service string) map[string]uint32 {
	t.Helper()
	snap, _ := s.rec.snapshotOf(node)
	m, err := xdscache.Decode(snap.Resources[types.Endpoint].Items[service].Resource)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]uint32{}
	for _, l := range m.(*endpointv3.ClusterLoadAssignment).GetEndpoints() {
		for _, e := range l.GetLbEndpoints() {
			out[e.GetEndpoint().GetHostname()] = e.GetLoadBalancingWeight().GetValue()
		}
	}
	return out
}

func TestSetWeights(t *testing.T) {
	s := newTestServer(t, Config{})
	connect(s, 1, "n1")
	s.Update(world(2, 3))
	s.rec.reconcile()
	if w := weightsOf(t, s, "n1", "svc-000"); w["svc-000-001"] != 1 {
		t.Fatalf("before any weights: %v, want discovery's 1", w)
	}
	before := versions(t, s, "n1")

	s.SetWeights(map[string]map[string]uint32{"svc-000": {"svc-000-001": 7, "svc-000-002": 3}})
	s.rec.reconcile() // the weights redo the last discovery snapshot
	if w := weightsOf(t, s, "n1", "svc-000"); w["svc-000-000"] != 1 || w["svc-000-001"] != 7 || w["svc-000-002"] != 3 {
		t.Errorf("svc-000 weights = %v, want 1, 7, 3", w)
	}
	after := versions(t, s, "n1")
	if after[types.Endpoint] == before[types.Endpoint] || after[types.Cluster] != before[types.Cluster] {
		t.Errorf("versions %v -> %v: want only endpoints to change", before, after)
	}

	sets := testutil.ToFloat64(s.m.snapshotSets)
	s.SetWeights(map[string]map[string]uint32{"svc-000": {"svc-000-001": 7, "svc-000-002": 3}})
	s.rec.reconcile()
	if got := testutil.ToFloat64(s.m.snapshotSets); got != sets {
		t.Errorf("equal weights again: %v snapshot updates, want none", got-sets)
	}
	s.SetWeights(nil)
	s.rec.reconcile()
	if w := weightsOf(t, s, "n1", "svc-000"); w["svc-000-001"] != 1 {
		t.Errorf("weights withdrawn: %v, want discovery's again", w)
	}
}

func TestNodeWeightsWithoutSubsets(t *testing.T) {
	s := newTestServer(t, Config{})
	connect(s, 1, "n1")
	connect(s, 2, "n2")
	s.Update(world(2, 3))
	s.rec.reconcile()
	n2 := versions(t, s, "n2")

	s.SetWeights(map[string]map[string]uint32{"svc-000": {"svc-000-000": 5}})
	s.SetNodeWeights(NodeWeights{"svc-000": {"n1": {"svc-000-000": 2, "svc-000-001": 9, "svc-000-002": 4}}})
	s.rec.reconcile()
	if w := weightsOf(t, s, "n1", "svc-000"); w["svc-000-000"] != 2 || w["svc-000-001"] != 9 || w["svc-000-002"] != 4 {
		t.Errorf("n1 svc-000 = %v, want its own 2, 9, 4", w)
	}
	if w := weightsOf(t, s, "n2", "svc-000"); w["svc-000-000"] != 5 || w["svc-000-001"] != 1 {
		t.Errorf("n2 svc-000 = %v, want the global 5, 1, 1", w)
	}
	if w := weightsOf(t, s, "n1", "svc-001"); w["svc-001-000"] != 1 {
		t.Errorf("n1 svc-001 = %v, want discovery's", w)
	}
	if v := versions(t, s, "n2"); v[types.Cluster] != n2[types.Cluster] {
		t.Errorf("n2 clusters changed: %v -> %v", n2, v)
	}
	if got := s.SubsetsView().NodeSubsets("svc-000"); len(got["n1"]) != 3 || len(got["n2"]) != 3 {
		t.Errorf("NodeSubsets = %v, want every endpoint for both nodes", got)
	}

	// The same weights again: nothing is pushed.
	sets := testutil.ToFloat64(s.m.snapshotSets)
	s.SetNodeWeights(NodeWeights{"svc-000": {"n1": {"svc-000-000": 2, "svc-000-001": 9, "svc-000-002": 4}}})
	s.rec.reconcile()
	if got := testutil.ToFloat64(s.m.snapshotSets); got != sets {
		t.Errorf("equal node weights again: %v snapshot updates, want none", got-sets)
	}

	// An endpoint changes: n1's own load assignment follows it.
	w := world(2, 3)
	w.Services[0].Endpoints[1].Health = discovery.HealthUnhealthy
	s.Update(w)
	s.rec.reconcile()
	if got := endpointsOf(t, s, "n1", "svc-000")["svc-000-001"]; got != core.HealthStatus_UNHEALTHY {
		t.Errorf("n1 sees svc-000-001 as %v after it failed, want UNHEALTHY", got)
	}
	if w := weightsOf(t, s, "n1", "svc-000"); w["svc-000-001"] != 9 {
		t.Errorf("n1 lost its weights: %v", w)
	}

	s.SetNodeWeights(nil)
	s.rec.reconcile()
	if w := weightsOf(t, s, "n1", "svc-000"); w["svc-000-001"] != 1 || w["svc-000-000"] != 5 {
		t.Errorf("node weights withdrawn: %v, want the global ones", w)
	}
}

func TestNodeWeightsOverSubsets(t *testing.T) {
	s := subsetServer(t, 3, subsetting.Steady)
	nodes := []string{"n0", "n1", "n2"}
	for i, id := range nodes {
		connect(s, int64(i+1), id)
	}
	s.Update(world(1, 9))
	s.rec.reconcile()
	subsets := s.SubsetsView().NodeSubsets("svc-000")
	if len(subsets) != 3 {
		t.Fatalf("NodeSubsets = %v, want 3 nodes", subsets)
	}
	own := map[string]uint32{}
	for k, id := range subsets["n0"] {
		own[id] = uint32(10 + k)
	}
	v1 := versions(t, s, "n1")
	s.SetNodeWeights(NodeWeights{"svc-000": {"n0": own}})
	s.rec.reconcile()
	got := weightsOf(t, s, "n0", "svc-000")
	if len(got) != 3 {
		t.Fatalf("n0 gets %v, want its 3", got)
	}
	for id, w := range own {
		if got[id] != w {
			t.Errorf("n0 weight of %s = %d, want %d (all: %v)", id, got[id], w, got)
		}
	}
	if v := versions(t, s, "n1"); v[types.Endpoint] != v1[types.Endpoint] {
		t.Errorf("n1 was pushed for n0's weights")
	}
	for id, w := range weightsOf(t, s, "n1", "svc-000") {
		if w != 1 {
			t.Errorf("n1 weight of %s = %d, want 1", id, w)
		}
	}
}

// A pass with nothing new must not forget the last discovery snapshot:
// weights set afterwards still apply (a kick arriving while a pass runs
// causes such an empty pass).
func TestWeightsAfterAnEmptyPass(t *testing.T) {
	s := newTestServer(t, Config{})
	connect(s, 1, "n1")
	s.Update(world(1, 2))
	s.rec.reconcile()
	s.rec.reconcile() // nothing pending
	s.SetWeights(map[string]map[string]uint32{"svc-000": {"svc-000-001": 7}})
	s.rec.reconcile()
	if w := weightsOf(t, s, "n1", "svc-000"); w["svc-000-001"] != 7 {
		t.Errorf("weights after an empty pass: %v, want svc-000-001 at 7", w)
	}
}
