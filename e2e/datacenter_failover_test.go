package e2e

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/xds-server/xds-server/e2e/harness"
)

// TestDatacenterFailoverGRPC: echo-1 and echo-2 in dc1, echo-3 in dc2,
// read through dc1's agent with discovery.consul.datacenters [dc1, dc2]
// and failover [zone, datacenter]. A grpc-go client (a node of dc1, the
// first datacenter) stays in dc1; with echo in dc1 critical it is served
// from dc2 within 2 s, with no failed RPC once it is; with dc1 passing
// again it comes back. With dc1's agent (its Consul) stopped while its
// backends are healthy, traffic stays in dc1 on the last known data.
func TestDatacenterFailoverGRPC(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	agents := harness.ConsulWAN(t, "dc1", "dc2")
	dc1, dc2 := agents[0], agents[1]
	echo := startEcho(t, 3)
	for i, b := range echo {
		agent := map[bool]*harness.ConsulAgent{true: dc1, false: dc2}[i < 2]
		agent.RegisterFile(t, api.AgentServiceRegistration{ID: b.ID, Name: "echo", Address: b.Host, Port: b.Port,
			Meta:   map[string]string{"zone": "a"},
			Checks: api.AgentServiceChecks{{CheckID: "ttl-" + b.ID, TTL: "10m", Status: api.HealthPassing}}})
	}
	cfg := filepath.Join(t.TempDir(), "xds-server.yaml")
	if err := os.WriteFile(cfg, []byte("services:\n  echo: { locality: { failover: [zone, datacenter] } }\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, dc1, "--config", cfg, "--discovery.consul.datacenters", "dc1,dc2")
	call := dialXDSZone(t, srv.XDSAddr, "dc1-node", "a")
	inDC1 := map[string]bool{"echo-1": true, "echo-2": true}
	awaitAll(t, call, []string{"echo-1", "echo-2"}, 30*time.Second)
	if got := zoneCounts(call, 300); got["echo-3"] > 0 || got[""] > 0 {
		t.Errorf("healthy dc1: RPCs %v, want all in dc1", got)
	}

	if lag := failOver(t, dc1, call, inDC1, "echo critical in dc1, served from dc2"); lag > 2*time.Second {
		t.Errorf("served from dc2 %v after Consul's catalog showed dc1 critical; want within 2s", lag)
	}
	if got := zoneCounts(call, 200); got["echo-3"] != 200 {
		t.Errorf("after the move: %v, want every RPC served by echo-3 in dc2", got)
	}
	setTTLs(t, dc1, inDC1, api.HealthPassing)
	passing := time.Now()
	back := awaitZone(t, call, inDC1, true, 10*time.Second)
	t.Logf("dc1 passing again: back in dc1 %v after the checks passed", back.Sub(passing).Round(time.Millisecond))

	dc1.Stop() // the local datacenter's Consul unreachable, its backends healthy
	awaitMetric(t, srv, "xds_discovery_stale{source=\"consul\"} 1\n")
	if got := zoneCounts(call, 300); got["echo-3"] > 0 || got[""] > 0 {
		t.Errorf("dc1's Consul unreachable: RPCs %v, want all still in dc1 (last known data)", got)
	}
}
