package drain

import (
	"testing"
	"time"

	"github.com/xds-server/xds-server/discovery"
)

func TestDepartedShared(t *testing.T) {
	const w = time.Minute
	window := Policy{Window: func(string) time.Duration { return w }}
	sharedB := Departed{Service: "api", Endpoint: ep("b"), Until: drainT0.Add(30 * time.Second)}
	type step struct {
		at       time.Duration // after drainT0
		world    []string      // registered endpoint ids
		shared   []Departed    // ReplaceDeparted before Apply; nil: unchanged
		wantB    string        // b's Drain; "-" absent, "" serving
		wantNext time.Duration // next deadline after drainT0; -1 none
		recorded []Departed    // first seen here
		back     []string      // came back
	}
	for name, steps := range map[string][]step{
		"local departure is recorded once": {
			{at: 0, world: []string{"a", "b"}, wantB: "", wantNext: -1},
			{at: time.Second, world: []string{"a"}, wantB: "deregistered", wantNext: time.Second + w,
				recorded: []Departed{{Service: "api", Endpoint: ep("b"), Until: drainT0.Add(time.Second + w)}}},
			{at: 2 * time.Second, world: []string{"a"}, wantB: "deregistered", wantNext: time.Second + w},
		},
		"shared departure served by a replica that never saw it": {
			{at: 0, world: []string{"a"}, shared: []Departed{sharedB}, wantB: "deregistered", wantNext: 30 * time.Second},
			{at: 30 * time.Second, world: []string{"a"}, wantB: "-", wantNext: -1},
		},
		"shared removal time wins over the local one": {
			{at: 0, world: []string{"a", "b"}, shared: []Departed{sharedB}, wantB: "", wantNext: -1},
			{at: 10 * time.Second, world: []string{"a"}, wantB: "deregistered", wantNext: 30 * time.Second},
			{at: 30 * time.Second, world: []string{"a"}, wantB: "-", wantNext: -1},
		},
		"re-registration after the departure is reported back": {
			{at: 0, world: []string{"a"}, shared: []Departed{sharedB}, wantB: "deregistered", wantNext: 30 * time.Second},
			{at: time.Second, world: []string{"a", "b"}, wantB: "", wantNext: -1, back: []string{"b"}},
			{at: 2 * time.Second, world: []string{"a"}, wantB: "deregistered", wantNext: 2*time.Second + w,
				recorded: []Departed{{Service: "api", Endpoint: ep("b"), Until: drainT0.Add(2*time.Second + w)}}},
		},
		"registered on the first snapshot is no re-registration": {
			{at: 0, world: []string{"a", "b"}, shared: []Departed{sharedB}, wantB: "", wantNext: -1},
			{at: time.Second, world: []string{"a", "b"}, wantB: "", wantNext: -1},
		},
		"expired shared departure is not served": {
			{at: time.Hour, world: []string{"a"}, shared: []Departed{sharedB}, wantB: "-", wantNext: -1},
		},
	} {
		t.Run(name, func(t *testing.T) {
			d := NewOverlay(window)
			for i, s := range steps {
				if s.shared != nil {
					d.ReplaceDeparted(s.shared)
				}
				var eps []discovery.Endpoint
				for _, id := range s.world {
					eps = append(eps, ep(id))
				}
				out, next := d.Apply(drainWorld(eps...), drainT0.Add(s.at))
				h, why, ok := drainOf(out, "b")
				switch {
				case s.wantB == "-" && ok:
					t.Errorf("step %d: b served (%v %q), want absent", i, h, why)
				case s.wantB != "-" && (!ok || why != s.wantB):
					t.Errorf("step %d: b = %v %q (present %v), want %q", i, h, why, ok, s.wantB)
				case s.wantB != "" && s.wantB != "-" && h != discovery.HealthDraining:
					t.Errorf("step %d: b health %v, want draining", i, h)
				}
				wantNext := time.Time{}
				if s.wantNext >= 0 {
					wantNext = drainT0.Add(s.wantNext)
				}
				if !next.Equal(wantNext) {
					t.Errorf("step %d: next %v, want %v", i, next, wantNext)
				}
				gone, back := d.Recorded()
				if len(gone) != len(s.recorded) || (len(gone) == 1 && (gone[0].Endpoint.ID != s.recorded[0].Endpoint.ID || !gone[0].Until.Equal(s.recorded[0].Until))) {
					t.Errorf("step %d: recorded %+v, want %+v", i, gone, s.recorded)
				}
				var ids []string
				for _, g := range back {
					ids = append(ids, g.Endpoint.ID)
				}
				if len(ids) != len(s.back) || (len(ids) == 1 && ids[0] != s.back[0]) {
					t.Errorf("step %d: back %v, want %v", i, ids, s.back)
				}
			}
		})
	}
}

func TestReplaceDepartedChanged(t *testing.T) {
	d := NewOverlay(Policy{})
	g := Departed{Service: "api", Endpoint: ep("b"), Until: drainT0}
	for i, tc := range []struct {
		list []Departed
		want bool
	}{
		{nil, false},
		{[]Departed{g}, true},
		{[]Departed{g}, false},
		{[]Departed{{Service: "api", Endpoint: ep("b"), Until: drainT0.Add(time.Second)}}, true},
		{nil, true},
	} {
		if got := d.ReplaceDeparted(tc.list); got != tc.want {
			t.Errorf("step %d: changed = %v, want %v", i, got, tc.want)
		}
	}
}
