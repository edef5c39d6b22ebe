package envoy

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthgrpc "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/xds"
)

// TestGRPCClientAcceptsBootstrapAndClusters is the real check behind
// checkGRPCCluster: a grpc-go xDS client, configured by GRPCBootstrap's
// output, resolves a service whose cluster carries every cluster option
// through a go-control-plane ADS server, and calls a real backend. A bad
// bootstrap or a NACKed resource fails the call.
func TestGRPCClientAcceptsBootstrapAndClusters(t *testing.T) {
	backend := startHealthBackend(t)
	snapshots := cache.NewSnapshotCache(true, cache.IDHash{}, nil)
	xdsAddr := startADS(t, snapshots)

	opts := ClusterOptions{
		Protocol:           GRPC,
		HealthCheck:        HealthCheck{Enabled: true, GRPC: true, Interval: 5 * time.Second},
		OutlierDetection:   OutlierDetection{Enabled: true, Consecutive5xx: 3, MaxEjectionPercent: 50},
		CircuitBreakers:    CircuitBreakers{MaxConnections: 100, MaxRequests: 200, MaxRetries: 3},
		LocalityWeightedLB: true,
		NoPanic:            true,
		RingHash:           RingHashSize{Min: 64, Max: 4096},
		LoadReporting:      true,
	}
	for _, policy := range lbPolicies {
		t.Run(string(policy), func(t *testing.T) {
			nodeID := "client-" + string(policy)
			svc := Service{Name: "health", LBPolicy: policy, Cluster: opts, Endpoints: []Endpoint{{
				ID: "h1", Address: backend.IP.String(), Port: uint32(backend.Port), Health: HealthHealthy,
				Locality: Locality{Region: "r", Zone: "z"},
			}}}
			res, err := Build([]Service{svc})
			if err != nil {
				t.Fatal(err)
			}
			snap, err := cache.NewSnapshot("1", map[resource.Type][]types.Resource{
				resource.ClusterType:  {res.Clusters[0]},
				resource.EndpointType: {res.LoadAssignments[0]},
				resource.ListenerType: {res.Listeners[0]},
				resource.RouteType:    {res.Routes[0]},
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := snapshots.SetSnapshot(context.Background(), nodeID, snap); err != nil {
				t.Fatal(err)
			}
			conn := xdsClient(t, xdsAddr, nodeID, "health")
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			// Not WaitForReady: a NACKed resource fails the call at once
			// with grpc-go's reason, instead of at the deadline.
			resp, err := healthgrpc.NewHealthClient(conn).Check(ctx, &healthgrpc.HealthCheckRequest{})
			if err != nil {
				t.Fatalf("call through xds:///health: %v", err)
			}
			if resp.GetStatus() != healthgrpc.HealthCheckResponse_SERVING {
				t.Errorf("status = %v", resp.GetStatus())
			}
		})
	}
}

// xdsClient is a grpc-go client of xds:///service, configured by
// GRPCBootstrap's output for nodeID to use the ADS server at xdsAddr;
// closed when the test ends.
func xdsClient(t *testing.T, xdsAddr, nodeID, service string) *grpc.ClientConn {
	t.Helper()
	bootstrap, err := GRPCBootstrap(BootstrapConfig{NodeID: nodeID, Cluster: "test", XDSAddress: xdsAddr})
	if err != nil {
		t.Fatal(err)
	}
	rb, err := xds.NewXDSResolverWithConfigForTesting(bootstrap)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient("xds:///"+service, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithResolvers(rb))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// startHealthBackend serves the gRPC health service on a free loopback
// port: "" and each of serving report SERVING (a test tells backends
// apart by the names they serve).
func startHealthBackend(t *testing.T, serving ...string) *net.TCPAddr {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	hs := health.NewServer()
	for _, name := range serving {
		hs.SetServingStatus(name, healthgrpc.HealthCheckResponse_SERVING)
	}
	healthgrpc.RegisterHealthServer(srv, hs)
	go srv.Serve(lis) //nolint:errcheck // ends with Stop
	t.Cleanup(srv.Stop)
	return lis.Addr().(*net.TCPAddr)
}

// startADS serves snapshots over ADS on a free loopback port.
func startADS(t *testing.T, snapshots cache.SnapshotCache) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv := grpc.NewServer()
	discoverygrpc.RegisterAggregatedDiscoveryServiceServer(srv, server.NewServer(ctx, snapshots, nil))
	go srv.Serve(lis) //nolint:errcheck // ends with Stop
	t.Cleanup(func() { cancel(); srv.Stop() })
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(lis.Addr().(*net.TCPAddr).Port))
}
