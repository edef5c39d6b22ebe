package discovery

import (
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/xds-server/xds-server/e2e/harness"
)

// ttlService is a service instance with one TTL check (id "<id>-ttl",
// initially passing), to be flipped through the agent API.
func ttlService(name, id string, port int, meta map[string]string, weights *api.AgentWeights) api.AgentServiceRegistration {
	return api.AgentServiceRegistration{ID: id, Name: name, Port: port, Meta: meta, Weights: weights,
		Checks: api.AgentServiceChecks{{CheckID: id + "-ttl", TTL: "1h", Status: api.HealthPassing}}}
}

// TestConsulIntegration drives a real Consul agent through health changes,
// maintenance, a new service, an outage and a restart, and checks what the
// source emits at each step.
func TestConsulIntegration(t *testing.T) {
	a := harness.Consul(t)
	// Defined in the agent's config dir, so they come back after the restart.
	a.RegisterFile(t, ttlService("web", "web-1", 8081, map[string]string{"zone": "z1"}, &api.AgentWeights{Passing: 5, Warning: 2}))
	a.RegisterFile(t, ttlService("web", "web-2", 8082, nil, &api.AgentWeights{Passing: 1, Warning: 1}))

	h := runConsul(t, a.Addr(), ConsulConfig{MinInterval: 10 * time.Millisecond, BackoffBase: 10 * time.Millisecond, BackoffMax: 100 * time.Millisecond})
	first := h.next(t)
	web, ok := first.Service("web")
	if !ok || len(web.Endpoints) != 2 || len(first.Services) != 1 {
		t.Fatalf("first snapshot = %+v, want service web with web-1 and web-2 (and not consul)", first)
	}
	want := Endpoint{ID: "web-1", Address: "127.0.0.1", Port: 8081, Health: HealthHealthy, Weight: 5,
		Locality: Locality{Region: harness.ConsulDatacenter, Zone: "z1"}, Meta: map[string]string{"zone": "z1"}, Tags: []string{}, Node: a.Node(), Datacenter: harness.ConsulDatacenter}
	if !web.Endpoints[0].Equal(want) {
		t.Errorf("web-1 = %+v, want %+v", web.Endpoints[0], want)
	}

	followChanges(t, a, h)
	outageAndRestart(t, a, h)
}

// followChanges flips checks and maintenance through the agent API and adds
// a service, awaiting the matching snapshot after each change.
func followChanges(t *testing.T, a *harness.ConsulAgent, h *consulHarness) {
	t.Helper()
	agent := a.Client().Agent()
	steps := []struct {
		what   string
		change func() error
		want   func(Snapshot) bool
	}{
		{"web-2 critical -> unhealthy",
			func() error { return agent.UpdateTTL("web-2-ttl", "down", api.HealthCritical) },
			func(s Snapshot) bool { return health(s, "web")["web-2"] == HealthUnhealthy }},
		{"web-1 warning -> healthy with the warning weight",
			func() error { return agent.UpdateTTL("web-1-ttl", "slow", api.HealthWarning) },
			func(s Snapshot) bool {
				ep := endpoint(s, "web", "web-1")
				return ep.Health == HealthHealthy && ep.Weight == 2
			}},
		{"web-2 maintenance -> draining, not removed",
			func() error { return agent.EnableServiceMaintenance("web-2", "deploy") },
			func(s Snapshot) bool {
				return health(s, "web")["web-2"] == HealthDraining && len(health(s, "web")) == 2
			}},
		{"node maintenance -> all draining",
			func() error { return agent.EnableNodeMaintenance("kernel upgrade") },
			func(s Snapshot) bool { return health(s, "web")["web-1"] == HealthDraining }},
		{"maintenance off, checks passing -> healthy again",
			func() error {
				return errors.Join(agent.DisableNodeMaintenance(), agent.DisableServiceMaintenance("web-2"), agent.UpdateTTL("web-1-ttl", "", api.HealthPassing), agent.UpdateTTL("web-2-ttl", "", api.HealthPassing))
			},
			func(s Snapshot) bool {
				return health(s, "web")["web-1"] == HealthHealthy && health(s, "web")["web-2"] == HealthHealthy
			}},
		{"service api appears",
			func() error { a.RegisterFile(t, ttlService("api", "api-1", 9090, nil, nil)); return nil },
			func(s Snapshot) bool { return health(s, "api")["api-1"] == HealthHealthy }},
	}
	for _, st := range steps {
		if err := st.change(); err != nil {
			t.Fatalf("%s: %v", st.what, err)
		}
		h.await(t, st.what, st.want, nil)
	}
}

// outageAndRestart stops Consul (nothing is emitted, the source is stale),
// starts it again with a fresh state and checks that updates resume.
func outageAndRestart(t *testing.T, a *harness.ConsulAgent, h *consulHarness) {
	t.Helper()
	// Outage: the last snapshot stays; nothing is emitted; the source is stale.
	m := h.metrics
	errorsBefore := metricValue(t, m.Errors.WithLabelValues("consul"))
	a.Stop()
	eventually(t, "stale = 1 and every loop failed twice", func() bool {
		return metricValue(t, m.Stale.WithLabelValues("consul")) == 1 && metricValue(t, m.Errors.WithLabelValues("consul")) >= errorsBefore+6
	})
	if s, ok := h.pending(); ok {
		t.Fatalf("snapshot emitted while Consul was down: %+v", s)
	}

	// Restart: a fresh in-memory state with indexes starting over. The file
	// services come back; a service registered now must show up.
	a.Start()
	if err := a.Client().Agent().ServiceRegister(&api.AgentServiceRegistration{ID: "late-1", Name: "late", Port: 7070}); err != nil {
		t.Fatal(err)
	}
	h.await(t, "the service registered after the restart", func(s Snapshot) bool {
		return len(health(s, "late")) == 1 && len(health(s, "web")) == 2 && len(health(s, "api")) == 1
	}, nil)
	eventually(t, "stale = 0", func() bool { return metricValue(t, m.Stale.WithLabelValues("consul")) == 0 })
}

// endpoint returns the endpoint id of service in s (zero if absent).
func endpoint(s Snapshot, service, id string) Endpoint {
	svc, _ := s.Service(service)
	for _, ep := range svc.Endpoints {
		if ep.ID == id {
			return ep
		}
	}
	return Endpoint{}
}
