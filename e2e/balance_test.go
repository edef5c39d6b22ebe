package e2e

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xds-server/xds-server/weights"
)

// TestBalancedGlobalWeightsFromLRS runs the real binary with global
// weights (weights.balance on, the default) over subsets of 2 of 3
// endpoints of equal capacity. The backends push their utilization over
// POST /v1/load and two nodes report 90 and 10 requests/s over real LRS
// streams: both nodes then get the same EDS weights, the ones
// weights.Balance computes for the same input, not the formula's equal
// weights.
func TestBalancedGlobalWeightsFromLRS(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	srv, conn := startWeightedAPI(t, `services:
  api: { subset_size: 2, weights: { enabled: true, mode: global, sources: [lrs, http] } }
weights: { blackout_period: 0s, smoothing: 1, update_period: 50ms, min_push_interval: 100ms }
`)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rates := map[string]float64{"heavy": 90, "light": 10}
	clients, subsets := watchAPI(t, ctx, conn, slices.Collect(maps.Keys(rates)))
	if slices.Equal(subsets["heavy"], subsets["light"]) {
		t.Fatalf("both nodes got subset %v; the test needs different ones", subsets["heavy"])
	}
	// Round robin within each subset: the load each backend reports, at
	// capacity 100 requests/s (utilization = load / 100).
	load := map[string]float64{}
	problem := weights.Problem{}
	for _, node := range slices.Sorted(maps.Keys(rates)) {
		perMember := map[string]float64{}
		for _, id := range subsets[node] {
			perMember[id] = rates[node] / float64(len(subsets[node]))
			load[id] += perMember[id]
		}
		problem.Nodes = append(problem.Nodes, weights.NodeLoad{Node: node, Subset: subsets[node], Rates: perMember})
		reportLRS(t, ctx, conn, node, perMember)
	}
	var reports []string
	for _, id := range slices.Sorted(maps.Keys(apiPorts)) {
		if load[id] > 0 {
			reports = append(reports, fmt.Sprintf(`{"service":"api","endpoint":%q,"utilization":%g,"qps":%g}`, id, load[id]/100, load[id]))
			problem.Endpoints = append(problem.Endpoints, weights.EndpointLoad{ID: id, Capacity: 100, Global: 100})
		}
	}
	resp, err := http.Post("http://"+srv.AdminAddr+"/v1/load", "application/json", strings.NewReader("["+strings.Join(reports, ",")+"]"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /v1/load: %s", resp.Status)
	}

	b, err := weights.Balance(problem, weights.DefaultBalanceConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("predicted max/mean utilization: formula %.3f, balanced %.3f", b.Before, b.After)
	balanced := map[string]float64{}
	for i, e := range problem.Endpoints {
		balanced[e.ID] = b.Weights[i]
	}
	for node, c := range clients {
		want := map[string]float64{}
		for _, id := range subsets[node] {
			want[id] = balanced[id]
		}
		normalizeShares(want)
		got := c.await(t, func(w map[string]uint32) bool { return sharesNear(w, want, 0.03) })
		t.Logf("%s over %v: weights %v, Balance's split %v", node, subsets[node], got, want)
	}
	if b.After >= b.Before-0.05 {
		t.Errorf("balancing predicts %.3f against the formula's %.3f: the case does not exercise it", b.After, b.Before)
	}
}

// normalizeShares scales m's values to sum 1.
func normalizeShares(m map[string]float64) {
	sum := 0.0
	for _, v := range m {
		sum += v
	}
	for k := range m {
		m[k] /= sum
	}
}
