package ha

import (
	"context"
	"maps"
	"math"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	lrsv3 "github.com/envoyproxy/go-control-plane/envoy/service/load_stats/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/xds-server/xds-server/e2e/harness"
	"github.com/xds-server/xds-server/weights"
)

// simNode is a client that follows the per-node weights its replica sends
// it and reports its load over a real LRS stream.
type simNode struct {
	id     string
	subset []string
	rate   float64 // requests/s it sends in total
	rep    *wReplica
	stream lrsv3.LoadReportingService_StreamLoadStatsClient
}

var (
	simCaps  = map[string]float64{"a": 100, "b": 200, "c": 100} // requests/s at utilization 1
	simPorts = map[string]uint32{"a": 9001, "b": 9002, "c": 9003}
)

func openNode(t *testing.T, ctx context.Context, n *simNode) {
	t.Helper()
	cc, err := grpc.NewClient(n.rep.lrs, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	n.stream, err = lrsv3.NewLoadReportingServiceClient(cc).StreamLoadStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.stream.Send(&lrsv3.LoadStatsRequest{Node: &corev3.Node{Id: n.id}}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.stream.Recv(); err != nil {
		t.Fatal(err)
	}
}

// shares is the split the node follows: its per-node weights, else the
// global ones over its subset, else equal.
func (n *simNode) shares() map[string]float64 {
	n.rep.rec.mu.Lock()
	w := n.rep.rec.nodes["api"][n.id]
	var g map[string]uint32
	if len(n.rep.rec.global) > 0 {
		g = n.rep.rec.global[len(n.rep.rec.global)-1]["api"]
	}
	n.rep.rec.mu.Unlock()
	out, sum := map[string]float64{}, 0.0
	for _, e := range n.subset {
		v := 1.0
		if w != nil {
			v = float64(w[e])
		} else if g != nil {
			v = float64(g[e])
		}
		out[e], sum = v, sum+v
	}
	for e := range out {
		out[e] /= sum
	}
	return out
}

// fleetTick sends every node's load (LRS, rate over a 1s interval) and
// the backends' resulting load and utilization (POST /v1/load to backend).
func fleetTick(t *testing.T, nodes []*simNode, backend *wReplica) {
	load := map[string]float64{}
	for _, n := range nodes {
		var eps []*endpointv3.UpstreamEndpointStats
		for e, s := range n.shares() {
			q := n.rate * s
			load[e] += q
			eps = append(eps, &endpointv3.UpstreamEndpointStats{
				Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
					Address: "127.0.0.1", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: simPorts[e]}}}},
				TotalSuccessfulRequests: uint64(math.Round(q)),
			})
		}
		if err := n.stream.Send(&lrsv3.LoadStatsRequest{ClusterStats: []*endpointv3.ClusterStats{{ClusterName: "api",
			UpstreamLocalityStats: []*endpointv3.UpstreamLocalityStats{{UpstreamEndpointStats: eps}},
			LoadReportInterval:    durationpb.New(time.Second)}}}); err != nil {
			t.Fatal(err)
		}
	}
	util := map[string]float64{}
	for e, l := range load {
		util[e] = l / simCaps[e]
	}
	backend.postLoad(t, load, util)
}

// TestPerNodeWeightsConvergeAcrossReplicas: two nodes on two replicas
// (each replica solving for its own node, the other's load background
// from the summaries) reach the split one replica computes for the same
// fleet, within 5 points of share.
func TestPerNodeWeightsConvergeAcrossReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("integration: real Consul")
	}
	agent := harness.Consul(t)
	sub1, sub2 := []string{"a", "b"}, []string{"b", "c"}
	r1 := startWReplica(t, agent.Client(), "xds-1", weights.ModePerNode, map[string][]string{"n1": sub1})
	r2 := startWReplica(t, agent.Client(), "xds-2", weights.ModePerNode, map[string][]string{"n2": sub2})
	ref := startWReplica(t, nil, "ref", weights.ModePerNode, map[string][]string{"n1": sub1, "n2": sub2})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ha := []*simNode{{id: "n1", subset: sub1, rate: 120, rep: r1}, {id: "n2", subset: sub2, rate: 180, rep: r2}}
	one := []*simNode{{id: "n1", subset: sub1, rate: 120, rep: ref}, {id: "n2", subset: sub2, rate: 180, rep: ref}}
	for _, n := range append(append([]*simNode{}, ha...), one...) {
		openNode(t, ctx, n)
	}
	start, tick := time.Now(), time.NewTicker(200*time.Millisecond)
	defer tick.Stop()
	var convergedAt time.Time
	stable := 0
	for stable < 15 {
		if time.Since(start) > 60*time.Second {
			t.Fatalf("no convergence within 60s: HA n1 %v n2 %v, one replica n1 %v n2 %v",
				ha[0].shares(), ha[1].shares(), one[0].shares(), one[1].shares())
		}
		<-tick.C
		fleetTick(t, ha, r1)
		fleetTick(t, one, ref)
		d := max(shareDiff(ha[0].shares(), one[0].shares()), shareDiff(ha[1].shares(), one[1].shares()))
		perNode := nodeWeights(r1, "n1") != nil && nodeWeights(r2, "n2") != nil && nodeWeights(ref, "n1") != nil
		if d <= 0.05 && perNode {
			if stable == 0 {
				convergedAt = time.Now()
			}
			stable++
		} else {
			stable = 0
		}
	}
	took := convergedAt.Sub(start)
	t.Logf("per-node weights converged after %v = %.1f publish intervals of %v: HA n1 %v n2 %v; one replica n1 %v n2 %v",
		took, took.Seconds()/testInterval.Seconds(), testInterval, ha[0].shares(), ha[1].shares(), one[0].shares(), one[1].shares())
}

func nodeWeights(r *wReplica, node string) map[string]uint32 {
	r.rec.mu.Lock()
	defer r.rec.mu.Unlock()
	return r.rec.nodes["api"][node]
}

func shareDiff(a, b map[string]float64) float64 {
	d := 0.0
	for e := range a {
		d = max(d, math.Abs(a[e]-b[e]))
	}
	return d
}

// TestBalancedWeightsAcrossReplicas: global balancing (weights.balance)
// over two replicas' nodes, each replica knowing only its own, gives the
// table one replica computes for the same fleet: the leader balances over
// the summaries' groups (one pseudo node per replica and subset).
func TestBalancedWeightsAcrossReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("integration: real Consul")
	}
	agent := harness.Consul(t)
	sub1, sub2 := []string{"a", "b"}, []string{"b", "c"}
	r1 := startWReplica(t, agent.Client(), "xds-1", modeBalanced, map[string][]string{"n1": sub1})
	r2 := startWReplica(t, agent.Client(), "xds-2", modeBalanced, map[string][]string{"n2": sub2})
	ref := startWReplica(t, nil, "ref", modeBalanced, map[string][]string{"n1": sub1, "n2": sub2})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ha := []*simNode{{id: "n1", subset: sub1, rate: 120, rep: r1}, {id: "n2", subset: sub2, rate: 180, rep: r2}}
	one := []*simNode{{id: "n1", subset: sub1, rate: 120, rep: ref}, {id: "n2", subset: sub2, rate: 180, rep: ref}}
	for _, n := range append(append([]*simNode{}, ha...), one...) {
		openNode(t, ctx, n)
	}
	start, tick := time.Now(), time.NewTicker(200*time.Millisecond)
	defer tick.Stop()
	var convergedAt time.Time
	for stable := 0; stable < 15; {
		if time.Since(start) > 60*time.Second {
			t.Fatalf("no convergence within 60s: HA %v / %v, one replica %v", r1.rec.last(), r2.rec.last(), ref.rec.last())
		}
		<-tick.C
		fleetTick(t, ha, r1)
		fleetTick(t, one, ref)
		w1, w2, wr := r1.rec.last(), r2.rec.last(), ref.rec.last()
		balanced := wr != nil && wr["a"] > wr["b"] // capacity weights would give b twice a
		if balanced && maps.Equal(w1, w2) && shareDiff(shares(w1), shares(wr)) <= 0.05 {
			if stable == 0 {
				convergedAt = time.Now()
			}
			stable++
		} else {
			stable = 0
		}
	}
	t.Logf("balanced global weights: both replicas serve %v, one replica %v, after %v = %.1f publish intervals",
		r1.rec.last(), ref.rec.last(), convergedAt.Sub(start), convergedAt.Sub(start).Seconds()/testInterval.Seconds())
}

func shares(w map[string]uint32) map[string]float64 {
	out, sum := map[string]float64{}, 0.0
	for _, v := range w {
		sum += float64(v)
	}
	for e, v := range w {
		out[e] = float64(v) / sum
	}
	return out
}
