package envoy

import (
	"context"
	"net"
	"testing"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc/metadata"
)

// TestGRPCClientFollowsAppliedPolicyRoutes: a proxyless client of
// xds:///ingress (the listener's api_listener) follows a listener route
// to web through web's policy routes: x-canary reaches v2, the rest v1
// (neither is the cluster "web", which does not exist here).
func TestGRPCClientFollowsAppliedPolicyRoutes(t *testing.T) {
	v1, v2 := startHealthBackend(t, "v1"), startHealthBackend(t, "v2")
	snapshots := cache.NewSnapshotCache(true, cache.IDHash{}, nil)
	xdsAddr := startADS(t, snapshots)
	clusters, clas := subsetResources(t, map[string]*net.TCPAddr{"web~v1": v1, "web~v2": v2})
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
	snap, err := cache.NewSnapshot("1", map[resource.Type][]types.Resource{
		resource.ClusterType: clusters, resource.EndpointType: clas,
		resource.ListenerType: {res.APIListener}, resource.RouteType: {rc},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := snapshots.SetSnapshot(context.Background(), "listener-client", snap); err != nil {
		t.Fatal(err)
	}
	conn := xdsClient(t, xdsAddr, "listener-client", "ingress")
	checkServes(t, conn, metadata.Pairs("x-canary", "1"), "v2")
	checkServes(t, conn, metadata.Pairs("x-canary", "0"), "v1")
	checkServes(t, conn, nil, "v1")
}
