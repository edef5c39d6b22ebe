package e2e

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/xds-server/xds-server/e2e/harness"
)

// spillPeriod is weights.overload_period in the spill test: the spill
// controller moves at most once per it.
const spillPeriod = time.Second

// spillConfig turns on weights (HTTP reports) and failover [zone] for
// api, with spill on by default, and short periods.
const spillConfig = `services:
  api: { locality: { failover: [zone] }, weights: { enabled: true, sources: [http] } }
weights: { blackout_period: 0s, update_period: 100ms, min_push_interval: 100ms, overload_period: 1s }
`

// Demand in requests/s per node: zone a's fall to 40 each (0.4 of the
// zone's 200 of capacity, below the 0.8 recover mark) at the end.
const (
	spillRateALow                = 40
	spillThreshold, spillRecover = 0.9, 0.8
	spillZoneCap                 = 200 // requests/s at utilization 1 of each zone's endpoints (spillEPs)
)

// startSpillFleet registers spillEPs in a real Consul (meta zone), runs
// xds-server with spillConfig, and connects two nodes in zone a sending
// rateA requests/s each, then two in zone b sending rateB each (none when
// rateB is 0).
func startSpillFleet(t *testing.T, rateA, rateB float64) (*harness.Server, []*spillNode) {
	t.Helper()
	consul := harness.Consul(t)
	for _, e := range spillEPs {
		if err := consul.Client().Agent().ServiceRegister(&api.AgentServiceRegistration{
			ID: e.id, Name: "api", Address: "127.0.0.1", Port: e.port, Meta: map[string]string{"zone": e.zone},
			Check: &api.AgentServiceCheck{CheckID: "ttl-" + e.id, TTL: "10m", Status: api.HealthPassing},
		}); err != nil {
			t.Fatal(err)
		}
	}
	awaitPassing(t, consul, "api", len(spillEPs))
	cfg := filepath.Join(t.TempDir(), "xds-server.yaml")
	if err := os.WriteFile(cfg, []byte(spillConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, consul, "--config", cfg)
	nodes := []*spillNode{startSpillNode(t, srv, "node-a1", "a", rateA), startSpillNode(t, srv, "node-a2", "a", rateA)}
	if rateB > 0 {
		nodes = append(nodes, startSpillNode(t, srv, "node-b1", "b", rateB), startSpillNode(t, srv, "node-b2", "b", rateB))
	}
	for _, n := range nodes {
		if s := n.localShare(); s != 1 {
			t.Fatalf("before any load report %s keeps %.3f in zone %s, want 1 (%s)", n.id, s, n.zone, n.shape())
		}
	}
	return srv, nodes
}

// spillLoop ticks the fleet every 100ms (one report per endpoint) until
// done holds for the latest figures, or fails after limit; it returns
// the figures of the first and the last tick.
func spillLoop(t *testing.T, srv *harness.Server, nodes []*spillNode, limit time.Duration, what string,
	done func(zoneFigures) bool) (first, last zoneFigures) {
	t.Helper()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(limit)
	for {
		last = spillTick(t, srv, nodes)
		if first.load == nil {
			first = last
		}
		if done(last) {
			return first, last
		}
		if time.Now().After(deadline) {
			keep, reason := spillKeep(t, srv, "a")
			t.Fatalf("%s: not within %v; zone a utilization %.3f, zone b %.3f; zone a keep %.4f (%s); node-a1 has %s",
				what, limit, last.util["a"], last.util["b"], keep, reason, nodes[0].shape())
		}
		<-tick.C
	}
}

// TestZoneSpillOverload is the closed loop of capacity-aware spill
// through the real binary and Consul: nodes in zones a and b send their
// demand split as their latest assignments, and the endpoints' resulting
// load and utilization reach xds-server through POST /v1/load. Zone a's
// own demand is above the 0.9 threshold (0.95 of its capacity; and 1.25,
// where its endpoints saturate and report utilization 1), zone b's (0.5;
// and 0, no clients: its endpoints report idle; and 0.87) is not. Zone a
// spills only its excess: its utilization settles at or below the
// threshold and above the recover mark, zone b's load rises by exactly
// the spilled share (zone a's demand x (1 - keep)) but never above the
// threshold (at 0.87 zone b takes what it can, zone a keeps the rest),
// and the zone-b nodes' assignments never change. With zone a's demand down to 0.4 its nodes get zone a alone at
// priority 0 again.
func TestZoneSpillOverload(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	for _, c := range []struct {
		name         string
		rateA, rateB float64 // requests/s of each node in zone a, b
	}{
		{"demand 0.95", 95, 50}, {"saturated 1.25", 125, 50}, {"zone b idle", 95, 0},
		{"zone b short of spare", 95, 87}, // zone b can take 6 of zone a's 10 requests/s of excess
	} {
		t.Run(c.name, func(t *testing.T) {
			srv, nodes := startSpillFleet(t, c.rateA, c.rateB)
			zoneA, zoneB := nodes[:2], nodes[2:]
			var bShapes []string
			if len(zoneB) > 0 {
				bShapes, _ = zoneB[0].history()
			}
			spillSettle(t, srv, nodes)
			checkUnmoved(t, zoneB, bShapes)

			for _, n := range zoneA {
				n.rate = spillRateALow
			}
			low := time.Now()
			_, back := spillLoop(t, srv, nodes, 20*time.Second, "zone a takes its traffic back", func(zoneFigures) bool {
				return zoneA[0].localShare() == 1 && zoneA[1].localShare() == 1
			})
			keep, reason := spillKeep(t, srv, "a")
			t.Logf("zone a demand down to 0.4: its nodes have zone a alone at priority 0 after %v; zone a utilization %.3f, "+
				"zone b %.3f; keep %.4f (%s); node-a1 has %s", time.Since(low).Round(time.Millisecond),
				back.util["a"], back.util["b"], keep, reason, zoneA[0].shape())
			if keep != 1 {
				t.Errorf("zone a keep %.4f (%s) once its nodes are back, want 1", keep, reason)
			}
			checkUnmoved(t, zoneB, bShapes)
			for _, n := range nodes {
				u, c := n.counts()
				t.Logf("%s received %d assignments of api, %d of them changed", n.id, u, c)
			}
		})
	}
}

// spillSettle runs the fleet (zone a's nodes first, then zone b's) until
// zone a's nodes have spilled and their assignments have not changed for
// 3 overload periods, logs the figures, and checks that zone a spilled
// only its excess, all of it to zone b, as its keep share says.
func spillSettle(t *testing.T, srv *harness.Server, nodes []*spillNode) {
	t.Helper()
	zoneA := nodes[:2]
	start := time.Now()
	before, after := spillLoop(t, srv, nodes, 40*time.Second, "zone a spills and settles", func(z zoneFigures) bool {
		settled := true
		for _, n := range zoneA {
			_, at := n.history()
			settled = settled && n.localShare() < 1 && time.Since(at) > 3*spillPeriod
		}
		return settled
	})
	last := start
	for _, n := range zoneA {
		if _, at := n.history(); at.After(last) {
			last = at
		}
	}
	keep, reason := spillKeep(t, srv, "a")
	demandA := zoneA[0].rate + zoneA[1].rate
	spilled := after.load["b"] - before.load["b"]
	t.Logf("spill settled %v after the overload began (last assignment change; %.1f overload periods of %v): "+
		"zone a demand/capacity %.3f, utilization -> %.3f, zone b %.3f -> %.3f; zone a keep %.4f (%s), spilled %.1f of %.0f requests/s "+
		"(excess over the threshold %.1f); node-a1 keeps %.4f; %d assignment shapes at node-a1",
		last.Sub(start).Round(time.Millisecond), last.Sub(start).Seconds()/spillPeriod.Seconds(), spillPeriod,
		before.util["a"], after.util["a"], before.util["b"], after.util["b"], keep, reason, spilled, demandA,
		demandA-spillThreshold*spillZoneCap, zoneA[0].localShare(), len(must(zoneA[0].history)))
	// Zone a sheds its excess, or as much of it as zone b can take below
	// the threshold (its spare before the spill).
	ceiling := max(spillThreshold, (demandA-(spillThreshold*spillZoneCap-before.load["b"]))/spillZoneCap)
	if u := after.util["a"]; u > ceiling+0.005 || u < spillRecover {
		t.Errorf("zone a's utilization settled at %.3f, want in [%.2f, %.3f]: only the excess moves", u, spillRecover, ceiling)
	}
	if u := after.util["b"]; u > spillThreshold+0.005 {
		t.Errorf("zone b's utilization rose to %.3f, above the threshold: it took spill it cannot use", u)
	}
	if want := demandA * (1 - keep); spilled < want-1 || spilled > want+1 {
		t.Errorf("zone b's load rose by %.1f requests/s, want zone a's spilled share %.1f (keep %.4f)", spilled, want, keep)
	}
	for _, n := range zoneA {
		if s := n.localShare(); s < keep-0.005 || s > keep+0.005 {
			t.Errorf("%s keeps %.4f in zone a, /debug/weights says keep %.4f", n.id, s, keep)
		}
	}
}

// checkUnmoved fails unless every node of nodes still has the one
// assignment shape it started with (want), keeping all in its zone.
func checkUnmoved(t *testing.T, nodes []*spillNode, want []string) {
	t.Helper()
	for _, n := range nodes {
		if h, _ := n.history(); len(h) != 1 || h[0] != want[0] {
			t.Errorf("%s's assignments moved: %q, want only %q", n.id, h, want[0])
		}
		if s := n.localShare(); s != 1 {
			t.Errorf("%s keeps %.4f in zone %s, want 1", n.id, s, n.zone)
		}
	}
}

// must is the first result of f.
func must[T, U any](f func() (T, U)) T {
	v, _ := f()
	return v
}
