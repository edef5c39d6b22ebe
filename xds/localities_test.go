package xds

import (
	"slices"
	"testing"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/xds-server/xds-server/discovery"
	"github.com/xds-server/xds-server/translate"
	"github.com/xds-server/xds-server/xdscache"
)

// zonedWorld is one service, two endpoints in each of zones a and b of
// region r.
func zonedWorld() discovery.Snapshot {
	ep := func(id, addr, zone string) discovery.Endpoint {
		return discovery.Endpoint{ID: id, Address: addr, Port: 80, Health: discovery.HealthHealthy,
			Locality: discovery.Locality{Region: "r", Zone: zone}, Meta: map[string]string{}}
	}
	return discovery.Snapshot{Services: []discovery.Service{{Name: "api", Endpoints: []discovery.Endpoint{
		ep("a1", "10.0.0.1", "a"), ep("a2", "10.0.0.2", "a"), ep("b1", "10.0.1.1", "b"), ep("b2", "10.0.1.2", "b")}}}}
}

// zonesOf returns, per priority, the zones of the node's load assignment of api.
func zonesOf(t *testing.T, s *Server, node string) map[uint32][]string {
	t.Helper()
	snap, ok := s.rec.snapshotOf(node)
	if !ok {
		t.Fatalf("node %s has no snapshot", node)
	}
	m, err := xdscache.Decode(snap.Resources[types.Endpoint].Items["api"].Resource)
	if err != nil {
		t.Fatal(err)
	}
	out := map[uint32][]string{}
	for _, l := range m.(*endpointv3.ClusterLoadAssignment).GetEndpoints() {
		out[l.GetPriority()] = append(out[l.GetPriority()], l.GetLocality().GetZone())
	}
	return out
}

// TestLocalityPrioritiesPerPlace: nodes of one zone share one snapshot
// (one object, built once), nodes of another zone get the same endpoints
// in the other order of priorities, and a spill state moves the zones
// that can take the excess to priority 0.
func TestLocalityPrioritiesPerPlace(t *testing.T) {
	set := translate.ServiceSettings{Locality: translate.LocalityPolicy{Failover: translate.Failover{translate.LevelZone}, Spill: true}}
	s := newTestServer(t, Config{Settings: func(string) translate.ServiceSettings { return set },
		Registerer: prometheus.NewRegistry(), Datacenters: []string{"dc1"}})
	for i, n := range []struct{ id, zone string }{{"a-1", "a"}, {"a-2", "a"}, {"b-1", "b"}} {
		s.cb.request(int64(i+1), &core.Node{Id: n.id, Cluster: "c", Locality: &core.Locality{Region: "r", Zone: n.zone}})
	}
	s.Update(zonedWorld())
	s.rec.reconcile()
	a1, _ := s.rec.snapshotOf("a-1")
	a2, _ := s.rec.snapshotOf("a-2")
	b1, _ := s.rec.snapshotOf("b-1")
	if a1 != a2 {
		t.Error("two nodes of zone a have different snapshots; want one shared")
	}
	if a1 == b1 {
		t.Error("nodes of zones a and b share a snapshot")
	}
	if got := zonesOf(t, s, "a-1"); len(got) != 2 || got[0][0] != "a" || got[1][0] != "b" {
		t.Errorf("zone a node: zones by priority %v, want a at 0, b at 1", got)
	}
	if got := zonesOf(t, s, "b-1"); len(got) != 2 || got[0][0] != "b" || got[1][0] != "a" {
		t.Errorf("zone b node: zones by priority %v, want b at 0, a at 1", got)
	}

	cfg, _, err := s.Config("b-1")
	if err != nil || cfg.Localities == nil || cfg.Localities.Place.Zone != "b" || len(cfg.Localities.Services["api"]) != 2 ||
		cfg.Localities.Services["api"][0].Localities[0].Zone != "b" || cfg.Localities.Services["api"][0].Localities[0].Serving != 2 {
		t.Errorf("/debug/config of b-1: localities %+v (%v), want place zone b and api's zone b at priority 0 with 2 serving", cfg.Localities, err)
	}

	if got := s.SubsetsView().NodeSubsets("api"); !slices.Equal(got["a-1"], []string{"a1", "a2"}) || !slices.Equal(got["b-1"], []string{"b1", "b2"}) {
		t.Errorf("subsets view %v, want each node its own zone (its priority 0)", got)
	}
	if n := testutil.ToFloat64(s.m.localAssigns.WithLabelValues("api")); n != 2 {
		t.Errorf("xds_locality_assignments{api} = %v, want 2 (zones a and b)", n)
	}
	if n := testutil.ToFloat64(s.m.localEPs.WithLabelValues("api", "1")); n != 4 {
		t.Errorf("xds_locality_endpoints{api,1} = %v, want 4 (2 in each assignment)", n)
	}

	s.SetSpill(Spill{"api": {{Region: "r", Zone: "a"}: {Keep: 0.6}, {Region: "r", Zone: "b"}: {Keep: 1, Spare: 50}}})
	s.rec.reconcile()
	if got := zonesOf(t, s, "a-1"); len(got) != 1 || len(got[0]) != 2 {
		t.Errorf("zone a spilling: zones by priority %v, want a and b both at 0", got)
	}
	if got := zonesOf(t, s, "b-1"); len(got) != 2 || got[0][0] != "b" {
		t.Errorf("zone b (not spilling): zones by priority %v, want b alone at 0", got)
	}
	if got := s.SubsetsView().NodeSubsets("api"); len(got["a-1"]) != 4 || len(got["b-1"]) != 2 {
		t.Errorf("subsets view while zone a spills %v, want a-1 all four, b-1 its two", got)
	}
}
