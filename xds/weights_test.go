package xds

import (
	"testing"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// weightsOf returns endpoint id -> EDS weight of a service in a node's snapshot.
func weightsOf(t *testing.T, s *Server, node, service string) map[string]uint32 {
	t.Helper()
	snap, _ := s.rec.snapshotOf(node)
	m, err := decode(snap.Resources[types.Endpoint].Items[service].Resource)
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
