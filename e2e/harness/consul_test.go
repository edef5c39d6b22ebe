package harness

import (
	"testing"

	"github.com/hashicorp/consul/api"
)

func TestConsulAgentRestartKeepsFileServices(t *testing.T) {
	a := Consul(t)
	addr := a.Addr()
	a.RegisterFile(t, api.AgentServiceRegistration{Name: "from-file", Port: 8080, Tags: []string{"t"},
		Weights: &api.AgentWeights{Passing: 3, Warning: 1},
		Checks:  api.AgentServiceChecks{{CheckID: "from-file-ttl", TTL: "1h", Status: api.HealthPassing}}})
	if err := a.Client().Agent().ServiceRegister(&api.AgentServiceRegistration{Name: "from-api", Port: 9090}); err != nil {
		t.Fatal(err)
	}
	a.Stop()
	a.Stop() // idempotent
	if _, err := a.Client().Status().Leader(); err == nil {
		t.Fatal("the agent still answers after Stop")
	}
	a.Start()
	if a.Addr() != addr {
		t.Errorf("restarted on %s, want the same address %s", a.Addr(), addr)
	}
	svcs, _, err := a.Client().Catalog().Services(nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := svcs["from-file"]; !ok {
		t.Errorf("catalog after restart = %v, want from-file back", svcs)
	}
	if _, ok := svcs["from-api"]; ok {
		t.Errorf("catalog after restart = %v, want from-api gone (in-memory state)", svcs)
	}
	entries, _, err := a.Client().Health().Service("from-file", "", false, nil)
	if err != nil || len(entries) != 1 {
		t.Fatalf("health of from-file = %v, %v; want one instance", entries, err)
	}
	e := entries[0]
	if e.Service.Port != 8080 || e.Service.Weights.Passing != 3 || e.Node.Datacenter != ConsulDatacenter || e.Checks.AggregatedStatus() != api.HealthPassing {
		t.Errorf("from-file = %+v on %+v, checks %v; want port 8080, passing weight 3, dc1, passing", e.Service, e.Node, e.Checks.AggregatedStatus())
	}
}
