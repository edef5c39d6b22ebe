package e2e

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	testgrpc "google.golang.org/grpc/interop/grpc_testing"

	"github.com/xds-server/xds-server/e2e/harness"
)

// TestGRPCClientReportsLoad: with nothing in its bootstrap but the xDS
// server, a grpc-go xDS client sends load reports (LRS) for a service
// whose weights take lrs, because xds-server names itself as the cluster's
// LRS server (lrs_server: {self: {}}). grpc-go reports per locality only;
// xds-server spreads that over the node's endpoints by the weights it
// sent, so the per-node solver knows the node's rate (no global fallback)
// and nothing is skipped as locality_only.
func TestGRPCClientReportsLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	consul := harness.Consul(t)
	backends := startEcho(t, 2)
	for _, b := range backends {
		b.SetLoad(0.5, 100)
	}
	registerEcho(t, consul, backends, "")
	cfg := filepath.Join(t.TempDir(), "xds-server.yaml")
	body := `services:
  echo: { lb_policy: ring_hash, weights: { enabled: true, mode: per_node, sources: [orca, lrs] } }
weights: { blackout_period: 0s, update_period: 100ms, min_push_interval: 100ms, lrs_interval: 200ms }
`
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, consul, "--config", cfg)
	const node = "lrs-client"
	client := testgrpc.NewTestServiceClient(dialXDS(t, srv.XDSAddr, node))
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	wg.Go(func() { // steady traffic: 50 RPCs/s
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
			_, err := client.UnaryCall(rctx, &testgrpc.SimpleRequest{})
			rcancel()
			if err != nil && ctx.Err() == nil {
				t.Errorf("RPC: %v", err)
				return
			}
		}
	})
	awaitCounter(t, srv, "xds_weights_lrs_reports_total", 4)
	deadline := time.Now().Add(15 * time.Second)
	var nd struct {
		Global bool    `json:"global_fallback"`
		Rate   float64 `json:"rate"`
	}
	for !tryGetJSON(srv.AdminURL("/debug/weights?service=echo&node="+node), &nd) || nd.Global || nd.Rate <= 0 {
		if time.Now().After(deadline) {
			t.Fatalf("node %s: per-node rate never known: %+v", node, nd)
		}
		time.Sleep(50 * time.Millisecond) // polling an HTTP page: no event to await
	}
	t.Logf("node %s: %.1f requests/s measured from its LRS reports", node, nd.Rate)
	if nd.Rate < 20 || nd.Rate > 80 {
		t.Errorf("node rate %.1f requests/s from LRS, want about 50", nd.Rate)
	}
	if n := metricValue(t, srv, "", `xds_weights_lrs_skipped_total{reason="locality_only"}`); n != 0 {
		t.Errorf("%v locality-only loads skipped, want 0 (spread over the node's endpoints)", n)
	}
}
