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

// TestConsulWAN: two agents joined over the WAN; a service of dc2 is read
// through dc1's agent; with dc2 stopped that read fails, and after dc2 is
// started again it works again (its file services back).
func TestConsulWAN(t *testing.T) {
	agents := ConsulWAN(t, "dc1", "dc2")
	dc1, dc2 := agents[0], agents[1]
	if dc1.Datacenter() != "dc1" || dc2.Datacenter() != "dc2" || dc1.WANAddr() == "" || dc1.WANAddr() == dc2.WANAddr() {
		t.Fatalf("agents: %s at %s, %s at %s", dc1.Datacenter(), dc1.WANAddr(), dc2.Datacenter(), dc2.WANAddr())
	}
	dc2.RegisterFile(t, api.AgentServiceRegistration{Name: "remote", Port: 8080})
	remote := func() ([]*api.ServiceEntry, error) {
		entries, _, err := dc1.Client().Health().Service("remote", "", false, &api.QueryOptions{Datacenter: "dc2"})
		return entries, err
	}
	entries, err := remote()
	if err != nil || len(entries) != 1 || entries[0].Node.Datacenter != "dc2" {
		t.Fatalf("remote through dc1 = %v, %v; want one instance in dc2", entries, err)
	}
	if local, _, err := dc1.Client().Health().Service("remote", "", false, nil); err != nil || len(local) != 0 {
		t.Errorf("remote in dc1 = %v, %v; want none", local, err)
	}
	dc2.Stop()
	if _, err := remote(); err == nil {
		t.Error("dc2 read through dc1 while dc2 is stopped: no error")
	}
	dc2.Start()
	if entries, err := remote(); err != nil || len(entries) != 1 {
		t.Errorf("remote through dc1 after dc2's restart = %v, %v; want one instance", entries, err)
	}
}
