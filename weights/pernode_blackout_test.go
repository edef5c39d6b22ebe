package weights

import (
	"testing"
)

// share is endpoint id's fraction of node weights w.
func share(w map[string]uint32, id string) float64 {
	sum := 0.0
	for _, v := range w {
		sum += float64(v)
	}
	return float64(w[id]) / sum
}

// TestPerNodeIgnoresBlackoutCapacity is the load lab's failure through
// real Envoys: a backend's first ORCA report (44 requests/s at
// utilization 0.004) gave it a capacity of 10,000 requests/s while it was
// still in blackout; the per-node solver believed it and sent every node
// of its subset 97% of its rate there (weights 10000:100:100:100), 1.47
// times the backend's real capacity, and its queue passed the clients' 5 s
// deadline. An endpoint without its own weight has no known capacity: the
// solver fills in the others' mean, as global balancing already did.
func TestPerNodeIgnoresBlackoutCapacity(t *testing.T) {
	p, err := NewPerNode(SolveConfig{Damping: 1, MaxRatio: 100, MaxSweeps: 100, Tolerance: 1e-4}, 0.05)
	if err != nil {
		t.Fatal(err)
	}
	st := pernodeTable()
	st.Rows[0].Capacity, st.Rows[0].Reason = 10000, ReasonBlackout // a: one bogus first measurement
	subsets := map[string][]string{"n1": {"a", "b"}, "n2": {"a", "c"}}
	rates := map[string]map[string]float64{"n1": {"a": 30, "b": 30}, "n2": {"a": 30, "c": 30}}
	got, _, err := p.Plan(st, subsets, rates)
	if err != nil {
		t.Fatal(err)
	}
	// Equal capacities: 120 requests/s over three endpoints, 40 each, so
	// each node sends a third of its rate to a.
	offered := 60*share(got["n1"], "a") + 60*share(got["n2"], "a")
	for _, n := range []string{"n1", "n2"} {
		if s := share(got[n], "a"); s < 0.25 || s > 0.42 {
			t.Errorf("%s sends %.2f of its rate to a (weights %v), want about 1/3", n, s, got[n])
		}
	}
	if offered > 50 {
		t.Errorf("a (real capacity 100) offered %.0f requests/s, want about 40", offered)
	}
}

// TestPerNodeWaitsForCapacities: while the endpoints are in blackout and
// none has its own weight, the capacities are not yet trusted: every node
// keeps the global weights, however confident the first measurements
// look. Without any utilization source (reasons incomplete: LRS only),
// capacities stay unknown, equal, and the nodes are planned at once.
func TestPerNodeWaitsForCapacities(t *testing.T) {
	p, err := NewPerNode(DefaultSolveConfig(), 0.05)
	if err != nil {
		t.Fatal(err)
	}
	st := pernodeTable()
	for i := range st.Rows {
		st.Rows[i].Reason = ReasonBlackout
	}
	st.Rows[0].Capacity = 10000
	subsets := map[string][]string{"n1": {"a", "b"}, "n2": {"b", "c"}}
	rates := map[string]map[string]float64{"n1": {"a": 30, "b": 30}, "n2": {"b": 5, "c": 5}}
	got, changed, err := p.Plan(st, subsets, rates)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 || changed {
		t.Errorf("in blackout: per-node weights %v (changed %v), want none: the global weights", got, changed)
	}
	if d, ok := p.Debug("api", "n1"); !ok || !d.Global {
		t.Errorf("Debug(n1) = %+v, %v; want the global fallback", d, ok)
	}
	// No utilization source: nothing to wait for.
	lrsOnly := pernodeTable()
	for i := range lrsOnly.Rows {
		lrsOnly.Rows[i].Capacity, lrsOnly.Rows[i].Reason = 0, ReasonIncomplete
	}
	q, err := NewPerNode(DefaultSolveConfig(), 0.05)
	if err != nil {
		t.Fatal(err)
	}
	if got, _, err := q.Plan(lrsOnly, subsets, rates); err != nil || len(got) != 2 {
		t.Errorf("LRS only: %v, err %v; want both nodes weighted over equal capacities", got, err)
	}
	// Once the endpoints have their own weights, the nodes get theirs.
	for i := range st.Rows {
		st.Rows[i].Reason = ReasonReported
	}
	st.Rows[0].Capacity = 100
	if got, changed, err = p.Plan(st, subsets, rates); err != nil || !changed || len(got) != 2 {
		t.Errorf("out of blackout: %v, changed %v, err %v; want both nodes weighted", got, changed, err)
	}
}
