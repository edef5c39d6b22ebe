package envoy

import (
	"strings"
	"testing"
	"time"
)

// TestPolicyRouteConfigErrors: what Envoy or grpc-go would refuse is an
// error naming the route.
func TestPolicyRouteConfigErrors(t *testing.T) {
	one := []WeightedCluster{{Cluster: "web", Weight: 1}}
	for _, tc := range []struct {
		name   string
		routes []PolicyRoute
		want   string
	}{
		{"no cluster", []PolicyRoute{{}}, "no cluster with a weight above 0"},
		{"all zero", []PolicyRoute{{Clusters: []WeightedCluster{{Cluster: "a"}, {Cluster: "b"}}}}, "no cluster with a weight above 0"},
		{"empty cluster", []PolicyRoute{{Clusters: []WeightedCluster{{Weight: 1}}}}, "empty name"},
		{"bad path regex", []PolicyRoute{{Regex: "(", Clusters: one}}, "path regex"},
		{"bad header", []PolicyRoute{{Headers: []HeaderMatch{{Name: "x"}}, Clusters: one}}, "headers[0]"},
		{"bad retry_on", []PolicyRoute{{Clusters: one, Retry: &PolicyRetry{RetryOn: []string{"sometimes"}}}}, `"sometimes"`},
		{"negative timeout", []PolicyRoute{{Clusters: one, Timeout: -time.Second}}, "negative"},
		{"empty hash header", []PolicyRoute{{Clusters: one, HashPolicies: []RouteHashPolicy{{}}}}, "HeaderName"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := PolicyRouteConfig("web", tc.routes)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
	if _, err := PolicyRouteConfig("", nil); err == nil {
		t.Error("an empty name is accepted")
	}
}

// TestPolicyRouteConfigClusters: one cluster is a cluster; more are
// weighted clusters without the zero weights; a lone positive weight is
// a cluster; retries default their conditions.
func TestPolicyRouteConfigClusters(t *testing.T) {
	rc, err := PolicyRouteConfig("web", []PolicyRoute{
		{Path: "/a", Clusters: []WeightedCluster{{Cluster: "web~v1", Weight: 9000}, {Cluster: "web~v2", Weight: 1000}}},
		{Path: "/b", Clusters: []WeightedCluster{{Cluster: "web~v1"}, {Cluster: "web~v2", Weight: 10000}}},
		{Clusters: []WeightedCluster{{Cluster: "web"}}, Retry: &PolicyRetry{}},
	})
	if err != nil {
		t.Fatal(err)
	}
	routes := rc.GetVirtualHosts()[0].GetRoutes()
	wc := routes[0].GetRoute().GetWeightedClusters().GetClusters()
	if len(wc) != 2 || wc[0].GetName() != "web~v1" || wc[0].GetWeight().GetValue() != 9000 || wc[1].GetWeight().GetValue() != 1000 {
		t.Errorf("route /a: weighted clusters %v", wc)
	}
	if got := routes[1].GetRoute().GetCluster(); got != "web~v2" {
		t.Errorf("route /b: cluster %q, want web~v2", got)
	}
	last := routes[2]
	if last.GetMatch().GetPrefix() != "/" || last.GetRoute().GetCluster() != "web" {
		t.Errorf("catch-all route: %v", last)
	}
	if rp := last.GetRoute().GetRetryPolicy(); rp.GetRetryOn() != DefaultRetryOn || rp.GetNumRetries() != nil {
		t.Errorf("retry policy %v, want retry_on %s and num_retries unset", rp, DefaultRetryOn)
	}
}
