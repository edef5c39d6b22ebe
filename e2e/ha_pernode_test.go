package e2e

import (
	"context"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	lrsv3 "github.com/envoyproxy/go-control-plane/envoy/service/load_stats/v3"
	"github.com/hashicorp/consul/api"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/xds-server/xds-server/e2e/harness"
)

// pnCaps are the capacities of the api endpoints (requests/s at
// utilization 1), uneven so that each node's split is far from even.
var pnCaps = map[string]float64{"api-1": 60, "api-2": 140, "api-3": 200}

// pnRate is each node's request rate (requests/s).
const pnRate = 150

const pnConfig = `services:
  api: { subset_size: 2, weights: { enabled: true, mode: per_node, sources: [lrs, http] } }
weights: { blackout_period: 0s, update_period: 100ms, min_push_interval: 100ms }
`

// pnNode is a node that sends rate requests/s split as the per-node
// weights its own replica serves it, and reports that load over a real
// LRS stream to that replica.
type pnNode struct {
	id     string
	srv    *harness.Server // the replica it is connected to
	rate   float64
	obs    *claObserver
	notify chan struct{}
	stream lrsv3.LoadReportingService_StreamLoadStatsClient
}

// startPNNode connects node to srv over ADS (its observer) and LRS.
func startPNNode(t *testing.T, ctx context.Context, srv *harness.Server, name, id string, rate float64) *pnNode {
	t.Helper()
	n := &pnNode{id: id, srv: srv, rate: rate, notify: make(chan struct{}, 1)}
	n.obs = startCLAObserver(t, srv, name, id, "api", n.notify)
	awaitSubset(t, n.obs, n.notify) // connected, with its subset index, before the next node
	conn, err := grpc.NewClient(srv.XDSAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if n.stream, err = lrsv3.NewLoadReportingServiceClient(conn).StreamLoadStats(ctx); err != nil {
		t.Fatal(err)
	}
	if err := n.stream.Send(&lrsv3.LoadStatsRequest{Node: &corev3.Node{Id: id, Cluster: "e2e"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.stream.Recv(); err != nil {
		t.Fatalf("LRS %s: %v", name, err)
	}
	return n
}

// subset is the endpoint ids of the node's latest assignment.
func (n *pnNode) subset(t *testing.T) []string {
	t.Helper()
	return awaitSubset(t, n.obs, n.notify)
}

// shares is the split the node follows: its latest weights, by endpoint id.
func (n *pnNode) shares() map[string]float64 {
	l, _ := n.obs.last()
	out, sum := map[string]float64{}, 0.0
	for addr, w := range l.weights {
		_, port, _ := net.SplitHostPort(addr)
		for id, p := range apiPorts {
			if strconv.Itoa(int(p)) == port {
				out[id], sum = float64(w), sum+float64(w)
			}
		}
	}
	for id := range out {
		out[id] /= sum
	}
	return out
}

// pnTick sends one second of every node's load over its LRS stream, and
// the endpoints' resulting load and utilization to backendSrv's
// /v1/load (as the backends report it).
func pnTick(t *testing.T, nodes []*pnNode, backendSrv *harness.Server) {
	t.Helper()
	load := map[string]float64{}
	for _, n := range nodes {
		var eps []*endpointv3.UpstreamEndpointStats
		for id, s := range n.shares() {
			q := n.rate * s
			load[id] += q
			eps = append(eps, &endpointv3.UpstreamEndpointStats{
				Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
					Address: "127.0.0.1", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: apiPorts[id]}}}},
				TotalSuccessfulRequests: uint64(math.Round(q)),
			})
		}
		if err := n.stream.Send(&lrsv3.LoadStatsRequest{ClusterStats: []*endpointv3.ClusterStats{{ClusterName: "api",
			UpstreamLocalityStats: []*endpointv3.UpstreamLocalityStats{{UpstreamEndpointStats: eps}},
			LoadReportInterval:    durationpb.New(time.Second)}}}); err != nil {
			t.Fatalf("LRS %s: %v", n.obs.name, err)
		}
	}
	util := map[string]float64{}
	for id := range pnCaps {
		util[id] = load[id] / pnCaps[id]
	}
	postLoadQPS(t, backendSrv, "api", util, load)
}

// startPNServers runs three HA replicas and one reference replica
// without HA on one Consul. The reference shares the replicas' client
// indices and endpoint slots (subsetting.consul.prefix): the same node
// gets the same subset from it (its own slots would order the endpoints
// as they were first seen, and the subsets could differ).
func startPNServers(t *testing.T) ([]*harness.Server, *harness.Server) {
	t.Helper()
	consul := harness.Consul(t)
	for _, id := range slices.Sorted(maps.Keys(apiPorts)) { // addresses only: the load comes from the reports
		consul.RegisterFile(t, api.AgentServiceRegistration{ID: id, Name: "api", Address: "127.0.0.1", Port: int(apiPorts[id]),
			Check: &api.AgentServiceCheck{CheckID: "ttl-" + id, TTL: "10m", Status: api.HealthPassing}})
	}
	awaitPassing(t, consul, "api", len(apiPorts)) // every replica's first subsets are over all of them
	cfg := filepath.Join(t.TempDir(), "xds-server.yaml")
	if err := os.WriteFile(cfg, []byte(pnConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	args := append(haArgs("e2e-ha-pernode/"), "--config", cfg,
		"--ha.publish_interval", haWInterval.String(), "--ha.leader_lock_delay", haWLockDelay.String())
	var srvs []*harness.Server
	for range 3 {
		srvs = append(srvs, startServer(t, consul, args...))
	}
	ref := startServer(t, consul, "--config", cfg,
		"--subsetting.index_source", "consul", "--subsetting.consul.prefix", "e2e-ha-pernode/subsetting")
	return srvs, ref
}

// awaitPassing polls the real Consul until service has n passing instances.
func awaitPassing(t *testing.T, consul *harness.ConsulAgent, service string, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		entries, _, err := consul.Client().Health().Service(service, "", true, nil)
		if err == nil && len(entries) == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s has %d passing instances after 30s, want %d (%v)", service, len(entries), n, err)
		}
		time.Sleep(20 * time.Millisecond) // polling an external process
	}
}

// TestHAPerNodeWeightsConverge is issue 15's per_node test with real
// processes: three HA replicas on one real Consul, node n1 on replica A
// and n2 on replica B, each sending its load split as its own replica's
// per-node weights and reporting it over LRS to that replica; the
// backends' utilization is posted to A only. The same fleet (same ids,
// subsets, rates, capacities) runs against one replica without HA. Both
// nodes on the HA replicas converge to the reference's shares within 5
// points (and stay there), and the reference is not the even split.
func TestHAPerNodeWeightsConverge(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	srvs, ref := startPNServers(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ha := []*pnNode{startPNNode(t, ctx, srvs[0], "n1 on A", "n1", pnRate), startPNNode(t, ctx, srvs[1], "n2 on B", "n2", pnRate)}
	one := []*pnNode{startPNNode(t, ctx, ref, "n1 on ref", "n1", pnRate), startPNNode(t, ctx, ref, "n2 on ref", "n2", pnRate)}
	for i := range ha {
		hs, rs := ha[i].subset(t), one[i].subset(t)
		if !slices.Equal(hs, rs) {
			t.Fatalf("%s has subset %v, %s %v: the fleets differ", ha[i].obs.name, hs, one[i].obs.name, rs)
		}
	}
	if slices.Equal(ha[0].subset(t), ha[1].subset(t)) {
		t.Fatalf("both nodes got subset %v; the test needs different ones", ha[0].subset(t))
	}
	r := pnConverge(t, ha, one, srvs[0], ref)
	t.Logf("per-node weights on the HA replicas within 5 points of one replica's after %v = %.1f publish intervals of %v "+
		"(the reference alone settled after %v = %.1f; max share gap since %.3f): HA n1 %v n2 %v; one replica n1 %v n2 %v",
		r.haAt, r.haAt.Seconds()/haWInterval.Seconds(), haWInterval, r.refAt, r.refAt.Seconds()/haWInterval.Seconds(), r.gap,
		ha[0].shares(), ha[1].shares(), one[0].shares(), one[1].shares())
	// Measured 2.0–5.2 publish intervals (13 runs); the bound catches a
	// replica that converges only by chance or through the expiry.
	if limit := 20 * haWInterval; r.haAt > limit {
		t.Errorf("per-node weights converged after %v, want within 20 publish intervals (%v)", r.haAt, limit)
	}
}

// pnResult is what pnConverge measured, from the first tick: when the
// HA nodes began to hold the reference's shares, when the reference
// itself settled (stayed within 5 points of its final shares), and the
// largest share gap once converged.
type pnResult struct {
	haAt, refAt time.Duration
	gap         float64
}

// pnConverge ticks both fleets every 200ms until, for 15 ticks in a row,
// every HA node's shares are within 5 points of the reference's and the
// reference's split of each node is at least 5 points from even.
func pnConverge(t *testing.T, ha, one []*pnNode, haBackend, refBackend *harness.Server) pnResult {
	t.Helper()
	start, tick := time.Now(), time.NewTicker(200*time.Millisecond)
	defer tick.Stop()
	var at time.Time
	var refHist [][]map[string]float64 // the reference's shares at each tick
	gap := 0.0
	for stable := 0; stable < 15; {
		if time.Since(start) > 90*time.Second {
			t.Fatalf("no convergence within 90s: %s\nplanned on A (n1): %s\non B (n2): %s\non the reference (n1): %s\n(n2): %s",
				pnDescribe(ha, one), pnDebug(haBackend, "n1"), pnDebug(ha[1].srv, "n2"), pnDebug(refBackend, "n1"), pnDebug(refBackend, "n2"))
		}
		<-tick.C
		pnTick(t, ha, haBackend)
		pnTick(t, one, refBackend)
		d, uneven := 0.0, 1.0
		var ref []map[string]float64
		for i := range ha {
			ref = append(ref, one[i].shares())
			d = max(d, shareDiff(ha[i].shares(), ref[i]))
			u := 0.0
			for _, s := range ref[i] {
				u = max(u, math.Abs(s-0.5))
			}
			uneven = min(uneven, u)
		}
		refHist = append(refHist, ref)
		if d > 0.05 || uneven < 0.05 {
			stable = 0
			continue
		}
		if stable == 0 {
			at, gap = time.Now(), 0
		}
		stable, gap = stable+1, max(gap, d)
	}
	return pnResult{haAt: at.Sub(start), refAt: settledAt(refHist, 200*time.Millisecond), gap: gap}
}

// settledAt is the time (ticks × every) from which every sample of hist
// is within 5 points of the last one.
func settledAt(hist [][]map[string]float64, every time.Duration) time.Duration {
	last := hist[len(hist)-1]
	k := len(hist)
	for k > 0 {
		far := false
		for i := range last {
			far = far || shareDiff(hist[k-1][i], last[i]) > 0.05
		}
		if far {
			break
		}
		k--
	}
	return time.Duration(k+1) * every
}

// pnDebug is what srv last planned for node (its /debug/weights page),
// for a failure message.
func pnDebug(srv *harness.Server, node string) string {
	resp, err := http.Get(srv.AdminURL("/debug/weights?service=api&node=" + node))
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	return string(b)
}

func pnDescribe(ha, one []*pnNode) string {
	s := ""
	for i := range ha {
		s += fmt.Sprintf("%s %v, %s %v; ", ha[i].obs.name, ha[i].shares(), one[i].obs.name, one[i].shares())
	}
	return s
}

// shareDiff is the largest gap between a's and b's share of an endpoint.
func shareDiff(a, b map[string]float64) float64 {
	d := 0.0
	for e := range a {
		d = max(d, math.Abs(a[e]-b[e]))
	}
	for e := range b {
		d = max(d, math.Abs(a[e]-b[e]))
	}
	return d
}
