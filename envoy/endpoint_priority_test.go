package envoy

import (
	"strings"
	"testing"
)

func TestLoadAssignmentPriorities(t *testing.T) {
	a, b := Locality{Region: "r", Zone: "a"}, Locality{Region: "r", Zone: "b"}
	s := Service{Name: "api", Endpoints: []Endpoint{
		{ID: "b1", Address: "10.0.0.3", Port: 80, Health: HealthHealthy, Weight: 5, Locality: b, Priority: 1, Datacenter: "dc2"},
		{ID: "a1", Address: "10.0.0.1", Port: 80, Health: HealthHealthy, Weight: 2, Locality: a},
		{ID: "a2", Address: "10.0.0.2", Port: 80, Health: HealthUnhealthy, Weight: 3, Locality: a},
		{ID: "b2", Address: "10.0.0.4", Port: 80, Health: HealthHealthy, Locality: b},
	}, OverprovisioningFactor: 200}
	cla, err := LoadAssignment(s)
	if err != nil {
		t.Fatal(err)
	}
	type group struct {
		prio   uint32
		zone   string
		weight uint32
		ids    string
	}
	var got []group
	for _, l := range cla.GetEndpoints() {
		var ids []string
		for _, e := range l.GetLbEndpoints() {
			ids = append(ids, e.GetEndpoint().GetHostname())
		}
		got = append(got, group{l.GetPriority(), l.GetLocality().GetZone(), l.GetLoadBalancingWeight().GetValue(), strings.Join(ids, ",")})
	}
	want := []group{{0, "a", 2, "a1,a2"}, {0, "b", 1, "b2"}, {1, "b", 5, "b1"}}
	if len(got) != len(want) {
		t.Fatalf("groups %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("group %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	if f := cla.GetPolicy().GetOverprovisioningFactor().GetValue(); f != 200 {
		t.Errorf("overprovisioning factor %d, want 200", f)
	}
	md := cla.GetEndpoints()[2].GetLbEndpoints()[0].GetMetadata().GetFilterMetadata()[MetadataNamespace].GetFields()
	if dc := md["datacenter"].GetStringValue(); dc != "dc2" {
		t.Errorf("datacenter metadata %q, want dc2", dc)
	}

	s.LocalityWeights = map[PriorityLocality]uint32{{0, b}: 70, {1, b}: 0}
	s.OverprovisioningFactor = 0
	cla, err = LoadAssignment(s)
	if err != nil {
		t.Fatal(err)
	}
	if w := cla.GetEndpoints()[1].GetLoadBalancingWeight().GetValue(); w != 70 {
		t.Errorf("set locality weight %d, want 70", w)
	}
	if w := cla.GetEndpoints()[2].GetLoadBalancingWeight().GetValue(); w != 1 {
		t.Errorf("a set weight of 0 is sent as %d, want 1", w)
	}
	if cla.GetPolicy() != nil {
		t.Errorf("policy %v without an overprovisioning factor, want none", cla.GetPolicy())
	}
}

func TestLoadAssignmentRejectsPriorityGap(t *testing.T) {
	s := Service{Name: "api", Endpoints: []Endpoint{
		{ID: "a", Address: "10.0.0.1", Port: 80, Health: HealthHealthy},
		{ID: "b", Address: "10.0.0.2", Port: 80, Health: HealthHealthy, Priority: 2},
	}}
	_, err := LoadAssignment(s)
	if err == nil || !strings.Contains(err.Error(), "no endpoint at priority 1") {
		t.Fatalf("error %v, want one naming the missing priority 1", err)
	}
}
