package translate

import (
	"testing"

	"github.com/xds-server/xds-server/envoy"
)

// TestLocalizeSpillNodeWithoutRegion: a node that names its zone but no
// region (its zone level matches the zone name alone) keeps its zone's
// spill share, as one that names the endpoints' region does; one in
// another zone is not spilled.
func TestLocalizeSpillNodeWithoutRegion(t *testing.T) {
	ep := func(id, zone string, port uint32) envoy.Endpoint {
		return envoy.Endpoint{ID: id, Address: "10.0.0.1", Port: port, Health: envoy.HealthHealthy,
			Locality: envoy.Locality{Region: "dc1", Zone: zone}}
	}
	s := envoy.Service{Name: "api", Endpoints: []envoy.Endpoint{ep("a1", "a", 1), ep("b1", "b", 2)}}
	f, err := ParseFailover([]string{"zone"})
	if err != nil {
		t.Fatal(err)
	}
	set := ServiceSettings{Locality: LocalityPolicy{Failover: f, Spill: true}}
	spill := map[Zone]ZoneSpill{{"dc1", "a"}: {Keep: 0.75}, {"dc1", "b"}: {Keep: 1, Spare: 50}}
	for _, c := range []struct {
		at       Place
		wantA    uint32 // zone a's locality weight at priority 0
		wantPrio uint32 // zone b's priority
	}{
		{Place{Zone: "a"}, 750_000, 0},
		{Place{Region: "dc1", Zone: "a"}, 750_000, 0},
		{Place{Zone: "b"}, 0, 0},
		{Place{Region: "r2", Zone: "a"}, 0, 0}, // another region's zone a: no endpoint in its zone
	} {
		out, err := Localize(s, set, LocalizeInput{At: c.at, Spill: spill, Index: -1})
		if err != nil {
			t.Fatal(err)
		}
		got := out.LocalityWeights[envoy.PriorityLocality{Locality: envoy.Locality{Region: "dc1", Zone: "a"}}]
		if got != c.wantA {
			t.Errorf("node at %+v: zone a's locality weight %d, want %d (%+v)", c.at, got, c.wantA, out.Endpoints)
		}
		for _, e := range out.Endpoints {
			if e.ID == "b1" && e.Priority != c.wantPrio {
				t.Errorf("node at %+v: zone b at priority %d, want %d", c.at, e.Priority, c.wantPrio)
			}
		}
	}
}
