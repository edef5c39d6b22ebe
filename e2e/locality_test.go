package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/xds"

	"github.com/xds-server/xds-server/e2e/harness"
)

// dialXDSZone is dialXDS for a node in zone (region unset: the zone level
// then matches the zone name alone).
func dialXDSZone(t *testing.T, xdsAddr, nodeID, zone string) callFunc {
	t.Helper()
	bootstrap := fmt.Sprintf(`{
		"xds_servers": [{"server_uri": %q, "channel_creds": [{"type": "insecure"}], "server_features": ["xds_v3"]}],
		"node": {"id": %q, "cluster": "e2e", "locality": {"zone": %q}}
	}`, xdsAddr, nodeID, zone)
	rb, err := xds.NewXDSResolverWithConfigForTesting([]byte(bootstrap))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient("xds:///echo", grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithResolvers(rb))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return unaryCall(conn)
}

// zoneCounts makes n RPCs and counts them by backend id; failures are
// counted under "".
func zoneCounts(call callFunc, n int) map[string]int {
	out := map[string]int{}
	for range n {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		id, err := call(ctx)
		cancel()
		if err != nil {
			id = ""
		}
		out[id]++
	}
	return out
}

// TestZoneFailoverGRPC: echo has two backends in each of zones a and b
// (Consul meta), and failover [zone]. A grpc-go client in zone a keeps its
// requests in zone a, one in zone b in zone b; with both zone-a backends
// critical, the zone-a client moves to zone b within 2 s, and no RPC
// fails once it has; with them passing again it comes back to zone a.
func TestZoneFailoverGRPC(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	consul := harness.Consul(t)
	inA := registerZoned(t, consul, startEcho(t, 4)) // echo-1, echo-3 in zone a; echo-2, echo-4 in zone b
	cfg := filepath.Join(t.TempDir(), "xds-server.yaml")
	if err := os.WriteFile(cfg, []byte("services:\n  echo: { locality: { failover: [zone] } }\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, consul, "--config", cfg)
	callA := dialXDSZone(t, srv.XDSAddr, "grpc-zone-a", "a")
	callB := dialXDSZone(t, srv.XDSAddr, "grpc-zone-b", "b")
	awaitAll(t, callA, []string{"echo-1", "echo-3"}, 30*time.Second)
	awaitAll(t, callB, []string{"echo-2", "echo-4"}, 30*time.Second)

	local := func(counts map[string]int, zoneA bool) float64 {
		n, in := 0, 0
		for id, c := range counts {
			n += c
			if id != "" && inA[id] == zoneA {
				in += c
			}
		}
		return float64(in) / float64(n)
	}
	a, b := zoneCounts(callA, 400), zoneCounts(callB, 400)
	t.Logf("healthy: zone a client %v, zone b client %v", a, b)
	if s := local(a, true); s < 0.99 {
		t.Errorf("zone a client: %.1f%% of RPCs in zone a, want >= 99%% (%v)", 100*s, a)
	}
	if s := local(b, false); s < 0.99 {
		t.Errorf("zone b client: %.1f%% of RPCs in zone b, want >= 99%% (%v)", 100*s, b)
	}

	if lag := failOver(t, consul, callA, inA, "zone a critical, zone a client to zone b"); lag > 2*time.Second {
		t.Errorf("moved to zone b %v after Consul's catalog showed zone a critical; want within 2s", lag)
	}
	if after := zoneCounts(callA, 200); after[""] > 0 || local(after, false) < 1 {
		t.Errorf("after the move: %v; want every RPC served in zone b, none failed", after)
	}

	setTTLs(t, consul, inA, api.HealthPassing)
	passing := time.Now()
	back := awaitZone(t, callA, inA, true, 10*time.Second)
	t.Logf("zone a passing again: back in zone a %v after the TTL update", back.Sub(passing).Round(time.Millisecond))
	if after := zoneCounts(callA, 200); local(after, true) < 0.99 {
		t.Errorf("back: %v; want >= 99%% in zone a", after)
	}
}

// awaitZone makes RPCs until two in a row are served in zone a (wantA)
// or outside it, logs the RPCs that failed meanwhile, and returns when.
func awaitZone(t *testing.T, call callFunc, inA map[string]bool, wantA bool, limit time.Duration) time.Time {
	t.Helper()
	deadline := time.Now().Add(limit)
	run := 0
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		id, err := call(ctx)
		cancel()
		switch {
		case err != nil:
			t.Logf("RPC failed during the switch: %v", err)
			run = 0
		case inA[id] == wantA:
			if run++; run == 2 {
				return time.Now()
			}
		default:
			run = 0
		}
	}
	t.Fatalf("RPCs did not move (zone a: %v) within %v", wantA, limit)
	return time.Time{}
}
