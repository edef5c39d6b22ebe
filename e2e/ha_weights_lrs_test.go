package e2e

import (
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/xds-server/xds-server/e2e/harness"
	"github.com/xds-server/xds-server/weights"
)

// TestHABalancedWeightsLRSThroughB: three real replicas, subsets of 2 of
// 3 endpoints, global balanced weights; utilization is posted to replica
// A only and two nodes report 90 and 10 requests/s over real LRS streams
// to replica B only. Each node, connected to A, B and C, gets from all
// three a byte-identical assignment with the same version, with the
// split weights.Balance computes for the whole fleet (as one replica
// does, TestBalancedGlobalWeightsFromLRS).
func TestHABalancedWeightsLRSThroughB(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	srvs := startHAAPI(t)
	rates := map[string]float64{"heavy": 90, "light": 10}
	obs, notify, subsets := observeNodes(t, srvs, slices.Sorted(maps.Keys(rates)))
	if slices.Equal(subsets["heavy"], subsets["light"]) {
		t.Fatalf("both nodes got subset %v; the test needs different ones", subsets["heavy"])
	}
	problem, load := lrsThroughB(t, srvs[1], rates, subsets)
	util := map[string]float64{}
	for id, l := range load {
		util[id] = l / 100 // capacity 100 requests/s
	}
	postLoadQPS(t, srvs[0], "api", util, load)
	start := time.Now()
	b, err := weights.Balance(problem, weights.DefaultBalanceConfig())
	if err != nil {
		t.Fatal(err)
	}
	wants := map[string]map[string]float64{}
	for _, node := range slices.Sorted(maps.Keys(rates)) {
		want := map[string]float64{}
		wants[node] = want
		for _, id := range subsets[node] {
			i := slices.IndexFunc(problem.Endpoints, func(e weights.EndpointLoad) bool { return e.ID == id })
			want[net.JoinHostPort("127.0.0.1", strconv.Itoa(int(apiPorts[id])))] = b.Weights[i]
		}
		normalizeShares(want)
		awaitSameCLAWithin(t, obs[node], notify[node], want, 0.03, 30*time.Second)
		last, _ := obs[node][0].last()
		t.Logf("%s over %v: A, B and C serve identical weights %v, shares as Balance's split %v (a near-even split matches the fallback too: see below), %v after the load", node, subsets[node], last.weights, want, time.Since(start))
	}
	// Both subsets hold one endpoint: its weight, from the one global
	// table, is the same in both nodes' assignments (not the fallback's
	// in one of them: Balance's split of heavy's subset is near even).
	common := slices.DeleteFunc(slices.Clone(subsets["heavy"]), func(id string) bool { return !slices.Contains(subsets["light"], id) })
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(int(apiPorts[common[0]])))
	light, _ := obs["light"][0].last()
	awaitCLA(t, obs["heavy"], notify["heavy"], 30*time.Second, func(w map[string]uint32) string {
		if w[addr] != light.weights[addr] {
			return fmt.Sprintf("weight of %s %d, light's %d", common[0], w[addr], light.weights[addr])
		}
		return ""
	})
	awaitSameCLAWithin(t, obs["heavy"], notify["heavy"], wants["heavy"], 0.03, 10*time.Second)
	heavy, _ := obs["heavy"][0].last()
	t.Logf("then heavy gets from A, B and C identical weights %v from the same table as light (%s: %d)", heavy.weights, common[0], light.weights[addr])
	if b.After >= b.Before-0.05 {
		t.Errorf("balancing predicts %.3f against the formula's %.3f: the case does not exercise it", b.After, b.Before)
	}
}

// startHAAPI runs three HA replicas sharing a real Consul where service
// api (subsets of 2) has api-1..3 at apiPorts, global weights from LRS
// and POST /v1/load.
func startHAAPI(t *testing.T) []*harness.Server {
	t.Helper()
	consul := harness.Consul(t)
	for _, id := range slices.Sorted(maps.Keys(apiPorts)) { // addresses only: weights come from the reports
		consul.RegisterFile(t, api.AgentServiceRegistration{ID: id, Name: "api", Address: "127.0.0.1", Port: int(apiPorts[id]),
			Check: &api.AgentServiceCheck{CheckID: "ttl-" + id, TTL: "10m", Status: api.HealthPassing}})
	}
	cfg := filepath.Join(t.TempDir(), "xds-server.yaml")
	body := `services:
  api: { subset_size: 2, weights: { enabled: true, mode: global, sources: [lrs, http] } }
weights: { blackout_period: 0s, smoothing: 1, update_period: 50ms, min_push_interval: 100ms }
`
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	args := append(haArgs("e2e-ha-lrs/"), "--config", cfg,
		"--ha.publish_interval", haWInterval.String(), "--ha.leader_lock_delay", haWLockDelay.String())
	return []*harness.Server{startServer(t, consul, args...), startServer(t, consul, args...), startServer(t, consul, args...)}
}

// observeNodes connects each node to every replica and returns, by node,
// its observers (one per replica), their notify channel and its subset.
func observeNodes(t *testing.T, srvs []*harness.Server, nodes []string) (map[string][]*claObserver, map[string]chan struct{}, map[string][]string) {
	t.Helper()
	notify := map[string]chan struct{}{}
	obs := map[string][]*claObserver{}
	for _, node := range nodes {
		notify[node] = make(chan struct{}, 1)
		for i, srv := range srvs {
			obs[node] = append(obs[node], startCLAObserver(t, srv, fmt.Sprintf("%s on %c", node, 'A'+i), node, "api", notify[node]))
		}
	}
	subsets := map[string][]string{}
	for node, o := range obs {
		subsets[node] = awaitSubset(t, o[1], notify[node])
	}
	return obs, notify, subsets
}

// awaitSubset is the endpoint ids of the first assignment o gets.
func awaitSubset(t *testing.T, o *claObserver, notify chan struct{}) []string {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		if l, n := o.last(); n > 0 {
			var ids []string
			for addr := range l.weights {
				_, port, _ := net.SplitHostPort(addr)
				for id, p := range apiPorts {
					if strconv.Itoa(int(p)) == port {
						ids = append(ids, id)
					}
				}
			}
			return slices.Sorted(slices.Values(ids))
		}
		select {
		case <-notify:
		case <-timeout:
			t.Fatalf("%s got no assignment", o.name)
		}
	}
}

// lrsThroughB reports each node's rate over LRS to srv, round robin
// within its subset, and returns the fleet's balance problem at capacity
// 100 requests/s per endpoint and the load of each endpoint.
func lrsThroughB(t *testing.T, srv *harness.Server, rates map[string]float64, subsets map[string][]string) (weights.Problem, map[string]float64) {
	t.Helper()
	conn, err := grpc.NewClient(srv.XDSAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	problem := weights.Problem{}
	load := map[string]float64{}
	for _, node := range slices.Sorted(maps.Keys(rates)) {
		perMember := map[string]float64{}
		for _, id := range subsets[node] {
			perMember[id] = rates[node] / float64(len(subsets[node]))
			load[id] += perMember[id]
		}
		problem.Nodes = append(problem.Nodes, weights.NodeLoad{Node: node, Subset: subsets[node], Rates: perMember})
		reportLRS(t, ctx, conn, node, perMember)
	}
	for _, id := range slices.Sorted(maps.Keys(apiPorts)) {
		if load[id] > 0 {
			problem.Endpoints = append(problem.Endpoints, weights.EndpointLoad{ID: id, Capacity: 100, Global: 100})
		}
	}
	return problem, load
}

// awaitCLA waits until every observer's latest weights pass check
// (which says what is wrong, "" if nothing).
func awaitCLA(t *testing.T, obs []*claObserver, notify chan struct{}, within time.Duration, check func(map[string]uint32) string) {
	t.Helper()
	timeout := time.After(within)
	for {
		problem := ""
		for _, o := range obs {
			if l, _ := o.last(); check(l.weights) != "" {
				problem = o.name + ": " + check(l.weights)
			}
		}
		if problem == "" {
			return
		}
		select {
		case <-notify:
		case <-timeout:
			t.Fatalf("after %v: %s", within, problem)
		}
	}
}

// awaitSameCLAWithin is awaitSameCLA with a share tolerance.
func awaitSameCLAWithin(t *testing.T, obs []*claObserver, notify chan struct{}, want map[string]float64, tol float64, within time.Duration) {
	t.Helper()
	timeout := time.After(within)
	for {
		problem := sameCLAProblemTol(obs, want, tol)
		if problem == "" {
			return
		}
		select {
		case <-notify:
		case <-timeout:
			t.Fatalf("after %v: %s", within, strings.TrimSpace(problem))
		}
	}
}
