package envoye2e

import (
	"fmt"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/hashicorp/consul/api"

	"github.com/xds-server/xds-server/e2e/harness"
)

// lpConfig: two services keeping 80% in the node's zone (distribute), with
// round robin and with random (a load_balancing_policy list).
const lpConfig = `
services:
  lpr: { locality: { failover: [zone], distribute: 0.8 } }
  lpx: { lb_policy: random, locality: { failover: [zone], distribute: 0.8 } }
listeners:
  - name: ingress
    address: 127.0.0.1:0
    routes:
      - { prefix: /lpr, service: lpr }
      - { prefix: /lpx, service: lpx }
`

// TestEnvoyZoneDistributeFailover: with distribute, both zones share
// priority 0. Zone a holds three of its four hosts; all three critical in
// Consul leave priority 0 25% healthy (x 1.4 = 35%, under Envoy's 50%
// panic threshold), so Envoy would panic and spread requests over every
// host, the three dead ones too, but for the healthy_panic_threshold 0
// xds-server sends: every request goes to zone b within 2 s, none panics;
// passing again, zone a gets its 80% back.
func TestEnvoyZoneDistributeFailover(t *testing.T) {
	skipShort(t)
	consul := harness.Consul(t)
	s := lzSetup{consul: consul, zoneOf: map[string]string{}}
	ids := []string{"a1", "a2", "a3", "b1"}
	for _, id := range ids {
		addr := lzStartBackend(t, id)
		s.zoneOf[addr] = id[:1]
		for _, svc := range []string{"lpr", "lpx"} {
			lzRegister(t, consul, svc, id, addr,
				&api.AgentServiceCheck{CheckID: "ttl-" + svc + "-" + id, TTL: "10m", Status: api.HealthPassing})
		}
	}
	s.srv = startServer(t, consul, "--config", swWriteConfig(t, lpConfig))
	s.envoy = harness.StartEnvoy(t, harness.EnvoyOptions{NodeID: "zone-a-envoy", XDSAddr: s.srv.XDSAddr,
		BootstrapArgs: []string{"--zone", "a"}})
	s.addr = s.envoy.AwaitListener(t, "ingress", swWait)
	for _, svc := range []string{"lpr", "lpx"} {
		s.envoy.AwaitHosts(t, svc, swWait, func(h []harness.EnvoyHost) bool { return len(h) == len(ids) })
		lpCheckShare(t, s, svc, 0.8)
		lzSetTTL(t, s, svc, ids[:3], api.HealthCritical)
		critical := time.Now()
		moved := lzAwaitZone(t, s, "/"+svc, "b")
		t.Logf("%s: zone a critical: Envoy serves from zone b %v later", svc, moved.Sub(critical).Round(time.Millisecond))
		if lag := moved.Sub(critical); lag > 2*time.Second {
			t.Errorf("%s: moved to zone b %v after zone a turned critical; want within 2s", svc, lag)
		}
		lpAwaitUnhealthy(t, s, svc, 3)
		got := lzCount(t, s.addr, "/"+svc, 1000)
		panics := s.envoy.Stat(t, "cluster."+svc+".lb_healthy_panic")
		t.Logf("%s: zone a critical: %s; lb_healthy_panic %d", svc, got, panics)
		if got.failed > 0 || got.share("b") < 1 || panics != 0 {
			t.Errorf("%s: zone a critical: %s, lb_healthy_panic %d; want every request in zone b, no panic", svc, got, panics)
		}
		lzSetTTL(t, s, svc, ids[:3], api.HealthPassing)
		lpAwaitUnhealthy(t, s, svc, 0)
		lpCheckShare(t, s, svc, 0.8)
	}
	s.envoy.AssertAccepted(t)
}

// lpCheckShare counts 2,000 requests to svc: zone a's share is want
// within 3 points, none failed.
func lpCheckShare(t *testing.T, s lzSetup, svc string, want float64) {
	t.Helper()
	got := lzCount(t, s.addr, "/"+svc, 2000)
	t.Logf("%s: zone a %.1f%%: %s", svc, 100*got.share("a"), got)
	if sh := got.share("a"); sh < want-0.03 || sh > want+0.03 || got.failed > 0 {
		t.Errorf("%s: %s; want %s in zone a +-3 points, none failed", svc, got, fmt.Sprintf("%.0f%%", 100*want))
	}
}

// lpAwaitUnhealthy waits until n hosts of svc are UNHEALTHY in Envoy.
func lpAwaitUnhealthy(t *testing.T, s lzSetup, svc string, n int) {
	t.Helper()
	s.envoy.AwaitHosts(t, svc, swWait, func(h []harness.EnvoyHost) bool {
		k := 0
		for _, x := range h {
			if x.Health == corev3.HealthStatus_UNHEALTHY {
				k++
			}
		}
		return k == n
	})
}
