package e2e

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/xds-server/xds-server/e2e/harness"
)

// TestConsulOutage stops Consul under a running xds-server: RPCs through
// grpc-go's xDS resolver keep reaching every backend and the source is
// reported stale; when Consul is back (a -dev agent starts empty, so the
// services are registered again, one of them critical) updates resume
// without a restart of xds-server.
func TestConsulOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	consul := harness.Consul(t)
	backends := startEcho(t, 3)
	registerEcho(t, consul, backends, "")
	srv := startServer(t, consul)
	call := dialGRPCXDS(t, srv.XDSAddr)
	all := []string{backends[0].ID, backends[1].ID, backends[2].ID}
	awaitAll(t, call, all, 30*time.Second)

	consul.Stop()
	awaitMetric(t, srv, `xds_discovery_stale{source="consul"} 1`)
	awaitAll(t, call, all, 10*time.Second)    // still served from the last snapshot
	callFor(t, call, "nobody", 2*time.Second) // and no RPC fails

	consul.Start()
	registerEcho(t, consul, backends, backends[2].ID)
	awaitMetric(t, srv, `xds_discovery_stale{source="consul"} 0`)
	// The restarted -dev agent briefly has no echo at all (a legitimate,
	// if empty, state), so RPCs may fail until the re-registration lands:
	// wait for a whole second of RPCs that all succeed and avoid echo-3.
	deadline := time.Now().Add(15 * time.Second)
	for !cleanWindow(call, backends[2].ID, time.Second) {
		if time.Now().After(deadline) {
			t.Fatal("after Consul came back, updates did not resume: RPCs still fail or reach the critical backend")
		}
	}
}

// cleanWindow makes RPCs for d and reports whether all succeeded and none
// reached avoid.
func cleanWindow(call callFunc, avoid string, d time.Duration) bool {
	ok := 0
	for start := time.Now(); time.Since(start) < d; {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		id, err := call(ctx)
		cancel()
		if err != nil || id == avoid {
			return false
		}
		ok++
	}
	return ok > 0
}

// awaitMetric polls /metrics (another process: nothing to await) until a
// sample line appears.
func awaitMetric(t *testing.T, srv *harness.Server, line string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+srv.AdminAddr+"/metrics", nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if strings.Contains(string(body), line) {
				cancel()
				return
			}
		}
		cancel()
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("/metrics never showed %q", line)
}
