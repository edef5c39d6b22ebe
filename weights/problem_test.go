package weights

import (
	"slices"
	"testing"
)

// TestNewProblem feeds the tracker's table and node rates to the solver:
// two nodes of different rates over overlapping subsets of backends of
// different capacities get different splits.
func TestNewProblem(t *testing.T) {
	tr := newTestTracker(t, noBlackout, "a", "b", "c")
	node := func(n, id string, qps float64) Report {
		return Report{Service: "s", Endpoint: id, Node: n, At: t0, QPS: qps}
	}
	observe(t, tr, t0,
		load("a", t0, 60, 0, 0.6), load("b", t0, 30, 0, 0.6), load("c", t0, 30, 0, 0.3),
		node("n1", "a", 40), node("n1", "b", 20), node("n2", "b", 10), node("n2", "c", 10),
	) // a: capacity 100, 20 req/s from clients the solver does not see
	svc, _ := tr.Update(t0).Service("s")
	rates := tr.NodeRates("s", t0)
	nodes := []NodeLoad{
		{Node: "n1", Subset: []string{"a", "b"}, Rates: rates["n1"]},
		{Node: "n2", Subset: []string{"b", "c"}, Rates: rates["n2"]},
		{Node: "n3", Subset: []string{"a", "c"}}, // no reports: global weights
	}
	p := NewProblem(svc, nodes)
	want := []EndpointLoad{
		{ID: "a", Capacity: 100, Background: 20, Global: 100},
		{ID: "b", Capacity: 50, Background: 0, Global: 50},
		{ID: "c", Capacity: 100, Background: 20, Global: 100},
	}
	if !slices.Equal(p.Endpoints, want) {
		t.Fatalf("endpoints %+v, want %+v", p.Endpoints, want)
	}
	sol, err := Solve(p, DefaultSolveConfig())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]uint32{}
	for _, n := range sol.Nodes {
		got[n.Node] = n.Weights
	}
	// n2 (20 req/s) cannot lift c (20 fixed) to the level of a and b, which
	// share n1's 60 req/s and a's 20 fixed: n2 gives b only its floor, and
	// a and b end at 80/150 = 0.53, c at 0.4: max/mean 1.09.
	t.Logf("weights %v, predicted %+v", got, sol.Endpoints)
	if !slices.Equal(got["n3"], []uint32{100, 100}) || sol.Nodes[2].Global != true {
		t.Errorf("n3: %v, want the global 100:100", got["n3"])
	}
	if got["n1"][0] <= got["n1"][1] || got["n2"][1] <= got["n2"][0] {
		t.Errorf("n1 %v should favor a, n2 %v favor c", got["n1"], got["n2"])
	}
	if sol.Spread > 1.095 {
		t.Errorf("predicted max/mean utilization %.3f", sol.Spread)
	}
}
