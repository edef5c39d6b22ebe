package weights

import (
	"testing"
)

// pernodeTable is a service of three endpoints of equal capacity (100
// requests/s at utilization 1).
func pernodeTable() ServiceTable {
	rows := make([]Row, 3)
	for i, id := range []string{"a", "b", "c"} {
		rows[i] = Row{Endpoint: id, Weight: 1, Float: 100, Capacity: 100, Reason: ReasonReported}
	}
	return ServiceTable{Name: "api", Rows: rows}
}

func TestPerNodePlan(t *testing.T) {
	p, err := NewPerNode(SolveConfig{Damping: 1, MaxRatio: 100, MaxSweeps: 100, Tolerance: 1e-4}, 0.05)
	if err != nil {
		t.Fatal(err)
	}
	// heavy uses {a, b}, light {b, c}: equal utilization needs heavy to
	// split evenly and light to send (almost) everything to c.
	subsets := map[string][]string{"heavy": {"a", "b"}, "light": {"b", "c"}, "silent": {"a", "c"}}
	rates := map[string]map[string]float64{"heavy": {"a": 45, "b": 45}, "light": {"b": 5, "c": 5}}
	got, changed, err := p.Plan(pernodeTable(), subsets, rates)
	if err != nil {
		t.Fatal(err)
	}
	if !changed {
		t.Error("first plan: changed = false")
	}
	if _, ok := got["silent"]; ok {
		t.Errorf("a node without rates got weights of its own: %v", got["silent"])
	}
	h, l := got["heavy"], got["light"]
	if r := float64(h["a"]) / float64(h["b"]); r < 0.9 || r > 1.1 {
		t.Errorf("heavy a:b = %v (%v), want about 1", r, h)
	}
	if l["c"] < 20*l["b"] || l["b"] < 1 {
		t.Errorf("light = %v, want nearly all on c and b >= 1", l)
	}
	d, ok := p.Debug("api", "light")
	if !ok || d.Global || d.Rate != 10 || len(d.Endpoints) != 2 || d.Endpoints[1].Weight != l["c"] {
		t.Errorf("Debug(light) = %+v, %v", d, ok)
	}
	if d, ok := p.Debug("api", "silent"); !ok || !d.Global {
		t.Errorf("Debug(silent) = %+v, %v; want the global fallback", d, ok)
	}

	// The same load again: within min_change, nothing to push.
	again, changed, err := p.Plan(pernodeTable(), subsets, rates)
	if err != nil || changed {
		t.Errorf("same input: changed = %v, err = %v", changed, err)
	}
	if again["heavy"]["a"] != h["a"] || again["light"]["c"] != l["c"] {
		t.Errorf("same input, new weights: %v -> %v", got, again)
	}

	// light stops reporting: it falls back to the global weights.
	delete(rates, "light")
	got, changed, err = p.Plan(pernodeTable(), subsets, rates)
	if err != nil || !changed {
		t.Errorf("light fell back: changed = %v, err = %v", changed, err)
	}
	if _, ok := got["light"]; ok {
		t.Errorf("light still has weights of its own: %v", got["light"])
	}
	p.Forget(map[string]bool{})
	if _, ok := p.Debug("api", "heavy"); ok {
		t.Error("Forget kept the service")
	}
}

func TestPerNodeValidates(t *testing.T) {
	if _, err := NewPerNode(SolveConfig{}, 0.05); err == nil {
		t.Error("zero SolveConfig accepted")
	}
	if _, err := NewPerNode(DefaultSolveConfig(), 1); err == nil {
		t.Error("min change 1 accepted")
	}
}

func TestSharesMoved(t *testing.T) {
	for name, tc := range map[string]struct {
		old, new map[string]uint32
		want     bool
	}{
		"same":                {map[string]uint32{"a": 10, "b": 10}, map[string]uint32{"a": 10, "b": 10}, false},
		"scaled":              {map[string]uint32{"a": 10, "b": 10}, map[string]uint32{"a": 20, "b": 20}, false},
		"within 5%":           {map[string]uint32{"a": 100, "b": 100}, map[string]uint32{"a": 104, "b": 100}, false},
		"beyond 5%":           {map[string]uint32{"a": 100, "b": 100}, map[string]uint32{"a": 130, "b": 100}, true},
		"other members":       {map[string]uint32{"a": 1, "b": 1}, map[string]uint32{"a": 1, "c": 1}, true},
		"a member more":       {map[string]uint32{"a": 1}, map[string]uint32{"a": 1, "b": 1}, true},
		"small share doubles": {map[string]uint32{"a": 1, "b": 100}, map[string]uint32{"a": 2, "b": 100}, true},
	} {
		t.Run(name, func(t *testing.T) {
			if got := sharesMoved(tc.old, tc.new, 0.05); got != tc.want {
				t.Errorf("sharesMoved = %v, want %v", got, tc.want)
			}
		})
	}
}
