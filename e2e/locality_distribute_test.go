package e2e

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/xds-server/xds-server/e2e/harness"
)

// registerZoned registers the backends as service "echo" in Consul, each
// passing (TTL check) with meta zone "a" (odd ids: echo-1, echo-3) or
// "b" (even ids), and returns the ids in zone a.
func registerZoned(t *testing.T, consul *harness.ConsulAgent, backends []*harness.Backend) map[string]bool {
	t.Helper()
	inA := map[string]bool{}
	for i, b := range backends {
		zone := []string{"a", "b"}[i%2]
		if zone == "a" {
			inA[b.ID] = true
		}
		if err := consul.Client().Agent().ServiceRegister(&api.AgentServiceRegistration{
			ID: b.ID, Name: "echo", Address: b.Host, Port: b.Port, Meta: map[string]string{"zone": zone},
			Check: &api.AgentServiceCheck{CheckID: "ttl-" + b.ID, TTL: "10m", Status: api.HealthPassing},
		}); err != nil {
			t.Fatal(err)
		}
	}
	return inA
}

// TestZoneDistributeGRPC: echo has two backends in each of zones a and b
// and locality.distribute 0.8 (alone, and with failover [zone]). A
// grpc-go client in zone a (node locality from its bootstrap) sends 80%
// (±3 points) of 2,000 RPCs to zone a and the rest to zone b, none
// failing: grpc-go weighs localities of one priority by their locality
// weights (weighted_target under wrr_locality, its default). grpc-go
// v1.85's weighted_target picks a locality at random by weight
// (wrr.NewRandom): the share is binomial, sigma 0.9 points at 2,000 RPCs,
// so ±3 points fails by chance about once in 1,000 runs.
func TestZoneDistributeGRPC(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	for _, c := range []struct{ name, locality string }{
		{"distribute", "{ distribute: 0.8 }"},
		{"distribute+failover", "{ distribute: 0.8, failover: [zone] }"},
	} {
		t.Run(c.name, func(t *testing.T) {
			consul := harness.Consul(t)
			inA := registerZoned(t, consul, startEcho(t, 4))
			cfg := filepath.Join(t.TempDir(), "xds-server.yaml")
			if err := os.WriteFile(cfg, []byte("services:\n  echo: { locality: "+c.locality+" }\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			srv := startServer(t, consul, "--config", cfg)
			call := dialXDSZone(t, srv.XDSAddr, "grpc-zone-a", "a")
			awaitAll(t, call, []string{"echo-1", "echo-2", "echo-3", "echo-4"}, 30*time.Second)

			const n = 2000
			counts := zoneCounts(call, n)
			inZone := 0
			for id, k := range counts {
				if inA[id] {
					inZone += k
				}
			}
			share := float64(inZone) / n
			t.Logf("%s: zone a client, %d RPCs: %.1f%% in zone a (%v)", c.name, n, 100*share, counts)
			if counts[""] > 0 {
				t.Errorf("%d of %d RPCs failed", counts[""], n)
			}
			if share < 0.77 || share > 0.83 {
				t.Errorf("%.1f%% of RPCs served in zone a, want 80%% ±3 points (%v)", 100*share, counts)
			}
			for _, id := range []string{"echo-2", "echo-4"} {
				if counts[id] == 0 {
					t.Errorf("zone b's %s served none (%v)", id, counts)
				}
			}
		})
	}
}
