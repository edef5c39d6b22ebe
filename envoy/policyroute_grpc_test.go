package envoy

import (
	"context"
	"net"
	"testing"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	healthgrpc "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
)

// TestGRPCClientAcceptsPolicyRoutes: a grpc-go xDS client accepts what a
// traffic policy produces (subset clusters named "<service>~<subset>",
// ring hash, a RouteConfiguration with a query-parameter route, which
// grpc-go skips, a method route, which never matches a gRPC call (no
// ":method" in its metadata), a header route, weighted_clusters with a
// retry policy, a timeout and hash policies) and routes by it: the
// header route reaches v2's backend (the two routes before it, to v1,
// did not match), and every call is answered.
func TestGRPCClientAcceptsPolicyRoutes(t *testing.T) {
	hash := []RouteHashPolicy{{Header: "x-user"}, {SourceIP: true}}
	rc, err := PolicyRouteConfig("web", []PolicyRoute{
		{Prefix: "/", QueryParams: []QueryParamMatch{{Name: "debug", Present: true}}, Clusters: []WeightedCluster{{Cluster: "web~v1", Weight: 1}}},
		{Methods: []string{"POST"}, Clusters: []WeightedCluster{{Cluster: "web~v1", Weight: 1}}},
		{Prefix: "/grpc.health", CaseInsensitive: true,
			Headers:  []HeaderMatch{{Name: "x-canary", Exact: "true"}},
			Clusters: []WeightedCluster{{Cluster: "web~v2", Weight: 1}}, HashPolicies: hash},
		{Clusters: []WeightedCluster{{Cluster: "web~v1", Weight: 9000}, {Cluster: "web~v2", Weight: 1000}},
			Timeout: 10 * time.Second, HashPolicies: hash,
			Retry: &PolicyRetry{NumRetries: 2, ConnectFailure: true, StatusCodes: []uint32{503}, RetryOn: []string{"unavailable"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	web := Service{Name: "web"}
	lis, err := Listener(web)
	if err != nil {
		t.Fatal(err)
	}
	conn := subsetClient(t, "policy-client", lis, rc)
	checkServes(t, conn, metadata.Pairs("x-canary", "true", "x-user", "u1"), "v2")
	for range 5 {
		checkServes(t, conn, metadata.Pairs("x-user", "u1"), "")
	}
}

// subsetClient starts two health backends, one serving "v1" and one
// "v2", and an ADS server holding, for nodeID, the api_listener lis, rc,
// and the ring-hash clusters "web~v1" and "web~v2" of those backends; it
// returns a proxyless client of xds:///<lis's name>.
func subsetClient(t *testing.T, nodeID string, lis *listenerv3.Listener, rc *routev3.RouteConfiguration) *grpc.ClientConn {
	t.Helper()
	v1, v2 := startHealthBackend(t, "v1"), startHealthBackend(t, "v2")
	snapshots := cache.NewSnapshotCache(true, cache.IDHash{}, nil)
	xdsAddr := startADS(t, snapshots)
	clusters, clas := subsetResources(t, map[string]*net.TCPAddr{"web~v1": v1, "web~v2": v2})
	snap, err := cache.NewSnapshot("1", map[resource.Type][]types.Resource{
		resource.ClusterType: clusters, resource.EndpointType: clas,
		resource.ListenerType: {lis}, resource.RouteType: {rc},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := snapshots.SetSnapshot(context.Background(), nodeID, snap); err != nil {
		t.Fatal(err)
	}
	return xdsClient(t, xdsAddr, nodeID, lis.GetName())
}

// subsetResources are ring-hash clusters and load assignments, one per
// cluster name, each with its backend as the only endpoint.
func subsetResources(t *testing.T, backends map[string]*net.TCPAddr) (clusters, clas []types.Resource) {
	t.Helper()
	for name, backend := range backends {
		s := Service{Name: name, LBPolicy: RingHash, Cluster: ClusterOptions{RingHash: RingHashSize{Min: 64, Max: 1024}},
			Endpoints: []Endpoint{{ID: name, Address: backend.IP.String(), Port: uint32(backend.Port), Health: HealthHealthy}}}
		c, err := Cluster(s)
		if err != nil {
			t.Fatal(err)
		}
		cla, err := LoadAssignment(s)
		if err != nil {
			t.Fatal(err)
		}
		clusters, clas = append(clusters, c), append(clas, cla)
	}
	return clusters, clas
}

// checkServes calls Check for service on conn with md; a NACKed resource
// or a call routed to a backend that does not serve service fails it.
func checkServes(t *testing.T, conn *grpc.ClientConn, md metadata.MD, service string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := healthgrpc.NewHealthClient(conn).Check(metadata.NewOutgoingContext(ctx, md),
		&healthgrpc.HealthCheckRequest{Service: service})
	if err != nil {
		t.Fatalf("Check(%q) through xds:///web with %v: %v", service, md, err)
	}
	if resp.GetStatus() != healthgrpc.HealthCheckResponse_SERVING {
		t.Errorf("Check(%q): status %v", service, resp.GetStatus())
	}
}
