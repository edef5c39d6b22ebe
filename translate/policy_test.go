package translate_test

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/xds-server/xds-server/discovery"
	"github.com/xds-server/xds-server/policy"
	"github.com/xds-server/xds-server/translate"
)

// TestPolicyServiceDefault: a service without a policy gets what it gets
// today (ServiceResources): the same cluster, load assignment and route,
// so wiring PolicyService in changes nothing for it.
func TestPolicyServiceDefault(t *testing.T) {
	svc := discovery.Service{Name: "web", Endpoints: []discovery.Endpoint{
		{ID: "b", Address: "10.0.0.2", Port: 80, Health: discovery.HealthHealthy},
		{ID: "a", Address: "10.0.0.1", Port: 80, Health: discovery.HealthDegraded, Meta: map[string]string{"v": "1"}},
	}}
	set := translate.ServiceSettings{LBPolicy: "least_request"}
	got, err := translate.PolicyService(svc, set, policy.Policy{Service: "web"}, []string{""})
	if err != nil {
		t.Fatal(err)
	}
	want, err := translate.ServiceResources(translate.Service(svc, set, nil))
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Clusters) != 1 || !proto.Equal(got.Clusters[0], want.Cluster) {
		t.Errorf("clusters %v, want %v", got.Clusters, want.Cluster)
	}
	if len(got.LoadAssignments) != 1 || !proto.Equal(got.LoadAssignments[0], want.LoadAssignment) {
		t.Errorf("load assignments %v, want %v", got.LoadAssignments, want.LoadAssignment)
	}
	if !proto.Equal(got.Route, want.Route) {
		t.Errorf("route %v, want %v", got.Route, want.Route)
	}
	if len(got.External) != 0 || len(got.Targets) != 1 || got.Targets[0] != (translate.Target{Service: "web"}) {
		t.Errorf("targets %v, external %v", got.Targets, got.External)
	}
}

// TestTargetCluster: the default target keeps the service's name.
func TestTargetCluster(t *testing.T) {
	for _, tc := range []struct {
		t    translate.Target
		want string
	}{{translate.Target{Service: "web"}, "web"}, {translate.Target{Service: "web", Subset: "v2"}, "web~v2"}} {
		if got := tc.t.Cluster(); got != tc.want {
			t.Errorf("%+v.Cluster() = %q, want %q", tc.t, got, tc.want)
		}
	}
}
