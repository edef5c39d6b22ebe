package e2e

import (
	"context"
	"maps"
	"math"
	"slices"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	lrsv3 "github.com/envoyproxy/go-control-plane/envoy/service/load_stats/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/xds-server/xds-server/e2e/harness"
	"github.com/xds-server/xds-server/weights"
)

// apiPorts are the static endpoints of the per-node test: id -> port.
var apiPorts = map[string]uint32{"api-1": 9001, "api-2": 9002, "api-3": 9003}

// TestPerNodeWeightsFromLRS runs the real binary with per_node weights over
// subsets of 2 of 3 endpoints. Two nodes hold ADS streams and report load
// over real LRS streams, one 90 requests/s and one 10: each then gets EDS
// weights of its own, the split weights.Solve computes for the same input,
// and they differ.
func TestPerNodeWeightsFromLRS(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	_, conn := startWeightedAPI(t, `services:
  api: { subset_size: 2, weights: { enabled: true, mode: per_node, sources: [lrs] } }
weights: { blackout_period: 0s, smoothing: 1, update_period: 50ms, min_push_interval: 100ms, per_node_damping: 1 }
`)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rates := map[string]float64{"heavy": 90, "light": 10}
	clients, subsets := watchAPI(t, ctx, conn, slices.Collect(maps.Keys(rates)))
	problem := weights.Problem{}
	for id := range apiPorts {
		problem.Endpoints = append(problem.Endpoints, weights.EndpointLoad{ID: id, Global: 1})
	}
	for _, node := range slices.Sorted(maps.Keys(rates)) {
		perMember := map[string]float64{}
		for _, id := range subsets[node] {
			perMember[id] = rates[node] / float64(len(subsets[node]))
		}
		problem.Nodes = append(problem.Nodes, weights.NodeLoad{Node: node, Subset: subsets[node], Rates: perMember})
		reportLRS(t, ctx, conn, node, perMember)
	}
	cfg := weights.DefaultSolveConfig()
	cfg.Damping = 1
	sol, err := weights.Solve(problem, cfg)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]map[string]uint32{}
	for _, nw := range sol.Nodes {
		want := map[string]float64{}
		for k, id := range nw.Subset {
			want[id] = nw.Share[k]
		}
		got[nw.Node] = clients[nw.Node].await(t, func(w map[string]uint32) bool { return sharesNear(w, want, 0.03) })
		t.Logf("%s (%.0f requests/s over %v): weights %v, solver's split %v", nw.Node, rates[nw.Node], nw.Subset, got[nw.Node], want)
	}
	if maps.Equal(got["heavy"], got["light"]) {
		t.Errorf("both nodes got the same weights %v", got["heavy"])
	}
}

// startWeightedAPI runs the binary with config (an xds-server YAML) on a
// static file of the three api endpoints (apiPorts), and returns it and a
// client connection to its xDS port (which also serves LRS).
func startWeightedAPI(t *testing.T, config string) (*harness.Server, *grpc.ClientConn) {
	t.Helper()
	dir := t.TempDir()
	endpoints, file := dir+"/endpoints.yaml", dir+"/xds-server.yaml"
	write(t, endpoints, `services:
  - name: api
    endpoints:
      - { id: api-1, address: 127.0.0.1, port: 9001 }
      - { id: api-2, address: 127.0.0.1, port: 9002 }
      - { id: api-3, address: 127.0.0.1, port: 9003 }
`)
	write(t, file, config)
	srv := harness.StartServer(t, "--config", file, "--discovery.static.file", endpoints)
	srv.WaitReady(t)
	conn, err := grpc.NewClient(srv.XDSAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return srv, conn
}

// watchAPI opens an ADS stream (CDS and EDS) as each node and returns,
// by node, the watch of its load assignment of api and its subset (the
// endpoint ids of the first one).
func watchAPI(t *testing.T, ctx context.Context, conn *grpc.ClientConn, nodes []string) (map[string]*edsWatch, map[string][]string) {
	t.Helper()
	clients, subsets := map[string]*edsWatch{}, map[string][]string{}
	for _, node := range nodes {
		c, err := harness.StartADS(ctx, harness.ADSConfig{Conn: conn, NodeID: node, Cluster: "test",
			Types: []string{resource.ClusterType, resource.EndpointType}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		clients[node] = &edsWatch{c: c}
		subsets[node] = slices.Sorted(maps.Keys(clients[node].await(t, func(map[string]uint32) bool { return true })))
	}
	return clients, subsets
}

// edsWatch follows the load assignment of api that one ADS client accepts.
type edsWatch struct {
	c    *harness.ADSClient
	last map[string]uint32 // weights of the serving endpoints in the latest one; nil before any
}

// await returns the weights (endpoint id -> weight) of the latest load
// assignment of api, or of the first later one, that ok approves: a push
// that leaves the weights as they are sends nothing new.
func (w *edsWatch) await(t *testing.T, ok func(map[string]uint32) bool) map[string]uint32 {
	t.Helper()
	if w.last != nil && ok(w.last) {
		return w.last
	}
	c := w.c
	timeout := time.After(30 * time.Second)
	for {
		select {
		case u := <-c.Updates():
			a, found := u.Resources["api"]
			if u.TypeURL != resource.EndpointType || !found {
				continue
			}
			var cla endpointv3.ClusterLoadAssignment
			if err := a.UnmarshalTo(&cla); err != nil {
				t.Fatal(err)
			}
			w.last = map[string]uint32{}
			for _, l := range cla.GetEndpoints() {
				for _, e := range l.GetLbEndpoints() {
					if e.GetHealthStatus() == corev3.HealthStatus_HEALTHY || e.GetHealthStatus() == corev3.HealthStatus_UNKNOWN {
						w.last[e.GetEndpoint().GetHostname()] = e.GetLoadBalancingWeight().GetValue()
					}
				}
			}
			if ok(w.last) {
				return w.last
			}
		case <-timeout:
			t.Fatalf("no matching load assignment of api; last %v", w.last)
		}
	}
}

// sharesNear reports whether the weights' shares are within tol of want's.
func sharesNear(w map[string]uint32, want map[string]float64, tol float64) bool {
	if len(w) != len(want) {
		return false
	}
	sum := 0.0
	for _, x := range w {
		sum += float64(x)
	}
	for id, share := range want {
		if math.Abs(float64(w[id])/sum-share) > tol {
			return false
		}
	}
	return true
}

// reportLRS opens an LRS stream as node and reports one second of load:
// rate requests/s to each endpoint.
func reportLRS(t *testing.T, ctx context.Context, conn *grpc.ClientConn, node string, rate map[string]float64) {
	t.Helper()
	st, err := lrsv3.NewLoadReportingServiceClient(conn).StreamLoadStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&lrsv3.LoadStatsRequest{Node: &corev3.Node{Id: node, Cluster: "test"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != nil {
		t.Fatalf("LRS %s: %v", node, err)
	}
	var eps []*endpointv3.UpstreamEndpointStats
	for id, r := range rate {
		eps = append(eps, &endpointv3.UpstreamEndpointStats{
			Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
				Address: "127.0.0.1", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: apiPorts[id]}}}},
			TotalSuccessfulRequests: uint64(r),
		})
	}
	err = st.Send(&lrsv3.LoadStatsRequest{Node: &corev3.Node{Id: node}, ClusterStats: []*endpointv3.ClusterStats{{
		ClusterName:           "api",
		UpstreamLocalityStats: []*endpointv3.UpstreamLocalityStats{{UpstreamEndpointStats: eps}},
		LoadReportInterval:    durationpb.New(time.Second),
	}}})
	if err != nil {
		t.Fatal(err)
	}
}
