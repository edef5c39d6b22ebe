package weights

import (
	"math"
	"testing"
)

func TestChanged(t *testing.T) {
	tab := func(rows ...Row) Table {
		return Table{Services: []ServiceTable{{Name: "s", Rows: rows}}}
	}
	r := func(id string, w uint32) Row { return Row{Endpoint: id, Weight: w, Reason: ReasonReported} }
	expired := func(id string, w uint32) Row { return Row{Endpoint: id, Weight: w, Reason: ReasonExpired} }
	base := tab(r("a", 100), r("b", 200), r("c", 300))
	for name, tc := range map[string]struct {
		new       Table
		minChange float64
		want      bool
	}{
		"identical":                 {new: base, minChange: 0.05},
		"all scaled alike":          {new: tab(r("a", 200), r("b", 400), r("c", 600)), minChange: 0.05},
		"small change":              {new: tab(r("a", 103), r("b", 200), r("c", 300)), minChange: 0.05},
		"large change":              {new: tab(r("a", 110), r("b", 200), r("c", 300)), minChange: 0.05, want: true},
		"small change, any counts":  {new: tab(r("a", 101), r("b", 200), r("c", 300)), minChange: 0, want: true},
		"scaled alike, any counts":  {new: tab(r("a", 200), r("b", 400), r("c", 600)), minChange: 0, want: true},
		"endpoint appeared":         {new: tab(r("a", 100), r("b", 200), r("c", 300), r("d", 1)), minChange: 0.05, want: true},
		"endpoint disappeared":      {new: tab(r("a", 100), r("b", 200)), minChange: 0.05, want: true},
		"endpoint replaced":         {new: tab(r("a", 100), r("b", 200), r("d", 300)), minChange: 0.05, want: true},
		"expired, same weight":      {new: tab(r("a", 100), expired("b", 200), r("c", 300)), minChange: 0.05, want: true},
		"service appeared":          {new: Table{Services: append(base.Services, ServiceTable{Name: "t"})}, minChange: 0.05, want: true},
		"service disappeared":       {new: Table{}, minChange: 0.05, want: true},
		"negative threshold is any": {new: tab(r("a", 101), r("b", 200), r("c", 300)), minChange: -1, want: true},
		"NaN threshold is any":      {new: tab(r("a", 101), r("b", 200), r("c", 300)), minChange: math.NaN(), want: true},
		"share moved on the margin": {new: tab(r("a", 100), r("b", 200), r("c", 340)), minChange: 0.05, want: true},
	} {
		t.Run(name, func(t *testing.T) {
			if got := Changed(base, tc.new, tc.minChange); got != tc.want {
				t.Fatalf("Changed = %v, want %v", got, tc.want)
			}
		})
	}
	back := tab(r("a", 100), expired("b", 200), r("c", 300))
	if !Changed(back, base, 0.05) {
		t.Error("coming back from expiry is not a change")
	}
}

func TestTableLookups(t *testing.T) {
	tab := Table{Services: []ServiceTable{
		{Name: "a", Rows: []Row{{Endpoint: "x", Weight: 3}, {Endpoint: "y", Weight: 4}}},
		{Name: "b"},
	}}
	if w, ok := tab.Weight("a", "y"); !ok || w != 4 {
		t.Errorf("Weight(a, y) = %d, %v", w, ok)
	}
	if _, ok := tab.Weight("a", "z"); ok {
		t.Error("Weight(a, z) found")
	}
	if _, ok := tab.Weight("c", "x"); ok {
		t.Error("Weight(c, x) found")
	}
	if s, ok := tab.Service("b"); !ok || s.Name != "b" {
		t.Errorf("Service(b) = %v, %v", s, ok)
	}
}
