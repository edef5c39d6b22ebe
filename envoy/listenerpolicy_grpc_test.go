package envoy

import (
	"testing"

	"google.golang.org/grpc/metadata"
)

// TestGRPCClientFollowsAppliedPolicyRoutes: a proxyless client of
// xds:///ingress (the listener's api_listener) follows a listener route
// to web through web's policy routes: x-canary reaches v2, the rest v1
// (neither is the cluster "web", which does not exist here).
func TestGRPCClientFollowsAppliedPolicyRoutes(t *testing.T) {
	res, err := BuildHTTPListener(HTTPListener{Name: "ingress", Address: "127.0.0.1:10000", Routes: []Route{
		{Prefix: "/grpc.health.v1.Health/", Service: "web"}}})
	if err != nil {
		t.Fatal(err)
	}
	rc, err := ApplyPolicyRoutes(res.Route, map[string][]PolicyRoute{"web": {
		{Headers: []HeaderMatch{{Name: "x-canary", Exact: "1"}}, Clusters: []WeightedCluster{{Cluster: "web~v2"}}},
		{Clusters: []WeightedCluster{{Cluster: "web~v1"}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	conn := subsetClient(t, "listener-client", res.APIListener, rc)
	checkServes(t, conn, metadata.Pairs("x-canary", "1"), "v2")
	checkServes(t, conn, metadata.Pairs("x-canary", "0"), "v1")
	checkServes(t, conn, nil, "v1")
}
