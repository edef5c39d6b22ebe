package envoy

import (
	"maps"
	"testing"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
)

// TestTargetCluster: a subset's cluster is "<service>~<subset>", the
// default target's the service's own.
func TestTargetCluster(t *testing.T) {
	if got := TargetCluster("web", "v2"); got != "web~v2" {
		t.Errorf("TargetCluster(web, v2) = %q", got)
	}
	if got := TargetCluster("web", ""); got != "web" {
		t.Errorf("TargetCluster(web, \"\") = %q", got)
	}
}

// TestHTTPRouteConfigSplit: a route's Split is sent as weighted_clusters
// (weights as given, 0 left out), a single cluster left as the route's
// cluster; the route's timeout and retries stay on the action.
func TestHTTPRouteConfigSplit(t *testing.T) {
	for name, tc := range map[string]struct {
		split    []WeightedCluster
		cluster  string            // want a plain cluster
		weighted map[string]uint32 // want weighted_clusters
	}{
		"90/10": {split: []WeightedCluster{{Cluster: "web~v1", Weight: 9000}, {Cluster: "web~v2", Weight: 1000}},
			weighted: map[string]uint32{"web~v1": 9000, "web~v2": 1000}},
		"three, one at 0": {split: []WeightedCluster{{Cluster: "web~v1", Weight: 5000}, {Cluster: "web~v2"}, {Cluster: "api", Weight: 5000}},
			weighted: map[string]uint32{"web~v1": 5000, "api": 5000}},
		"one left":  {split: []WeightedCluster{{Cluster: "web~v1"}, {Cluster: "web~v2", Weight: 10000}}, cluster: "web~v2"},
		"one alone": {split: []WeightedCluster{{Cluster: "web~v1", Weight: 1}}, cluster: "web~v1"},
	} {
		t.Run(name, func(t *testing.T) {
			l := HTTPListener{Name: "ingress", Address: "0.0.0.0:10000", Routes: []Route{
				{Prefix: "/", Split: tc.split, Timeout: time.Second, Retries: 2}}}
			res, err := BuildHTTPListener(l)
			if err != nil {
				t.Fatal(err)
			}
			a := res.Route.GetVirtualHosts()[0].GetRoutes()[0].GetRoute()
			if got := a.GetCluster(); got != tc.cluster {
				t.Errorf("cluster %q, want %q", got, tc.cluster)
			}
			if got := weights(a.GetWeightedClusters()); !maps.Equal(got, tc.weighted) {
				t.Errorf("weighted clusters %v, want %v", got, tc.weighted)
			}
			if a.GetTimeout().AsDuration() != time.Second || a.GetRetryPolicy().GetNumRetries().GetValue() != 2 {
				t.Errorf("timeout %v, retry policy %v", a.GetTimeout(), a.GetRetryPolicy())
			}
		})
	}
}

func weights(wc *routev3.WeightedCluster) map[string]uint32 {
	if wc == nil {
		return nil
	}
	out := map[string]uint32{}
	for _, c := range wc.GetClusters() {
		out[c.GetName()] = c.GetWeight().GetValue()
	}
	return out
}
