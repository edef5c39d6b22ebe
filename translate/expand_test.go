package translate

import (
	"strings"
	"testing"

	"github.com/xds-server/xds-server/discovery"
	"github.com/xds-server/xds-server/envoy"
	"github.com/xds-server/xds-server/policy"
)

func versioned(name string, versions ...string) discovery.Service {
	svc := discovery.Service{Name: name}
	for i, v := range versions {
		svc.Endpoints = append(svc.Endpoints, discovery.Endpoint{ID: name + "-" + string(rune('a'+i)), Address: "10.0.0.1",
			Port: 8000 + i, Health: discovery.HealthHealthy, Meta: map[string]string{"version": v}})
	}
	return svc
}

func subsetsResolver(t *testing.T, names ...string) *policy.Resolver {
	t.Helper()
	r := &policy.Resolver{}
	for _, n := range names {
		f, err := policy.CompileFilter("Service.Meta.version == " + n)
		if err != nil {
			t.Fatal(err)
		}
		r.Subsets = append(r.Subsets, policy.Subset{Name: n, Filter: f})
	}
	return r
}

func names(s discovery.Snapshot) string {
	var out []string
	for _, svc := range s.Services {
		out = append(out, svc.Name)
	}
	return strings.Join(out, " ")
}

// TestExpandErrors: a policy that sends to a subset nobody defines is not
// served (its service is as without one) and is reported; a listener's
// split to an undefined subset gets an empty cluster and is reported; the
// other services are unaffected.
func TestExpandErrors(t *testing.T) {
	snap := discovery.Snapshot{Services: []discovery.Service{versioned("api", "v1", "v2"), versioned("web", "v1", "v2")}}
	pols := map[string]policy.Policy{
		"api": {Service: "api", Resolver: subsetsResolver(t, "v1", "v2"), Splits: []policy.Split{{Weight: 50, ServiceSubset: "v1"}, {Weight: 50, ServiceSubset: "v2"}}},
		"web": {Service: "web", Splits: []policy.Split{{Weight: 100, Service: "api", ServiceSubset: "v3"}}},
	}
	exp := Expand(ExpandInput{Snapshot: snap, Policies: pols, Demanded: []Target{{Service: "web", Subset: "canary"}}})
	if got, want := names(exp.Snapshot), "api api~v1 api~v2 web web~canary"; got != want {
		t.Errorf("services %q, want %q", got, want)
	}
	if _, ok := exp.Routes["web"]; ok {
		t.Error("web's policy sends to an undefined subset but has routes")
	}
	if err := exp.Errors["web"]; err == nil || !strings.Contains(err.Error(), `subset "v3" of api is not defined`) {
		t.Errorf("web's error: %v", err)
	}
	if err := exp.Errors["web~canary"]; err == nil {
		t.Error("a listener split to an undefined subset is not reported")
	}
	if svc, _ := exp.Snapshot.Service("web~canary"); len(svc.Endpoints) != 0 {
		t.Errorf("undefined subset served %d endpoints, want none", len(svc.Endpoints))
	}
	if r := exp.Routes["api"]; len(r) != 1 || len(r[0].Clusters) != 2 {
		t.Errorf("api's routes: %+v", r)
	}
	if exp.Parent("api~v2") != "api" || exp.Parent("api") != "api" {
		t.Errorf("parents: %q %q", exp.Parent("api~v2"), exp.Parent("api"))
	}
}

// TestExpandSettings: the resolver's connect timeout and load balancer
// apply to every cluster of the service, over the file's settings.
func TestExpandSettings(t *testing.T) {
	r := subsetsResolver(t, "v1")
	r.ConnectTimeout = 3e9
	r.LoadBalancer = &policy.LoadBalancer{Policy: "least_request"}
	exp := Expand(ExpandInput{
		Snapshot: discovery.Snapshot{Services: []discovery.Service{versioned("web", "v1")}},
		Policies: map[string]policy.Policy{"web": {Service: "web", Resolver: r, Splits: []policy.Split{{Weight: 100, ServiceSubset: "v1"}}}},
		Settings: func(string) ServiceSettings { return ServiceSettings{SubsetSize: 3, LBPolicy: envoy.RingHash} },
	})
	for _, name := range []string{"web", "web~v1"} {
		set := exp.Settings(name)
		if set.ConnectTimeout != 3e9 || set.LBPolicy != envoy.LeastRequest || set.SubsetSize != 3 {
			t.Errorf("%s: settings %+v", name, set)
		}
	}
}

// TestRedistributeAllZero: when the serving targets' weights are all 0
// (a 0/100 split whose 100 has no serving endpoint), they share equally.
func TestRedistributeAllZero(t *testing.T) {
	snap := discovery.Snapshot{Services: []discovery.Service{versioned("a", "x"), {Name: "b"}, versioned("c", "x")}}
	got := redistribute([]envoy.PolicyRoute{{Clusters: []envoy.WeightedCluster{{Cluster: "a"}, {Cluster: "b", Weight: 100}, {Cluster: "c"}}}}, snap, nil, func(c string) []string { return []string{c} })
	want := []envoy.WeightedCluster{{Cluster: "a", Weight: 1}, {Cluster: "c", Weight: 1}}
	if c := got[0].Clusters; len(c) != 2 || c[0] != want[0] || c[1] != want[1] {
		t.Errorf("clusters %+v, want %+v", c, want)
	}
}
