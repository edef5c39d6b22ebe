package weights

import (
	"testing"
	"time"
)

func client(node, id string, at time.Time, qps, eps, util float64) Report {
	return Report{Service: "s", Endpoint: id, Node: node, At: at, QPS: qps, EPS: eps, CPU: util}
}

func TestBuildSummaryGroupsNodesBySubset(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tr := newTestTracker(t, nil, "a", "b", "c")
	observe(t, tr, t0.Add(2*time.Second),
		load("a", t0, 100, 1, 0.5),
		client("n1", "a", t0, 10, 0, 0.2), client("n1", "b", t0, 20, 1, 0),
		client("n2", "a", t0.Add(time.Second), 5, 0, 0.4), client("n2", "b", t0, 7, 0, 0),
		client("n3", "c", t0, 3, 0, 0),
		client("old", "c", t0.Add(-time.Hour), 1000, 0, 0), // expired: left out
	)
	subsets := map[string][]string{"n1": {"b", "a"}, "n2": {"a", "b"}, "n3": {"c", "b"}}
	s := BuildSummary("r1", t0.Add(2*time.Second), tr.Reports(t0.Add(2*time.Second)),
		func(string) map[string][]string { return subsets })
	if s.Replica != "r1" || len(s.Services) != 1 {
		t.Fatalf("summary %+v", s)
	}
	ss := s.Services[0]
	if len(ss.Backend) != 1 || ss.Backend[0].E != 0 || ss.Backend[0].QPS != 100 || ss.Backend[0].CPU != 0.5 {
		t.Fatalf("backend %+v", ss.Backend)
	}
	if len(ss.Groups) != 2 {
		t.Fatalf("want 2 groups (n1+n2 share {a,b}; n3 {b,c}), got %+v", ss.Groups)
	}
	g := ss.Groups[0] // key "0,1," sorts before "1,2,"
	if len(g.Members) != 2 || g.Members[0] != 0 || g.Members[1] != 1 {
		t.Fatalf("group members %v", g.Members)
	}
	a, b := g.Loads[0], g.Loads[1]
	if a.QPS != 15 || a.Util != 0.4 || a.Age != 1000 || b.QPS != 27 || b.EPS != 1 {
		t.Fatalf("group loads %+v", g.Loads)
	}
	if h := ss.Groups[1]; len(h.Loads) != 1 || h.Loads[0].E != 2 || h.Loads[0].QPS != 3 {
		t.Fatalf("n3's group %+v", h)
	}
}

// Two replicas' summaries merged give the table one tracker fed with
// every raw report gives.
func TestMergedSummariesSolveLikeOneReplica(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ids := []string{"a", "b", "c"}
	cases := []struct {
		name   string
		r1, r2 []Report
	}{
		{"backend reports on both", []Report{load("a", t0, 100, 0, 0.5)}, []Report{load("b", t0, 100, 0, 0.25), load("c", t0, 50, 5, 0.5)}},
		{"client reports split", []Report{client("n1", "a", t0, 30, 0, 0.3), client("n1", "b", t0, 30, 0, 0.6)},
			[]Report{client("n2", "a", t0, 30, 1, 0.4), client("n2", "c", t0, 60, 0, 0.5), client("n3", "b", t0, 10, 0, 0.7)}},
		{"same backend seen by both, newest wins", []Report{load("a", t0, 100, 0, 0.5), load("b", t0, 10, 0, 0.5)},
			[]Report{load("a", t0.Add(time.Second), 200, 0, 0.5), load("c", t0, 10, 0, 0.5)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			one := newTestTracker(t, noBlackout, ids...)
			r1, r2 := newTestTracker(t, noBlackout, ids...), newTestTracker(t, noBlackout, ids...)
			merged := newTestTracker(t, noBlackout, ids...)
			m := NewMerger()
			now := t0.Add(2 * time.Second)
			observe(t, one, now, append(append([]Report{}, tc.r1...), tc.r2...)...)
			observe(t, r1, now, tc.r1...)
			observe(t, r2, now, tc.r2...)
			got := m.Feed(merged, []Summary{
				BuildSummary("r1", now, r1.Reports(now), nil), BuildSummary("r2", now, r2.Reports(now), nil)}, now)
			if got.Rejected != 0 {
				t.Fatalf("rejected %d", got.Rejected)
			}
			want, have := one.Update(now), merged.Update(now)
			for _, id := range ids {
				w, h := rowOf(t, want, id), rowOf(t, have, id)
				if w.Weight != h.Weight || w.Reason != h.Reason || w.QPS != h.QPS || w.Utilization != h.Utilization {
					t.Errorf("%s: merged %+v, one replica %+v", id, h, w)
				}
			}
		})
	}
}

// Republishing an unchanged summary feeds nothing: the smoothing does not
// step, so the merged weight follows reports, not publish intervals.
func TestMergerFeedsOnlyNewerLoads(t *testing.T) {
	t0 := time.Unix(1000, 0)
	src := newTestTracker(t, noBlackout, "a", "b")
	observe(t, src, t0, load("a", t0, 100, 0, 0.5), load("b", t0, 100, 0, 0.5))
	merged := newTestTracker(t, noBlackout, "a", "b")
	m := NewMerger()
	sum := BuildSummary("r1", t0, src.Reports(t0), nil)
	m.Feed(merged, []Summary{sum}, t0)
	merged.Update(t0)
	observe(t, src, t0.Add(time.Second), load("a", t0.Add(time.Second), 400, 0, 0.5))
	sum2 := BuildSummary("r1", t0.Add(time.Second), src.Reports(t0.Add(time.Second)), nil)
	for i := range 3 { // the same summary three times: one step only
		m.Feed(merged, []Summary{sum2}, t0.Add(time.Duration(i+1)*time.Second))
		merged.Update(t0.Add(time.Duration(i+1) * time.Second))
	}
	// one EWMA step from 200 toward 800 (qps/util), smoothing DefaultSmoothing
	want := 200 + DefaultConfig().Smoothing*(800-200)
	if got := rowOf(t, merged.Update(t0.Add(5*time.Second)), "a").Capacity; got < want-1e-6 || got > want+1e-6 {
		t.Fatalf("capacity %v, want %v (one smoothing step)", got, want)
	}
	if got := m.Feed(merged, []Summary{{Replica: "r9", Services: []ServiceSummary{{Name: "s", Endpoints: []string{"zz"},
		Backend: []BackendLoad{{E: 0, QPS: 1, CPU: 1}, {E: 7}}}}, At: t0.UnixMilli()}}, t0); got.Rejected != 1 {
		t.Fatalf("unknown endpoint: rejected %d, want 1 (and out of range ignored)", got.Rejected)
	}
}

func TestMergedSubsetsArePerReplicaAndSubset(t *testing.T) {
	sums := []Summary{
		{Replica: "r1", Services: []ServiceSummary{{Name: "s", Endpoints: []string{"a", "b"},
			Groups: []GroupLoad{{Members: []int{0, 1}, Loads: []ClientLoad{{E: 0, QPS: 5}}}}}}, At: 1},
		{Replica: "r2", Services: []ServiceSummary{{Name: "s", Endpoints: []string{"a", "b"},
			Groups: []GroupLoad{{Members: []int{0, 1}, Loads: []ClientLoad{{E: 1, QPS: 7}}}, {Members: []int{1}}}}}, At: 1},
	}
	tr := newTestTracker(t, nil, "a", "b")
	got := NewMerger().Feed(tr, sums, time.UnixMilli(2))
	if n := len(got.Subsets["s"]); n != 3 {
		t.Fatalf("pseudo nodes %v, want 3 (r1 {a,b}, r2 {a,b}, r2 {b})", got.Subsets["s"])
	}
	rates := tr.NodeRates("s", time.UnixMilli(2))
	if len(rates) != 2 || rates[pseudoNode("r1", []string{"a", "b"})]["a"] != 5 || rates[pseudoNode("r2", []string{"a", "b"})]["b"] != 7 {
		t.Fatalf("rates %v", rates)
	}
}

func TestRound5(t *testing.T) {
	for _, c := range []struct{ in, want float64 }{{0, 0}, {123456, 123460}, {0.000123456, 0.00012346}, {1, 1}, {99.99949, 99.999}} {
		if got := round5(c.in); got != c.want && (got-c.want)/c.want > 1e-12 {
			t.Errorf("round5(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

func TestTablesDiffer(t *testing.T) {
	base := map[string]map[string]uint32{"s": {"a": 100, "b": 200}}
	for _, c := range []struct {
		name string
		b    map[string]map[string]uint32
		want bool
	}{
		{"same", map[string]map[string]uint32{"s": {"a": 100, "b": 200}}, false},
		{"scaled", map[string]map[string]uint32{"s": {"a": 50, "b": 100}}, false},
		{"small move", map[string]map[string]uint32{"s": {"a": 101, "b": 200}}, false},
		{"large move", map[string]map[string]uint32{"s": {"a": 200, "b": 200}}, true},
		{"other endpoint", map[string]map[string]uint32{"s": {"a": 100, "c": 200}}, true},
		{"other service", map[string]map[string]uint32{"t": {"a": 100, "b": 200}}, true},
		{"more services", map[string]map[string]uint32{"s": {"a": 100, "b": 200}, "t": {"x": 1}}, true},
	} {
		if got := tablesDiffer(base, c.b, 0.05); got != c.want {
			t.Errorf("%s: tablesDiffer = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestTrackerPrune(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tr := newTestTracker(t, nil, "a")
	observe(t, tr, t0, client("n1", "a", t0, 1, 0, 0), client("n2", "a", t0.Add(-2*time.Minute), 1, 0, 0))
	tr.Prune(t0.Add(90 * time.Second)) // n2's report is 3.5 minutes old: expired
	if n := len(tr.services["s"].endpoints["a"].nodes); n != 1 {
		t.Fatalf("%d node reports kept, want 1", n)
	}
}
