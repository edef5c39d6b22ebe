package e2e

import (
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/xds-server/xds-server/e2e/harness"
)

// TestSeveralDatacenters runs the real binary against two Consul
// datacenters joined over the WAN, with discovery.consul.datacenters
// [dc1, dc2] through dc1's agent: a gRPC client reaches the echo backends
// of both; the console names dc2's endpoint dc2/echo-2 in dc2; with dc2's
// agent stopped, dc2 is stale and its endpoint is still served (traffic
// still reaches it); with dc2 back, it is fresh again.
func TestSeveralDatacenters(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	agents := harness.ConsulWAN(t, "dc1", "dc2")
	dc1, dc2 := agents[0], agents[1]
	echo := startEcho(t, 2)
	for i, b := range echo {
		agents[i].RegisterFile(t, api.AgentServiceRegistration{ID: b.ID, Name: "echo", Address: b.Host, Port: b.Port,
			Checks: api.AgentServiceChecks{{CheckID: "ttl-" + b.ID, TTL: "10m", Status: api.HealthPassing}}})
	}
	srv := startServer(t, dc1, "--discovery.consul.datacenters", "dc1,dc2")
	call := unaryCall(dialXDS(t, srv.XDSAddr, "dc-node"))
	awaitAll(t, call, []string{"echo-1", "echo-2"}, 30*time.Second)

	type endpoints struct {
		Endpoints []struct {
			ID         string `json:"id"`
			Datacenter string `json:"datacenter"`
		} `json:"endpoints"`
	}
	served := func() map[string]string {
		var v endpoints
		getJSON(t, srv.AdminURL("/ui/api/services/echo"), &v)
		out := map[string]string{}
		for _, e := range v.Endpoints {
			out[e.ID] = e.Datacenter
		}
		return out
	}
	if got := served(); len(got) != 2 || got["echo-1"] != "dc1" || got["dc2/echo-2"] != "dc2" {
		t.Fatalf("console endpoints = %v, want echo-1 in dc1 and dc2/echo-2 in dc2", got)
	}

	dc2.Stop()
	awaitMetric(t, srv, "xds_discovery_consul_datacenter_stale{datacenter=\"dc2\"} 1\n")
	if v := metricValue(t, srv, "", `xds_discovery_consul_datacenter_stale{datacenter="dc1"}`); v != 0 {
		t.Errorf("dc1 stale = %v while only dc2 is down", v)
	}
	if got := served(); got["dc2/echo-2"] != "dc2" {
		t.Errorf("console endpoints while dc2 is down = %v, want dc2/echo-2 kept", got)
	}
	awaitAll(t, call, []string{"echo-1", "echo-2"}, 10*time.Second) // dc2's backend still served

	dc2.Start()
	awaitMetric(t, srv, "xds_discovery_consul_datacenter_stale{datacenter=\"dc2\"} 0\n")
	if got := served(); len(got) != 2 {
		t.Errorf("console endpoints after dc2's return = %v, want both", got)
	}
}
