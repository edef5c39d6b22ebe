package weights

import (
	"maps"
	"math"
	"testing"
	"time"
)

// newTestTracker tracks service "s" with the given endpoints (static
// weight 0) under the default config edited by edit.
func newTestTracker(t *testing.T, edit func(*Config), ids ...string) *Tracker {
	t.Helper()
	cfg := DefaultConfig()
	if edit != nil {
		edit(&cfg)
	}
	tr, err := NewTracker(cfg)
	if err != nil {
		t.Fatal(err)
	}
	eps := make([]Endpoint, len(ids))
	for i, id := range ids {
		eps[i] = Endpoint{ID: id}
	}
	if err := tr.SetEndpoints("s", eps); err != nil {
		t.Fatal(err)
	}
	return tr
}

func noBlackout(c *Config) { c.BlackoutPeriod = 0 }

// load is a backend report of endpoint id of service "s".
func load(id string, at time.Time, qps, eps, util float64) Report {
	return Report{Service: "s", Endpoint: id, At: at, QPS: qps, EPS: eps, CPU: util}
}

func observe(t *testing.T, tr *Tracker, now time.Time, rs ...Report) {
	t.Helper()
	for _, r := range rs {
		if err := tr.Observe(r, now); err != nil {
			t.Fatal(err)
		}
	}
}

// rowOf returns the row of endpoint id of service "s" in tab.
func rowOf(t *testing.T, tab Table, id string) Row {
	t.Helper()
	s, ok := tab.Service("s")
	if !ok {
		t.Fatal("no service s")
	}
	r, ok := s.Row(id)
	if !ok {
		t.Fatalf("no endpoint %s", id)
	}
	return r
}

func weightsOf(t *testing.T, tab Table) map[string]uint32 {
	t.Helper()
	s, _ := tab.Service("s")
	out := map[string]uint32{}
	for _, r := range s.Rows {
		out[r.Endpoint] = r.Weight
	}
	return out
}

func TestTrackerWeights(t *testing.T) {
	for name, tc := range map[string]struct {
		static  map[string]uint32
		reports []Report
		want    map[string]uint32
		reasons map[string]Reason
	}{
		"idle backend gets the largest weight": {
			reports: []Report{load("a", t0, 100, 0, 0.2), load("b", t0, 100, 0, 0.5), load("c", t0, 100, 0, 0.8)},
			want:    map[string]uint32{"a": 400, "b": 160, "c": 100},
		},
		"errors cost weight": {
			reports: []Report{load("a", t0, 100, 0, 0.5), load("b", t0, 100, 50, 0.5)},
			want:    map[string]uint32{"a": 200, "b": 100},
		},
		"application utilization wins over cpu": {
			reports: []Report{
				{Service: "s", Endpoint: "a", At: t0, QPS: 100, CPU: 0.9, App: 0.5},
				load("b", t0, 100, 0, 0.5),
			},
			want: map[string]uint32{"a": 100, "b": 100},
		},
		"silent endpoints get the mean": {
			reports: []Report{load("a", t0, 100, 0, 0.5), load("b", t0, 50, 0, 0.5)},
			want:    map[string]uint32{"a": 200, "b": 100, "c": 150},
			reasons: map[string]Reason{"a": ReasonReported, "c": ReasonNoReports},
		},
		"reports without utilization are incomplete": {
			reports: []Report{load("a", t0, 100, 0, 0), load("b", t0, 100, 0, 0.5)},
			want:    map[string]uint32{"a": 100, "b": 100},
			reasons: map[string]Reason{"a": ReasonIncomplete, "b": ReasonReported},
		},
		"static weights when nobody reports": {
			static: map[string]uint32{"a": 1, "b": 3},
			want:   map[string]uint32{"a": 100, "b": 300, "c": 100},
		},
		"static weights are ignored once some report": {
			static:  map[string]uint32{"a": 1, "b": 3},
			reports: []Report{load("a", t0, 100, 0, 0.5)},
			want:    map[string]uint32{"a": 100, "b": 100, "c": 100},
		},
		"the ratio is capped": {
			reports: []Report{load("a", t0, 100, 0, 0.01), load("b", t0, 1, 0, 0.5)},
			want:    map[string]uint32{"a": 10000, "b": 100, "c": 5001}, // c: the mean

		},
	} {
		t.Run(name, func(t *testing.T) {
			tr := newTestTracker(t, noBlackout)
			var eps []Endpoint
			for _, id := range []string{"a", "b", "c"} {
				if _, ok := tc.want[id]; ok {
					eps = append(eps, Endpoint{ID: id, Static: tc.static[id]})
				}
			}
			if err := tr.SetEndpoints("s", eps); err != nil {
				t.Fatal(err)
			}
			observe(t, tr, t0, tc.reports...)
			tab := tr.Update(t0)
			if got := weightsOf(t, tab); !maps.Equal(got, tc.want) {
				t.Errorf("weights %v, want %v", got, tc.want)
			}
			for id, want := range tc.reasons {
				if got := rowOf(t, tab, id).Reason; got != want {
					t.Errorf("%s: reason %s, want %s", id, got, want)
				}
			}
		})
	}
}

// step is one moment of a scripted test: reports observed at the offset,
// then an Update whose row for "b" is checked.
type step struct {
	at      time.Duration
	reports []Report
	reason  Reason
	float   float64 // 0: not checked
	guard   float64 // 0: not checked
}

func runSteps(t *testing.T, tr *Tracker, steps []step) []Table {
	t.Helper()
	var tabs []Table
	for i, s := range steps {
		now := t0.Add(s.at)
		observe(t, tr, now, s.reports...)
		tab := tr.Update(now)
		tabs = append(tabs, tab)
		r := rowOf(t, tab, "b")
		if r.Reason != s.reason {
			t.Errorf("step %d (%v): reason %s, want %s", i, s.at, r.Reason, s.reason)
		}
		if s.float != 0 && math.Abs(r.Float-s.float) > 1e-9*s.float {
			t.Errorf("step %d (%v): float weight %v, want %v", i, s.at, r.Float, s.float)
		}
		if s.guard != 0 && math.Abs(r.Guard-s.guard) > 1e-12 {
			t.Errorf("step %d (%v): guard %v, want %v", i, s.at, r.Guard, s.guard)
		}
	}
	return tabs
}

func at(d time.Duration) time.Time { return t0.Add(d) }

func TestTrackerBlackout(t *testing.T) {
	tr := newTestTracker(t, nil, "a", "b")
	// a has reported (weight 100) for long; b (weight 300) starts at 0.
	observe(t, tr, at(-30*time.Second), load("a", at(-30*time.Second), 50, 0, 0.5))
	a := func(d time.Duration) Report { return load("a", at(d), 50, 0, 0.5) }
	b := func(d time.Duration) Report { return load("b", at(d), 150, 0, 0.5) }
	runSteps(t, tr, []step{
		{at: 0, reports: []Report{a(0), b(0)}, reason: ReasonBlackout, float: 100},
		{at: 5 * time.Second, reports: []Report{a(5 * time.Second), b(5 * time.Second)}, reason: ReasonBlackout, float: 100},
		{at: 9999 * time.Millisecond, reason: ReasonBlackout, float: 100},
		{at: 10 * time.Second, reports: []Report{b(10 * time.Second)}, reason: ReasonReported, float: 300},
	})
}

func TestTrackerExpiry(t *testing.T) {
	tr := newTestTracker(t, nil, "a", "b", "c")
	a := func(d time.Duration) Report { return load("a", at(d), 50, 0, 0.5) }
	b := func(d time.Duration) Report { return load("b", at(d), 150, 0, 0.5) }
	c := func(d time.Duration) Report { return load("c", at(d), 100, 0, 0.5) }
	tabs := runSteps(t, tr, []step{
		{at: 0, reports: []Report{a(0), b(0), c(0)}, reason: ReasonBlackout, float: 0},
		{at: 10 * time.Second, reports: []Report{a(10 * time.Second), c(10 * time.Second)}, reason: ReasonReported, float: 300},
		// b is silent from now on; a and c keep reporting.
		{at: 3 * time.Minute, reports: []Report{a(3 * time.Minute), c(3 * time.Minute)}, reason: ReasonReported, float: 300},
		{at: 3*time.Minute + time.Second, reports: []Report{a(181 * time.Second), c(181 * time.Second)}, reason: ReasonExpired, float: 150},
		// b comes back: a new blackout starts, then its own weight.
		{at: 4 * time.Minute, reports: []Report{a(4 * time.Minute), b(4 * time.Minute), c(4 * time.Minute)}, reason: ReasonBlackout, float: 150},
		{at: 4*time.Minute + 10*time.Second, reports: []Report{b(250 * time.Second)}, reason: ReasonReported, float: 300},
	})
	if !Changed(tabs[2], tabs[3], DefaultMinChange) {
		t.Error("expiry is not a change to push")
	}
	// Everyone silent: all expire, and the static weights (1) come back.
	tab := tr.Update(at(time.Hour))
	for id, w := range weightsOf(t, tab) {
		if r := rowOf(t, tab, id); w != 100 || r.Reason != ReasonExpired || r.Float != 1 {
			t.Errorf("%s: weight %d reason %s float %v after an hour of silence", id, w, r.Reason, r.Float)
		}
	}
}

func TestTrackerSmoothing(t *testing.T) {
	tr := newTestTracker(t, func(c *Config) { c.BlackoutPeriod = 0; c.Smoothing = 0.5 }, "b")
	b := func(d time.Duration, qps float64) Report { return load("b", at(d), qps/2, 0, 0.5) }
	runSteps(t, tr, []step{
		{at: 0, reports: []Report{b(0, 100)}, reason: ReasonReported, float: 100},
		{at: time.Second, reports: []Report{b(time.Second, 200)}, reason: ReasonReported, float: 150},
		{at: 2 * time.Second, reports: []Report{b(2*time.Second, 200)}, reason: ReasonReported, float: 175},
		// no new report: no step, however many Updates
		{at: 3 * time.Second, reason: ReasonReported, float: 175},
		{at: 4 * time.Second, reason: ReasonReported, float: 175},
		// several reports between two Updates: one step toward the latest
		{at: 5 * time.Second, reports: []Report{b(4500*time.Millisecond, 1000), b(5*time.Second, 375)}, reason: ReasonReported, float: 275},
	})
}

// TestTrackerOverloadGuard walks b through the guard's three zones with
// OverloadFactor 0.5, threshold 0.9, recover mark 0.8 (target 0.85) and a
// period of one report, so every reading after the first window (the
// first two readings) is its own period's mean; b's formula weight is
// constant (qps = 100 * utilization) so only the guard moves.
func TestTrackerOverloadGuard(t *testing.T) {
	tr := newTestTracker(t, func(c *Config) {
		c.BlackoutPeriod, c.Smoothing, c.OverloadFactor, c.MaxRatio = 0, 1, 0.5, 10
		c.OverloadPeriod = time.Second
	}, "a", "b")
	var steps []step
	cut, gain := 0.85/0.95, 0.85/0.79
	for i, s := range []struct {
		util   float64
		reason Reason
		guard  float64
	}{
		{0.5, ReasonReported, 1},                   // the first period opens
		{0.85, ReasonReported, 1},                  // mean 0.675: below the recover mark, nothing to regain
		{0.95, ReasonOverloaded, cut},              // above: cut in proportion, to 0.85/0.95
		{1.2, ReasonOverloaded, cut * 0.5},         // saturated: the full factor
		{0.9, ReasonOverloaded, cut * 0.5},         // at the threshold: hold
		{0.85, ReasonOverloaded, cut * 0.5},        // between: hold, no regain
		{0.8, ReasonOverloaded, cut * 0.5},         // at the recover mark: hold
		{0.79, ReasonRecovering, cut * 0.5 * gain}, // below: regain in proportion
		{0.85, ReasonRecovering, cut * 0.5 * gain}, // between again: hold
		{1, ReasonOverloaded, cut * 0.25 * gain},   // saturated again: cut
		{1, ReasonOverloaded, cut * 0.125 * gain},  // and again
		{1, ReasonOverloaded, 0.1},                 // floor: 1/MaxRatio
		{1, ReasonOverloaded, 0.1},                 //
		{0.2, ReasonRecovering, 0.2},               // far below: at most 1/factor per period
		{0.2, ReasonRecovering, 0.4},               //
		{0.2, ReasonRecovering, 0.8},               //
		{0.2, ReasonReported, 1},                   // back to its own weight
	} {
		d := time.Duration(i) * time.Second
		steps = append(steps, step{
			at:      d,
			reports: []Report{load("a", at(d), 100, 0, 0.5), load("b", at(d), 100*s.util, 0, s.util)},
			reason:  s.reason, guard: s.guard, float: 100 * s.guard,
		})
	}
	tabs := runSteps(t, tr, steps)
	// The cut weight goes to the others: b's share falls with its guard.
	got := weightsOf(t, tabs[3])
	if want := 200 / (100 * cut * 0.5); math.Abs(float64(got["a"])/float64(got["b"])-want) > 0.01*want {
		t.Errorf("weights at guard %.3f: %v, want a/b %.3f", cut*0.5, got, want)
	}
}

func TestTrackerClientReports(t *testing.T) {
	tr := newTestTracker(t, noBlackout, "a", "b")
	node := func(n, id string, d time.Duration, qps float64) Report {
		return Report{Service: "s", Endpoint: id, Node: n, At: at(d), QPS: qps}
	}
	observe(t, tr, t0,
		load("a", t0, 0, 0, 0.5), // the backend knows its utilization, not its qps
		node("n1", "a", 0, 30), node("n2", "a", 0, 70), node("n1", "b", 0, 10),
		load("b", t0, 40, 0, 0.5), // b's own qps wins over the nodes'
	)
	tab := tr.Update(t0)
	if r := rowOf(t, tab, "a"); r.QPS != 100 || r.Nodes != 2 || r.Float != 200 || r.Capacity != 200 {
		t.Errorf("a: qps %v nodes %d float %v capacity %v; want 100, 2, 200, 200", r.QPS, r.Nodes, r.Float, r.Capacity)
	}
	if r := rowOf(t, tab, "b"); r.QPS != 40 || r.Nodes != 1 || r.Float != 80 {
		t.Errorf("b: qps %v nodes %d float %v; want 40, 1, 80", r.QPS, r.Nodes, r.Float)
	}
	want := map[string]map[string]float64{"n1": {"a": 30, "b": 10}, "n2": {"a": 70}}
	if got := tr.NodeRates("s", t0); !maps.EqualFunc(got, want, maps.Equal) {
		t.Errorf("NodeRates = %v, want %v", got, want)
	}
	observe(t, tr, at(time.Minute), node("n1", "a", time.Minute, 50))
	later := at(3*time.Minute + time.Second) // only n1's second report is fresh
	want = map[string]map[string]float64{"n1": {"a": 50}}
	if got := tr.NodeRates("s", later); !maps.EqualFunc(got, want, maps.Equal) {
		t.Errorf("NodeRates later = %v, want %v", got, want)
	}
	if r := rowOf(t, tr.Update(later), "a"); r.Nodes != 1 || r.QPS != 50 || r.Utilization != 0 {
		t.Errorf("a later: nodes %d qps %v utilization %v; want 1, 50, 0", r.Nodes, r.QPS, r.Utilization)
	}
	if got := tr.NodeRates("nope", t0); len(got) != 0 {
		t.Errorf("NodeRates of an unknown service = %v", got)
	}
}
