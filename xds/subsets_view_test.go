package xds

import (
	"slices"
	"testing"
	"time"

	"github.com/xds-server/xds-server/discovery"
	"github.com/xds-server/xds-server/subsetting"
)

// TestSubsetsViewMatchesPicks: a view gives each node the serving
// members of the pick the reconciler gave it, sorted, replacements
// included; nil for an unknown service.
func TestSubsetsViewMatchesPicks(t *testing.T) {
	s := subsetServer(t, 3, subsetting.Steady)
	for i, id := range []string{"n0", "n1", "n2", "n3"} {
		connect(s, int64(i+1), id)
	}
	w := world(2, 9)
	w.Services[0].Endpoints[4].Health = discovery.HealthUnhealthy
	s.Update(w)
	s.rec.reconcile()
	v := s.SubsetsView()
	if v == nil || v.Version() == 0 {
		t.Fatalf("view after a pass: %v", v)
	}
	if got := v.NodeSubsets("nope"); got != nil {
		t.Errorf("unknown service: %v, want nil", got)
	}
	got := v.NodeSubsets("svc-000")
	if len(got) != 4 {
		t.Fatalf("NodeSubsets = %v, want 4 nodes", got)
	}
	s.rec.mu.Lock()
	sp := s.rec.memo["svc-000"].plan
	for _, id := range []string{"n0", "n1", "n2", "n3"} {
		node, _ := s.rec.reg.get(id)
		p, err := sp.choose(node.Index)
		if err != nil {
			t.Fatal(err)
		}
		if want := servingIDs(sp.members(p.choice)); !slices.Equal(got[id], want) {
			t.Errorf("%s: view %v, reconciler's pick %v", id, got[id], want)
		}
		if len(got[id]) != 3 || !slices.IsSorted(got[id]) {
			t.Errorf("%s: %v, want 3 serving ids, sorted", id, got[id])
		}
	}
	s.rec.mu.Unlock()
}

// TestSubsetsViewImmutable: a node connecting later is in the next view
// (published after the debounce, without a pass), never in the old one.
func TestSubsetsViewImmutable(t *testing.T) {
	views := make(chan *SubsetsView, 8)
	s := newTestServer(t, Config{Debounce: time.Millisecond, OnSubsets: func(v *SubsetsView) { views <- v }})
	connect(s, 1, "n1")
	s.Update(world(1, 3))
	s.rec.reconcile()
	first := <-views
	before := first.NodeSubsets("svc-000")
	connect(s, 2, "n2")
	next := <-views
	if next.Version() <= first.Version() {
		t.Errorf("versions %d then %d, want increasing", first.Version(), next.Version())
	}
	if got := first.NodeSubsets("svc-000"); len(got) != 1 || len(before) != 1 {
		t.Errorf("the first view changed: %v", got)
	}
	if got := next.NodeSubsets("svc-000"); len(got["n1"]) != 3 || len(got["n2"]) != 3 {
		t.Errorf("next view = %v, want every endpoint for n1 and n2", got)
	}
}

// A weights change retranslates a service but keeps its subsets: the
// next view answers alike from the picks already computed; a health
// change computes them anew.
func TestSubsetsViewKeepsPicksAcrossWeights(t *testing.T) {
	s := subsetServer(t, 3, subsetting.Steady)
	for i, id := range []string{"n0", "n1"} {
		connect(s, int64(i+1), id)
	}
	w := world(1, 9)
	s.Update(w)
	s.rec.reconcile()
	before := s.SubsetsView().NodeSubsets("svc-000")
	picks := s.rec.memo["svc-000"].view.picks
	s.SetWeights(map[string]map[string]uint32{"svc-000": {"svc-000-000": 7}})
	s.rec.reconcile()
	if s.rec.memo["svc-000"].view.picks != picks {
		t.Error("a weights change dropped the computed picks")
	}
	if after := s.SubsetsView().NodeSubsets("svc-000"); !slices.Equal(after["n0"], before["n0"]) || !slices.Equal(after["n1"], before["n1"]) {
		t.Errorf("subsets after a weights change %v, want %v", after, before)
	}
	w.Services[0].Endpoints = slices.Clone(w.Services[0].Endpoints)
	failed := slices.IndexFunc(w.Services[0].Endpoints, func(ep discovery.Endpoint) bool { return ep.ID == before["n0"][0] })
	w.Services[0].Endpoints[failed].Health = discovery.HealthUnhealthy
	s.Update(w)
	s.rec.reconcile()
	if s.rec.memo["svc-000"].view.picks == picks {
		t.Error("a health change kept the picks")
	}
	if got := s.SubsetsView().NodeSubsets("svc-000")["n0"]; slices.Contains(got, before["n0"][0]) || len(got) != 3 {
		t.Errorf("n0 after %s failed: %v, want 3 others", before["n0"][0], got)
	}
}
