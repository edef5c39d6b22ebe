package discovery

import (
	"log/slog"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/xds-server/xds-server/e2e/harness"
)

// guardHarness runs a Consul source through a Guard: raw receives what the
// source emitted (after the guard saw it), out what the guard applied.
type guardHarness struct {
	raw, out *consulHarness
	metrics  *Metrics
}

func runGuarded(t *testing.T, addr string, hold time.Duration) *guardHarness {
	t.Helper()
	m := NewMetrics(prometheus.NewRegistry())
	out := &consulHarness{snaps: make(chan Snapshot, 1000), metrics: m}
	g, err := NewGuard(GuardConfig{Fraction: DefaultMassRemovalFraction, Hold: hold, Metrics: m,
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil)),
		Emit:   func(s Snapshot) { out.snaps <- s }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	raw := runConsul(t, addr, ConsulConfig{Metrics: m, BackoffMax: 100 * time.Millisecond})
	// Re-route the source's snapshots through the guard.
	tapped := &consulHarness{snaps: make(chan Snapshot, 1000), metrics: m}
	go func() {
		for s := range raw.snaps {
			g.Observe(s)
			tapped.snaps <- s
		}
	}()
	return &guardHarness{raw: tapped, out: out, metrics: m}
}

// registerAll registers each instance (id -> service) through the agent
// API (so a restarted dev agent forgets it), each on a port of its own.
func registerAll(t *testing.T, a *harness.ConsulAgent, ids map[string]string) {
	t.Helper()
	ports := map[string]int{"web-1": 8081, "web-2": 8082, "api-1": 8083, "db-1": 8084}
	for id, name := range ids {
		if err := a.Client().Agent().ServiceRegister(&api.AgentServiceRegistration{ID: id, Name: name, Port: ports[id]}); err != nil {
			t.Fatal(err)
		}
	}
}

func endpoints(n int) func(Snapshot) bool {
	return func(s Snapshot) bool { return s.EndpointCount() == n }
}

// TestGuardConsulEmptiedCatalog is the regression of issue 14 item 7
// against a real Consul agent: a lone instance that leaves is applied at
// once; an agent restarted with an empty catalog (reset index) is held,
// and re-registering the services within the hold cancels it, so the
// empty catalog is never applied; deregistering every service is held
// for the hold period (xds_discovery_held = 1), then applied.
func TestGuardConsulEmptiedCatalog(t *testing.T) {
	const hold = 3 * time.Second
	a := harness.Consul(t)
	services := map[string]string{"web-1": "web", "web-2": "web", "api-1": "api"}
	registerAll(t, a, map[string]string{"web-1": "web", "web-2": "web", "api-1": "api", "db-1": "db"})
	h := runGuarded(t, a.Addr(), hold)
	h.out.await(t, "the first snapshot, 4 instances", endpoints(4), nil)
	held := func() float64 { return metricValue(t, h.metrics.Held) }

	// A lone service leaves: 1 of 4, applied at once.
	start := time.Now()
	if err := a.Client().Agent().ServiceDeregister("db-1"); err != nil {
		t.Fatal(err)
	}
	h.out.await(t, "db gone", endpoints(3), nil)
	if d := time.Since(start); d >= hold || held() != 0 {
		t.Fatalf("a lone service leaving took %v (held = %v); want it applied at once", d, held())
	}

	// The agent restarts with an empty catalog: held.
	a.Stop()
	a.Start()
	h.raw.await(t, "the empty catalog from the restarted agent", endpoints(0), nil)
	if held() != 1 {
		t.Fatalf("xds_discovery_held = %v after the empty catalog, want 1", held())
	}
	// What the guard emitted before the restart may still be queued (the
	// source can emit the 3-instance state twice: the catalog and the
	// health watch of the service that left each report it); the empty
	// catalog must not be among it.
	for s, ok := h.out.pending(); ok; s, ok = h.out.pending() {
		if s.EndpointCount() != 3 {
			t.Fatalf("the guard applied %+v during the hold", s)
		}
	}
	// The services come back within the hold: the hold is cancelled and
	// the empty catalog never applied.
	registerAll(t, a, services)
	h.out.await(t, "the restored instances", endpoints(3), func(s Snapshot) bool { return s.EndpointCount() > 0 })
	if held() != 0 || metricValue(t, h.metrics.Holds) != 1 {
		t.Fatalf("after the restore: held = %v, holds = %v; want 0 and 1", held(), metricValue(t, h.metrics.Holds))
	}

	// Every service deregistered: held for the hold, then applied.
	start = time.Now()
	for id := range services {
		if err := a.Client().Agent().ServiceDeregister(id); err != nil {
			t.Fatal(err)
		}
	}
	h.raw.await(t, "the emptied catalog", endpoints(0), nil)
	if held() != 1 {
		t.Fatalf("xds_discovery_held = %v after deregistering everything, want 1", held())
	}
	deadline := time.After(hold + consulTestTimeout)
	for applied := false; !applied; {
		select {
		case s := <-h.out.snaps:
			applied = s.EndpointCount() == 0
		case <-deadline:
			t.Fatal("the emptied catalog was never applied")
		}
	}
	if d := time.Since(start); d < hold {
		t.Fatalf("the emptied catalog was applied %v after the deregistrations, before the hold (%v) ended", d, hold)
	}
	if held() != 0 {
		t.Fatalf("xds_discovery_held = %v after the hold, want 0", held())
	}
}
