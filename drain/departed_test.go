package drain

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

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

// depStore is a memStore that shares departures: Record keeps what it is
// given; Watch passes on the departures set in it, then the drains.
type depStore struct {
	memStore
	mu         sync.Mutex
	recorded   []Departed
	back       []Departed
	stored     []Departed
	onDeparted func([]Departed)
}

func (d *depStore) Record(departed, back []Departed) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.recorded = append(d.recorded, departed...)
	d.back = append(d.back, back...)
}

func (d *depStore) OnDeparted(apply func([]Departed)) { d.onDeparted = apply }

func (d *depStore) Watch(_ context.Context, apply func([]Admin)) {
	d.onDeparted(d.stored)
	apply(nil)
}

func TestManagerSharesDepartures(t *testing.T) {
	now := drainT0
	st := &depStore{memStore: memStore{drains: map[Target]Admin{}},
		stored: []Departed{{Service: "api", Endpoint: ep("c"), Until: drainT0.Add(30 * time.Second)}}}
	var got []discovery.Snapshot
	s, err := New(Config{Emit: func(s discovery.Snapshot) { got = append(got, s) }, Store: st, Now: func() time.Time { return now },
		Policy: Policy{Window: func(string) time.Duration { return time.Minute }}, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	s.Observe(drainWorld(ep("a"), ep("b")))
	s.Watch(context.Background())
	if len(got) != 1 {
		t.Fatalf("emitted %d snapshots, want 1 (once the store was read)", len(got))
	}
	if h, why, _ := drainOf(got[0], "c"); h != discovery.HealthDraining || why != SourceDeregistered {
		t.Errorf("c (departed on another replica) = %v %q, want draining deregistered", h, why)
	}
	now = drainT0.Add(time.Second)
	s.Observe(drainWorld(ep("a"), ep("c")))
	if h, _, _ := drainOf(got[len(got)-1], "b"); h != discovery.HealthDraining {
		t.Errorf("b = %v after it left, want draining", h)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.recorded) != 1 || st.recorded[0].Endpoint.ID != "b" || !st.recorded[0].Until.Equal(now.Add(time.Minute)) {
		t.Errorf("recorded %+v, want b until %v", st.recorded, now.Add(time.Minute))
	}
	if len(st.back) != 1 || st.back[0].Endpoint.ID != "c" {
		t.Errorf("back %+v, want c (registered again)", st.back)
	}
}

func TestManagerWithoutDeparturesStore(t *testing.T) {
	s, got := newStoreDrains(t, &memStore{drains: map[Target]Admin{}})
	if s.dep != nil {
		t.Fatal("a Store without Departures shares departures")
	}
	s.replace(nil)
	s.Observe(drainWorld(ep("a")))
	if len(*got) != 1 {
		t.Fatalf("emitted %d, want 1", len(*got))
	}
}
