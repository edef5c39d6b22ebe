package discovery

import (
	"slices"
	"testing"
)

func TestNormalizeSkipsBadEntries(t *testing.T) {
	ok := func(id, addr string, port int) Endpoint { return Endpoint{ID: id, Address: addr, Port: port} }
	raw := []Service{
		{Name: "b", Endpoints: []Endpoint{
			ok("b-3", "10.0.0.3", 80),
			ok("b-1", "10.0.0.1", 80),
			ok("", "10.0.0.9", 80),          // no id
			ok("b-noaddr", "", 80),          // no address
			ok("b-port0", "10.0.0.4", 0),    // port out of range
			ok("b-port", "10.0.0.5", 70000), // port out of range
			ok("b-dup", "10.0.0.6", 80),     // duplicate id: both dropped
			ok("b-dup", "10.0.0.7", 80),
			ok("b-2", "10.0.0.1", 80), // same address:port as b-1: the later id is dropped
			ok("b-bad", "not an address", 80),
		}},
		{Name: "a", Endpoints: []Endpoint{ok("a-1", "host.example", 1)}},
		{Name: "", Endpoints: []Endpoint{ok("x", "10.0.0.1", 1)}},
		{Name: "a"}, // duplicate service: the first one stays
	}
	snap, problems := Normalize(raw)
	if got := []string{snap.Services[0].Name, snap.Services[1].Name}; len(snap.Services) != 2 || got[0] != "a" || got[1] != "b" {
		t.Fatalf("services = %+v", snap.Services)
	}
	var ids []string
	for _, ep := range snap.Services[1].Endpoints {
		ids = append(ids, ep.ID)
	}
	if !slices.Equal(ids, []string{"b-1", "b-3"}) {
		t.Errorf("b endpoints = %v, want [b-1 b-3] (sorted, bad ones skipped)", ids)
	}
	reasons := map[string]int{}
	for _, p := range problems {
		reasons[p.Reason]++
	}
	want := map[string]int{ReasonNoID: 1, ReasonNoAddress: 1, ReasonBadPort: 2, ReasonDuplicateID: 2,
		ReasonDuplicateAdr: 1, ReasonBadAddress: 1, ReasonNoName: 1, ReasonDuplicateSvc: 1}
	for r, n := range want {
		if reasons[r] != n {
			t.Errorf("reason %s: %d problems, want %d (all: %v)", r, reasons[r], n, problems)
		}
	}
	if snap.Services[0].Endpoints[0].Meta == nil {
		t.Error("nil meta not replaced by an empty map")
	}
}

func TestNormalizeIsOrderIndependent(t *testing.T) {
	a := []Service{{Name: "s", Endpoints: []Endpoint{
		{ID: "2", Address: "10.0.0.2", Port: 1, Tags: []string{"z", "a"}},
		{ID: "1", Address: "10.0.0.1", Port: 1},
	}}}
	b := []Service{{Name: "s", Endpoints: []Endpoint{
		{ID: "1", Address: "10.0.0.1", Port: 1},
		{ID: "2", Address: "10.0.0.2", Port: 1, Tags: []string{"a", "z"}},
	}}}
	sa, _ := Normalize(a)
	sb, _ := Normalize(b)
	if !sa.Equal(sb) {
		t.Errorf("input order changed the snapshot:\n%+v\n%+v", sa, sb)
	}
	if a[0].Endpoints[0].Tags[0] != "z" {
		t.Error("Normalize modified its input")
	}
}

func TestLocalityFrom(t *testing.T) {
	for name, tc := range map[string]struct {
		meta map[string]string
		tags []string
		want Locality
	}{
		"meta wins":      {map[string]string{"zone": "m"}, []string{"zone=t"}, Locality{Region: "dc1", Zone: "m"}},
		"tag with =":     {nil, []string{"zone=t", "region=r"}, Locality{Region: "r", Zone: "t"}},
		"tag with colon": {nil, []string{"zone:t", "sub_zone:s"}, Locality{Region: "dc1", Zone: "t", SubZone: "s"}},
		"default region": {nil, nil, Locality{Region: "dc1"}},
		"unrelated tags": {nil, []string{"primary", "v=1"}, Locality{Region: "dc1"}},
	} {
		t.Run(name, func(t *testing.T) {
			if got := LocalityFrom(tc.meta, tc.tags, "dc1"); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}
