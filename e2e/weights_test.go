package e2e

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	testgrpc "google.golang.org/grpc/interop/grpc_testing"

	"github.com/xds-server/xds-server/e2e/harness"
)

// TestWeightsFollowORCA registers three real gRPC backends that report, over
// ORCA, CPU utilization 0.2, 0.4 and 0.8 at equal qps; xds-server turns
// that into EDS weights 4:2:1 (weight = qps / utilization), and a grpc-go
// xDS client whose cluster uses ring_hash (which honors endpoint weights)
// sends each backend a share of RPCs within 5 points of its weight share
// (with no hash policy in the route, grpc-go hashes each RPC at random).
// The ring is 4096 entries (grpc-go's cap): a ring's layout puts each
// host's share about sqrt(points)/ring_size off its weight share, 2.4
// points at the default 1024 (so 5 points failed 1 run in 30) and 1.2 at
// 4096; 6000 RPCs add 0.6 points of sampling noise.
func TestWeightsFollowORCA(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	consul := harness.Consul(t)
	backends := startEcho(t, 3)
	for i, cpu := range []float64{0.2, 0.4, 0.8} {
		backends[i].SetLoad(cpu, 100)
	}
	registerEcho(t, consul, backends, "")
	cfg := filepath.Join(t.TempDir(), "xds-server.yaml")
	body := `services:
  echo: { lb_policy: ring_hash, ring_hash: { minimum_ring_size: 4096 }, weights: { enabled: true, sources: [orca] } }
weights: { blackout_period: 0s, smoothing: 1, update_period: 50ms, min_push_interval: 50ms }
`
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, consul, "--config", cfg)

	want := map[string]float64{backends[0].ID: 4.0 / 7, backends[1].ID: 2.0 / 7, backends[2].ID: 1.0 / 7}
	awaitWeights(t, srv, want)

	conn := dialXDS(t, srv.XDSAddr, "ring-hash-client")
	client := testgrpc.NewTestServiceClient(conn)
	const rpcs = 6000
	got := map[string]int{}
	for range rpcs {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := client.UnaryCall(ctx, &testgrpc.SimpleRequest{})
		cancel()
		if err != nil {
			t.Fatalf("RPC: %v", err)
		}
		got[resp.GetServerId()]++
	}
	for id, share := range want {
		if have := float64(got[id]) / rpcs; math.Abs(have-share) > 0.05 {
			t.Errorf("%s got %.1f%% of RPCs, want %.1f%% +- 5 points (all: %v)", id, 100*have, 100*share, got)
		} else {
			t.Logf("%s: %.1f%% of RPCs, weight share %.1f%%", id, 100*have, 100*share)
		}
	}
}

// awaitWeights polls /debug/weights until the weight shares match want
// (within 1 point: integer rounding) for endpoints whose weights are their own.
func awaitWeights(t *testing.T, srv *harness.Server, want map[string]float64) {
	t.Helper()
	var last any
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		var table struct {
			Rows []struct {
				Endpoint string `json:"endpoint"`
				Weight   uint32 `json:"weight"`
				Reason   string `json:"reason"`
			} `json:"endpoints"`
		}
		if !tryGetJSON("http://"+srv.AdminAddr+"/debug/weights?service=echo", &table) {
			time.Sleep(50 * time.Millisecond) // not computed yet: poll again
			continue
		}
		last = table
		total := 0.0
		for _, r := range table.Rows {
			total += float64(r.Weight)
		}
		ok := len(table.Rows) == len(want)
		for _, r := range table.Rows {
			ok = ok && r.Reason == "reported" && math.Abs(float64(r.Weight)/total-want[r.Endpoint]) < 0.01
		}
		if ok {
			return
		}
		time.Sleep(50 * time.Millisecond) // polling an HTTP page: no event to await
	}
	t.Fatalf("weights never matched %v; last /debug/weights: %+v", want, last)
}

// tryGetJSON decodes a 200 answer into v and reports whether it got one.
func tryGetJSON(u string, v any) bool {
	resp, err := http.Get(u)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	return resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(v) == nil
}
