package envoye2e

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"

	"github.com/xds-server/xds-server/e2e/harness"
)

// loConfig: a service failing over zone by zone with outlier detection
// taking every default, routed by a listener.
const loConfig = `
services:
  lod: { locality: { failover: [zone] }, outlier_detection: {} }
listeners:
  - name: ingress
    address: 127.0.0.1:0
    routes:
      - { prefix: /, service: lod }
`

// TestEnvoyZoneOutlierFailover: backends without health checks (two in
// zone a, two in zone b) of a service with failover [zone] and
// `outlier_detection: {}`; an Envoy in zone a. Both zone-a backends stop
// serving: nothing in Consul changes, only Envoy's outlier detection can
// move its traffic, and it does: to zone b within 5 s (Envoy applies the
// second ejection after its 1 s update_merge_window), with no failed
// request after. This needs max_ejection_percent 100, which xds-server
// sends for a service with a locality policy: with Envoy's default 10,
// Envoy ejects no host of four and every request keeps failing.
func TestEnvoyZoneOutlierFailover(t *testing.T) {
	skipShort(t)
	consul := harness.Consul(t)
	s := lzSetup{consul: consul, zoneOf: map[string]string{}}
	servers := map[string]*httptest.Server{}
	for _, id := range lzBackends {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte("hello from " + id + " (zone " + id[:1] + ")\n"))
		}))
		t.Cleanup(srv.Close)
		servers[id] = srv
		s.zoneOf[srv.Listener.Addr().String()] = id[:1]
		lzRegister(t, consul, "lod", id, srv.Listener.Addr().String(), nil)
	}
	s.srv = startServer(t, consul, "--config", swWriteConfig(t, loConfig))
	s.envoy = harness.StartEnvoy(t, harness.EnvoyOptions{NodeID: "zone-a-envoy", XDSAddr: s.srv.XDSAddr,
		BootstrapArgs: []string{"--zone", "a"}})
	s.addr = s.envoy.AwaitListener(t, "ingress", swWait)
	lzAwaitPriorities(t, s, s.envoy, "lod", map[string]uint32{"a": 0, "b": 1})
	var c clusterv3.Cluster
	lzDumped(t, s.envoy, "cluster", "lod", &c)
	if p := c.GetOutlierDetection().GetMaxEjectionPercent().GetValue(); p != 100 {
		t.Errorf("Envoy's cluster lod has outlier_detection.max_ejection_percent %d, want 100", p)
	}
	if got := lzCount(t, s.addr, "/lod", 200); got.failed > 0 || got.share("a") < 1 {
		t.Fatalf("before: %s; want every request served in zone a", got)
	}

	servers["a1"].Close()
	servers["a2"].Close()
	stopped := time.Now()
	moved := lzAwaitZoneWithin(t, s, "/lod", "b", 5*time.Second)
	t.Logf("zone a stopped: Envoy serves from zone b %v later", moved.Sub(stopped).Round(time.Millisecond))
	after := lzCount(t, s.addr, "/lod", 500)
	t.Logf("after the switch: %s", after)
	if after.failed > 0 || after.share("b") < 1 {
		t.Errorf("after the switch: %s; want every request served in zone b, none failed", after)
	}
	st, err := s.envoy.Stats()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Envoy: outlier_detection.ejections_active %d, ejections_overflow %d",
		st["cluster.lod.outlier_detection.ejections_active"], st["cluster.lod.outlier_detection.ejections_overflow"])
	if st["cluster.lod.outlier_detection.ejections_active"] != 2 || st["cluster.lod.outlier_detection.ejections_overflow"] != 0 {
		t.Errorf("want both zone-a hosts ejected and no ejection refused")
	}
	s.envoy.AssertAccepted(t)
}
