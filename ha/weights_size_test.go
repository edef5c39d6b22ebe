package ha

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/xds-server/xds-server/weights"
)

// sizeSummary is the summary of a replica at the budget's size: 1,000
// endpoints with backend reports, 1,000 nodes each with its own subset of
// 20 and client reports to every member (so no two nodes share a group).
func sizeSummary(t testing.TB, endpoints, nodes, subset int) weights.Summary {
	now := time.Unix(1_700_000_000, 0)
	cfg := weights.DefaultConfig()
	tr, err := weights.NewTracker(cfg)
	if err != nil {
		t.Fatal(err)
	}
	eps := make([]weights.Endpoint, endpoints)
	for i := range eps {
		eps[i] = weights.Endpoint{ID: fmt.Sprintf("api-%04d", i)}
	}
	if err := tr.SetEndpoints("api", eps); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	subsets := map[string][]string{}
	for i := range eps {
		at := now.Add(-time.Duration(rng.IntN(10_000)) * time.Millisecond)
		if err := tr.Observe(weights.Report{Service: "api", Endpoint: eps[i].ID, At: at,
			QPS: 50 + rng.Float64()*200, EPS: rng.Float64(), CPU: 0.1 + rng.Float64()*0.8}, now); err != nil {
			t.Fatal(err)
		}
	}
	for n := range nodes {
		node := fmt.Sprintf("node-%05d", n)
		for k := range subset {
			id := eps[(n*7+k*53)%endpoints].ID
			subsets[node] = append(subsets[node], id)
			at := now.Add(-time.Duration(rng.IntN(10_000)) * time.Millisecond)
			if err := tr.Observe(weights.Report{Service: "api", Endpoint: id, Node: node, At: at,
				QPS: rng.Float64() * 20, EPS: rng.Float64() * 0.1}, now); err != nil {
				t.Fatal(err)
			}
		}
	}
	return weights.BuildSummary("xds-1", now, tr.Reports(now), func(string) map[string][]string { return subsets })
}

// TestSummarySizeAtBudget: 1,000 endpoints and 1,000 nodes per replica fit
// in one KV value (under 512 KiB) and decode back to the same summary.
func TestSummarySizeAtBudget(t *testing.T) {
	s := sizeSummary(t, 1000, 1000, 20)
	if g := len(s.Services[0].Groups); g != 1000 {
		t.Fatalf("%d groups, want 1000 (distinct subsets)", g)
	}
	val, err := encodeGzipJSON(s)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("summary at 1,000 endpoints x 1,000 nodes (subsets of 20, all distinct): %d bytes gzip'd JSON per publish", len(val))
	if len(val) > MaxWeightsValueBytes {
		t.Fatalf("summary of %d bytes over %d", len(val), MaxWeightsValueBytes)
	}
	var back weights.Summary
	if err := decodeGzipJSON(val, &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Services) != 1 || len(back.Services[0].Groups) != 1000 || back.Services[0].Groups[999].Loads[19] != s.Services[0].Groups[999].Loads[19] {
		t.Fatal("summary did not survive the round trip")
	}
}
