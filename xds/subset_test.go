package xds

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/xds-server/xds-server/discovery"
	"github.com/xds-server/xds-server/subsetting"
	"github.com/xds-server/xds-server/translate"
	"github.com/xds-server/xds-server/xdscache"
)

// subsetServer serves every service with the given subset size and algorithm.
func subsetServer(t *testing.T, size int, alg subsetting.Algorithm) *Server {
	t.Helper()
	return newTestServer(t, Config{
		Settings: func(string) translate.ServiceSettings {
			return translate.ServiceSettings{SubsetSize: size, Subsetting: alg}
		},
		Registerer: prometheus.NewRegistry(),
	})
}

// endpointsOf returns, for one service of a node's snapshot, endpoint id -> health.
func endpointsOf(t *testing.T, s *Server, node, service string) map[string]core.HealthStatus {
	t.Helper()
	snap, ok := s.rec.snapshotOf(node)
	if !ok {
		t.Fatalf("node %s has no snapshot", node)
	}
	res, ok := snap.Resources[types.Endpoint].Items[service]
	if !ok {
		t.Fatalf("node %s has no load assignment for %s", node, service)
	}
	m, err := xdscache.Decode(res.Resource)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]core.HealthStatus{}
	for _, l := range m.(*endpointv3.ClusterLoadAssignment).GetEndpoints() {
		for _, e := range l.GetLbEndpoints() {
			out[e.GetEndpoint().GetHostname()] = e.GetHealthStatus()
		}
	}
	return out
}

func TestSubsetsPerNode(t *testing.T) {
	for _, alg := range []subsetting.Algorithm{subsetting.Classic, subsetting.Steady} {
		t.Run(string(alg), func(t *testing.T) {
			s := subsetServer(t, 3, alg)
			nodes := []string{"n0", "n1", "n2"}
			for i, id := range nodes {
				connect(s, int64(i+1), id)
			}
			w := world(2, 9)
			s.Update(w)
			s.rec.reconcile()
			before := map[string]map[string]core.HealthStatus{}
			for _, id := range nodes {
				got := endpointsOf(t, s, id, "svc-000")
				if len(got) != 3 {
					t.Fatalf("%s gets %d endpoints of svc-000, want 3: %v", id, len(got), got)
				}
				before[id] = got
			}
			v0 := map[string]string{}
			for _, id := range nodes {
				v0[id] = versions(t, s, id)[types.Endpoint]
			}

			// An endpoint of n0's subset fails: every node that has it gets
			// one replacement and keeps it as UNHEALTHY; nobody else changes.
			var victim string
			for id := range before["n0"] {
				victim = id
				break
			}
			w.Services[0].Endpoints = slices.Clone(w.Services[0].Endpoints) // the memo holds the old array
			for i, ep := range w.Services[0].Endpoints {
				if ep.ID == victim {
					w.Services[0].Endpoints[i].Health = discovery.HealthUnhealthy
				}
			}
			s.Update(w)
			s.rec.reconcile()
			for _, id := range nodes {
				after := endpointsOf(t, s, id, "svc-000")
				if _, had := before[id][victim]; !had {
					if !sameKeys(after, before[id]) || versions(t, s, id)[types.Endpoint] != v0[id] {
						t.Errorf("%s does not have %s but changed from %v to %v", id, victim, before[id], after)
					}
					continue
				}
				if len(after) != 4 || after[victim] != core.HealthStatus_UNHEALTHY {
					t.Errorf("%s after %s failed: %v; want its 3 (the failed one UNHEALTHY) plus a replacement", id, victim, after)
				}
				for ep := range before[id] {
					if _, ok := after[ep]; !ok {
						t.Errorf("%s lost %s: %v", id, ep, after)
					}
				}
			}
		})
	}
}

func sameKeys(a, b map[string]core.HealthStatus) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			return false
		}
	}
	return true
}

func TestClassicSubsetsPartitionAndBalance(t *testing.T) {
	s := subsetServer(t, 3, subsetting.Classic)
	for i := range 3 {
		connect(s, int64(i+1), fmt.Sprintf("n%d", i))
	}
	s.Update(world(1, 9))
	s.rec.reconcile()
	seen := map[string]int{}
	for i := range 3 {
		for id := range endpointsOf(t, s, fmt.Sprintf("n%d", i), "svc-000") {
			seen[id]++
		}
	}
	if len(seen) != 9 {
		t.Errorf("union of 3 subsets of size 3 over 9 endpoints covers %d, want 9: %v", len(seen), seen)
	}
	rep, ok := s.Subsets("svc-000", everyNode)
	if !ok || !rep.Subsetting || rep.Balance.Min != 1 || rep.Balance.Max != 1 || rep.Balance.MaxOverMean != 1 {
		t.Errorf("report: ok=%v subsetting=%v balance=%+v; want every endpoint with exactly 1 connection", ok, rep.Subsetting, rep.Balance)
	}
	if len(rep.Nodes) != 3 || len(rep.Nodes[0].Subset) != 3 || len(rep.Nodes[0].Replacements) != 0 {
		t.Errorf("report nodes: %+v", rep.Nodes)
	}
	if _, ok := s.Subsets("nope", everyNode); ok {
		t.Error("unknown service: want false")
	}
}

func TestNodesWithEqualSubsetsShareSnapshots(t *testing.T) {
	s := subsetServer(t, 2, subsetting.Steady)
	s.Update(world(3, 10))
	s.rec.reconcile()
	// Two groups: index 0 in each gets the same subsets, so one snapshot.
	cb := s.cb
	cb.request(1, &core.Node{Id: "a", Cluster: "g1"})
	cb.request(2, &core.Node{Id: "b", Cluster: "g2"})
	cb.request(3, &core.Node{Id: "c", Cluster: "g1"})
	sa, _ := s.rec.snapshotOf("a")
	sb, _ := s.rec.snapshotOf("b")
	sc, _ := s.rec.snapshotOf("c")
	if sa != sb {
		t.Error("a and b (index 0 of two groups) got different snapshot objects; want one shared")
	}
	if sa == sc {
		t.Error("a and c (indices 0 and 1) share a snapshot; want their own")
	}
	if len(sa.Resources[types.Cluster].Items) != 3 {
		t.Fatalf("clusters: %d, want 3", len(sa.Resources[types.Cluster].Items))
	}
	base := s.rec.shared[keyProxyless]
	for _, k := range []types.ResponseType{types.Cluster, types.Listener, types.Route} {
		if fmt.Sprintf("%p", sa.Resources[k].Items) != fmt.Sprintf("%p", base.Resources[k].Items) {
			t.Errorf("type %d: a variant must share the base snapshot's map", k)
		}
	}
	if err := xdscache.Consistent(decodedSnapshot(t, sa)); err != nil {
		t.Errorf("variant snapshot is not consistent: %v", err)
	}
}

func TestSubsetSizeAtLeastEndpointsServesAll(t *testing.T) {
	s := subsetServer(t, 5, subsetting.Steady)
	connect(s, 1, "n0")
	s.Update(world(1, 5))
	s.rec.reconcile()
	if got := endpointsOf(t, s, "n0", "svc-000"); len(got) != 5 {
		t.Errorf("subset size 5 of 5 endpoints: node gets %d, want all 5", len(got))
	}
	snap, _ := s.rec.snapshotOf("n0")
	if snap != s.rec.shared[keyProxyless] {
		t.Error("with no service subset, the node should get the shared snapshot")
	}
	if rep, ok := s.Subsets("svc-000", everyNode); !ok || rep.Subsetting {
		t.Errorf("report: ok=%v subsetting=%v, want subsetting off", ok, rep.Subsetting)
	}
}

func TestSubsetMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := newTestServer(t, Config{
		Settings: func(string) translate.ServiceSettings {
			return translate.ServiceSettings{SubsetSize: 3, Subsetting: subsetting.Classic}
		},
		Registerer: reg,
	})
	for i := range 3 {
		connect(s, int64(i+1), fmt.Sprintf("n%d", i))
	}
	w := world(1, 9)
	w.Services[0].Endpoints[0].Health = discovery.HealthDraining
	s.Update(w)
	s.rec.reconcile()
	got, err := testutil.GatherAndCount(reg, "xds_subset_connections", "xds_subset_balance_ratio", "xds_subset_replacement_nodes")
	if err != nil || got != 5 {
		t.Fatalf("subset series = %d (%v), want 5 (min, mean, max, ratio, replacement nodes)", got, err)
	}
	rep, _ := s.Subsets("svc-000", everyNode)
	if rep.Balance.Min != 1 || rep.Balance.Max != 2 {
		t.Errorf("one draining endpoint replaced by another node's: balance over serving endpoints %+v, want 1..2", rep.Balance)
	}
	replaced := 0
	for _, n := range rep.Nodes {
		replaced += len(n.Replacements)
	}
	if replaced != 1 {
		t.Errorf("replacements = %d, want 1 (for the draining endpoint)", replaced)
	}
	if slices.ContainsFunc(rep.Endpoints, func(e SubsetEndpoint) bool { return e.Health == "" }) {
		t.Errorf("endpoints without health: %+v", rep.Endpoints)
	}
}

// decodedSnapshot turns a served snapshot (wire resources) back into
// regular messages, for the consistency check.
func decodedSnapshot(t *testing.T, s *cache.Snapshot) *cache.Snapshot {
	t.Helper()
	out := &cache.Snapshot{}
	for _, k := range xdscache.Kinds {
		var items []types.Resource
		for _, r := range s.Resources[k].Items {
			m, err := xdscache.Decode(r.Resource)
			if err != nil {
				t.Fatal(err)
			}
			items = append(items, m)
		}
		out.Resources[k] = cache.NewResources(s.Resources[k].Version, items)
	}
	return out
}

func TestVariantsCarryOverOnlyWhatIsUnchanged(t *testing.T) {
	s := newTestServer(t, Config{Settings: func(name string) translate.ServiceSettings {
		if name == "svc-000" {
			return translate.ServiceSettings{SubsetSize: 2, Subsetting: subsetting.Steady}
		}
		return translate.ServiceSettings{} // svc-001: every node gets every endpoint
	}})
	for i := range 4 {
		connect(s, int64(i+1), fmt.Sprintf("n%d", i))
	}
	w := world(2, 8)
	s.Update(w)
	s.rec.reconcile()
	snaps := map[string]*cache.Snapshot{}
	for i := range 4 {
		id := fmt.Sprintf("n%d", i)
		snaps[id], _ = s.rec.snapshotOf(id)
	}

	// Nothing changed: every node keeps the very same snapshot object.
	s.Update(world(2, 8))
	s.rec.reconcile()
	for id, old := range snaps {
		if now, _ := s.rec.snapshotOf(id); now != old {
			t.Errorf("%s got a new snapshot though nothing changed", id)
		}
	}

	// A service without subsetting changes: every node must see it.
	w = world(2, 8)
	w.Services[1].Endpoints[3].Health = discovery.HealthUnhealthy
	s.Update(w)
	s.rec.reconcile()
	for id := range snaps {
		if got := endpointsOf(t, s, id, "svc-001"); got["svc-001-003"] != core.HealthStatus_UNHEALTHY {
			t.Errorf("%s did not get the change of svc-001: %v", id, got)
		}
		if got := endpointsOf(t, s, id, "svc-000"); len(got) != 2 {
			t.Errorf("%s lost its subset of svc-000: %v", id, got)
		}
	}
	s.rec.mu.Lock()
	defer s.rec.mu.Unlock()
	if n, live := len(s.rec.sub.variants), len(s.rec.sub.byIndex); n != live && n > 4 {
		t.Errorf("%d variants kept for %d indices: unused ones must be dropped", n, live)
	}
	for _, p := range s.rec.sub.planned {
		if p.sp.prev != nil {
			t.Errorf("plan of %s still carries its predecessor after the pass", p.sp.name)
		}
	}
}

func TestSteadyUsesStableEndpointSlots(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1_000_000, 0)}
	s := newTestServer(t, Config{
		Settings:   func(string) translate.ServiceSettings { return translate.ServiceSettings{SubsetSize: 10} }, // steady by default
		Subsetting: SubsetConfig{IndexTTL: time.Minute},
		Now:        clock.now,
	})
	for i := range 300 {
		connect(s, int64(i+1), fmt.Sprintf("n%03d", i))
	}
	w := world(1, 300)
	s.Update(w)
	s.rec.reconcile()
	rep, _ := s.Subsets("svc-000", everyNode)
	if rep.Balance.Min != 10 || rep.Balance.Max != 10 {
		t.Fatalf("300 nodes x 300 endpoints x 10: balance %+v, want exactly 10 each", rep.Balance)
	}
	slotOf := func() map[string]int {
		s.rec.mu.Lock()
		defer s.rec.mu.Unlock()
		return maps.Clone(s.rec.memo["svc-000"].plan.slots)
	}
	first := slotOf()
	if e := rep.Endpoints[5]; e.Slot == nil || *e.Slot != first[e.ID] {
		t.Errorf("/debug/subsets endpoint %s: slot %v, want %d", e.ID, e.Slot, first[e.ID])
	}
	if first["svc-000-000"] != 0 || first["svc-000-299"] != 299 {
		t.Errorf("slots are not given in id order: %v ... %v", first["svc-000-000"], first["svc-000-299"])
	}
	before := map[string]map[string]core.HealthStatus{}
	for _, n := range rep.Nodes {
		before[n.ID] = endpointsOf(t, s, n.ID, "svc-000")
	}

	// An endpoint leaves and comes back within the TTL: same slot, and every
	// node that did not have it keeps its endpoints.
	gone := slices.Clone(w.Services[0].Endpoints)
	w.Services[0].Endpoints = slices.Delete(gone, 137, 138)
	s.Update(w)
	s.rec.reconcile()
	clock.advance(30 * time.Second)
	s.Update(world(1, 300))
	s.rec.reconcile()
	if got := slotOf()["svc-000-137"]; got != 137 {
		t.Errorf("returning endpoint got slot %d, want its old 137", got)
	}
	for id, eps := range before {
		if got := endpointsOf(t, s, id, "svc-000"); !sameKeys(got, eps) {
			t.Errorf("%s: endpoints changed across a leave and return: %v -> %v", id, eps, got)
		}
	}

	// A new endpoint takes the next free slot.
	w = world(1, 301)
	s.Update(w)
	s.rec.reconcile()
	if got := slotOf()["svc-000-300"]; got != 300 {
		t.Errorf("new endpoint got slot %d, want 300", got)
	}
}

// TestPicksSharedByOrder: client indices whose picks have the same order
// share one pick, so a steady plan keeps few picks however many nodes
// there are, and each index still gets its own order (what
// translate.Pick computes for it).
func TestPicksSharedByOrder(t *testing.T) {
	for _, alg := range []subsetting.Algorithm{subsetting.Classic, subsetting.Steady} {
		t.Run(string(alg), func(t *testing.T) {
			s := subsetServer(t, 5, alg)
			const nodes = 2000
			for i := range nodes {
				s.cb.request(int64(i+1), &core.Node{Id: fmt.Sprintf("node-%05d", i), Cluster: "g"})
			}
			w := world(1, 20)
			w.Services[0].Endpoints[3].Health = discovery.HealthUnhealthy // replacements: more orders
			s.Update(w)
			s.rec.reconcile()
			s.rec.mu.Lock()
			defer s.rec.mu.Unlock()
			sp := s.rec.sub.planned[0].sp
			distinct := map[*pick]bool{}
			for i, p := range sp.byIndex.dense {
				if p == nil {
					continue
				}
				distinct[p] = true
				if want := translate.Pick(sp.plan, sp.serving, i); !slices.Equal(p.order, want) {
					t.Fatalf("index %d has order %v, want %v", i, p.order, want)
				}
			}
			if len(distinct) != len(sp.byOrder) {
				t.Errorf("%d nodes keep %d picks for %d orders: want one per order", nodes, len(distinct), len(sp.byOrder))
			}
			// Classic shuffles every round: its orders are mostly distinct.
			if alg == subsetting.Steady && len(distinct) >= nodes/10 {
				t.Errorf("steady: %d nodes keep %d picks: want far fewer than nodes", nodes, len(distinct))
			}
		})
	}
}
