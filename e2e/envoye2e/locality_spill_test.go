package envoye2e

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"

	"github.com/xds-server/xds-server/e2e/harness"
)

// lsConfig: a service with weights from POST /v1/load and failover
// [zone] (spill on by default), the spill controller moving every 300 ms,
// and a listener routing to it.
const lsConfig = `
services:
  ls: { locality: { failover: [zone] }, weights: { enabled: true, sources: [http] } }
weights: { blackout_period: 0s, smoothing: 1, update_period: 100ms, min_push_interval: 100ms,
           overload_period: 300ms }
listeners:
  - name: ingress
    address: 127.0.0.1:0
    routes:
      - { prefix: /, service: ls }
`

// Plant of TestEnvoyZoneSpill: every endpoint serves 100 requests/s at
// utilization 1; zone a's nodes send lsDemand requests/s, zone b's own
// nodes lsLocalB.
const (
	lsCapacity = 100.0
	lsDemand   = 300.0
	lsLocalB   = 40.0
)

// lsZone is a zone's line of /debug/weights?service=ls.
type lsZone struct {
	Region      string  `json:"region"`
	Zone        string  `json:"zone"`
	Keep        float64 `json:"keep"`
	Utilization float64 `json:"utilization"`
	Spare       float64 `json:"spare"`
	Reason      string  `json:"reason"`
}

// TestEnvoyZoneSpill: capacity-aware spill through real Envoys in zone a,
// one without a region (`--zone a`: its zone matched by name) and one in
// region dc1. The test plays the load: every 100 ms it posts the
// utilization zone a and zone b would have if zone a's nodes sent 300
// requests/s split as zone a's keep share says (two endpoints of 100
// requests/s per zone; zone b also serves 40 of its own). Zone a starts at
// utilization 1.5 and spills until it is inside the band (0.8 to 0.9, keep
// 0.53 to 0.6); each Envoy then holds zone b at priority 0 with locality
// weights keep : 1-keep and sends that share of its requests to zone b,
// within 3 points over 2,000 requests.
func TestEnvoyZoneSpill(t *testing.T) {
	skipShort(t)
	consul := harness.Consul(t)
	s := lzSetup{consul: consul, zoneOf: map[string]string{}}
	for _, id := range lzBackends {
		addr := lzStartBackend(t, id)
		s.zoneOf[addr] = id[:1]
		lzRegister(t, consul, "ls", id, addr, nil)
	}
	s.srv = startServer(t, consul, "--config", swWriteConfig(t, lsConfig))
	envoys := []lzNode{}
	for i, where := range [][]string{{"--zone", "a"}, {"--locality", "dc1/a"}} {
		e := harness.StartEnvoy(t, harness.EnvoyOptions{NodeID: fmt.Sprintf("spill-a-%d", i), XDSAddr: s.srv.XDSAddr,
			Delta: i == 1, BootstrapArgs: where})
		envoys = append(envoys, lzNode{envoy: e, addr: e.AwaitListener(t, "ingress", swWait), zone: "a"})
	}
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { lsPlant(ctx, t, s.srv) })
	defer func() { stop(); wg.Wait() }()

	var zoneA lsZone
	envoys[0].envoy.Await(t, "zone a to spill into the band", swWait, func() (bool, string, error) {
		z, err := lsZoneA(s.srv)
		zoneA = z
		return err == nil && z.Keep >= 0.5 && z.Keep <= 0.61, fmt.Sprintf("zone a %+v", z), err
	})
	t.Logf("zone a spills: %+v", zoneA)
	for _, n := range envoys {
		lsCheckSplit(t, s, n)
	}
	for _, n := range envoys {
		n.envoy.AssertAccepted(t)
		if c := n.envoy.Complaints(); len(c) > 0 {
			t.Errorf("envoy %s complained:\n%s", n.envoy.NodeID, strings.Join(c, "\n"))
		}
	}
}

// lsPlant posts, every 100 ms until ctx ends, the reports the endpoints
// of ls would send under zone a's current keep share.
func lsPlant(ctx context.Context, t *testing.T, srv *harness.Server) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		keep := 1.0
		if z, err := lsZoneA(srv); err == nil && z.Keep > 0 {
			keep = z.Keep
		}
		perA := lsDemand * keep / 2
		perB := (lsLocalB + lsDemand*(1-keep)) / 2
		var reports []string
		for _, id := range lzBackends {
			qps := map[byte]float64{'a': perA, 'b': perB}[id[0]]
			reports = append(reports, fmt.Sprintf(`{"service": "ls", "endpoint": "ls-%s", "qps": %g, "utilization": %g}`,
				id, qps, qps/lsCapacity))
		}
		if code, out := swTryPost(srv, `{"reports": [`+strings.Join(reports, ",")+`]}`); code != 200 && ctx.Err() == nil {
			t.Errorf("POST /v1/load: %d %s", code, out)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// lsZoneA is zone a's spill state from /debug/weights?service=ls.
func lsZoneA(srv *harness.Server) (lsZone, error) {
	var ans struct {
		Zones []lsZone `json:"zones"`
	}
	if err := swTryJSON(srv.AdminURL("/debug/weights?service=ls"), &ans); err != nil {
		return lsZone{}, err
	}
	for _, z := range ans.Zones {
		if z.Zone == "a" {
			return z, nil
		}
	}
	return lsZone{}, fmt.Errorf("no zone a in /debug/weights: %+v", ans.Zones)
}

// lsCheckSplit waits until n's Envoy holds both zones at priority 0 with
// zone a's locality weight share at zone a's keep, then counts 2,000
// requests through it: zone a's share of them is that keep within 3
// points, none failed. A window in which keep moved is measured again.
func lsCheckSplit(t *testing.T, s lzSetup, n lzNode) {
	t.Helper()
	for range 5 {
		var keep float64
		n.envoy.Await(t, "zone a's locality weight at its keep", swWait, func() (bool, string, error) {
			z, err := lsZoneA(s.srv)
			if err != nil {
				return false, "", err
			}
			keep = z.Keep
			share, desc := lsWeightShareA(t, n.envoy)
			return math.Abs(share-keep) < 0.005, fmt.Sprintf("keep %.3f; Envoy %s", keep, desc), nil
		})
		got := lzCount(t, n.addr, "/", 2000)
		z, err := lsZoneA(s.srv)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(z.Keep-keep) > 0.005 {
			t.Logf("%s: keep moved from %.3f to %.3f during the count; again", n.envoy.NodeID, keep, z.Keep)
			continue
		}
		_, desc := lsWeightShareA(t, n.envoy)
		t.Logf("%s: keep %.3f (zone a utilization %.2f); Envoy %s; traffic: zone a %.1f%%, %s",
			n.envoy.NodeID, keep, z.Utilization, desc, 100*got.share("a"), got)
		if sh := got.share("a"); math.Abs(sh-keep) > 0.03 || got.failed > 0 {
			t.Errorf("%s: %.1f%% of the requests in zone a, keep is %.1f%%, %d failed; want within 3 points, none failed",
				n.envoy.NodeID, 100*sh, 100*keep, got.failed)
		}
		return
	}
	t.Errorf("%s: zone a's keep never held still over 2,000 requests", n.envoy.NodeID)
}

// lsWeightShareA is zone a's share of the priority-0 locality weights of
// ls in e's /config_dump (0 unless zone b is at priority 0 too), and a
// description.
func lsWeightShareA(t *testing.T, e *harness.Envoy) (float64, string) {
	t.Helper()
	var cla endpointv3.ClusterLoadAssignment
	lzDumped(t, e, "endpoint", "ls", &cla)
	w := map[string]uint32{}
	prio := map[string]uint32{}
	for _, l := range cla.GetEndpoints() {
		w[l.GetLocality().GetZone()] += l.GetLoadBalancingWeight().GetValue()
		prio[l.GetLocality().GetZone()] = l.GetPriority()
	}
	desc := fmt.Sprintf("locality weights %v, priorities %v", w, prio)
	if prio["a"] != 0 || prio["b"] != 0 || w["a"]+w["b"] == 0 {
		return 0, desc
	}
	return float64(w["a"]) / float64(w["a"]+w["b"]), desc
}
