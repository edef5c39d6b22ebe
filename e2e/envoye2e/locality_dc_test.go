package envoye2e

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/hashicorp/consul/api"

	"github.com/xds-server/xds-server/e2e/harness"
)

// ldcConfig: web fails over zone, then datacenter, routed by a listener.
const ldcConfig = `
services:
  web: { locality: { failover: [zone, datacenter] } }
listeners:
  - name: ingress
    address: 127.0.0.1:0
    routes:
      - { prefix: /, service: web }
`

// ldcBackends are the backends' ids by datacenter; the first character
// of an id is its datacenter's number (lzCount's share and lzAwaitZone
// key on it). Every backend is in zone a.
var ldcBackends = map[string][]string{"dc1": {"1a", "1b"}, "dc2": {"2a"}}

// TestEnvoyDatacenterFailover: two Consul datacenters joined over the WAN,
// web's HTTP backends 1a and 1b in dc1 and 2a in dc2, all in zone a with
// TTL checks; xds-server reads both through dc1's agent
// (--discovery.consul.datacenters dc1,dc2) with failover [zone,
// datacenter]; a real Envoy 1.40 in zone a with no datacenter in its
// metadata (so of dc1, the first datacenter):
//   - Envoy's /clusters has dc1's hosts at priority 0 and dc2's at 1 (dc2's
//     zone a is another datacenter's, not the node's zone), and every
//     request is served in dc1;
//   - both dc1 checks critical: every request is served in dc2 within 2 s
//     of Consul's catalog saying so, none fails after; passing again: back
//     in dc1;
//   - dc1's Consul agent stopped (its backends healthy): xds-server goes
//     stale and keeps its last known data, Envoy keeps its hosts and every
//     request stays in dc1.
func TestEnvoyDatacenterFailover(t *testing.T) {
	skipShort(t)
	begin := time.Now()
	agents := harness.ConsulWAN(t, "dc1", "dc2")
	dcOf := map[string]string{} // host:port -> datacenter
	for i, agent := range agents {
		for _, id := range ldcBackends[agent.Datacenter()] {
			addr := lzStartBackend(t, id)
			dcOf[addr] = agent.Datacenter()
			ldcRegister(t, agents[i], id, addr)
		}
	}
	t.Logf("two datacenters up, backends registered in %v", time.Since(begin).Round(time.Millisecond))
	s := lzSetup{consul: agents[0]}
	s.srv = startServer(t, s.consul, "--config", swWriteConfig(t, ldcConfig),
		"--discovery.consul.datacenters", "dc1,dc2")
	s.envoy = harness.StartEnvoy(t, harness.EnvoyOptions{NodeID: "dc1-envoy", XDSAddr: s.srv.XDSAddr,
		BootstrapArgs: []string{"--zone", "a"}})
	s.addr = s.envoy.AwaitListener(t, "ingress", swWait)
	hosts := ldcAwaitPriorities(t, s, dcOf, corev3.HealthStatus_HEALTHY)
	t.Logf("web in Envoy: %s", harness.DescribeHosts(hosts))
	ldcAllIn(t, s, "healthy dc1", "1", 1000)

	ldcFailover(t, s, dcOf)
	ldcStale(t, s, dcOf)
	t.Logf("whole test %v", time.Since(begin).Round(time.Millisecond))
	s.envoy.AssertAccepted(t)
}

// ldcRegister registers backend id (at addr) in agent's datacenter as
// web-<id> of service web in zone a, with a passing TTL check
// ttl-web-<id>.
func ldcRegister(t *testing.T, agent *harness.ConsulAgent, id, addr string) {
	t.Helper()
	host, port, _ := net.SplitHostPort(addr)
	p, _ := strconv.Atoi(port)
	if err := agent.Client().Agent().ServiceRegister(&api.AgentServiceRegistration{
		ID: "web-" + id, Name: "web", Address: host, Port: p, Meta: map[string]string{"zone": "a"},
		Check: &api.AgentServiceCheck{CheckID: "ttl-web-" + id, TTL: "10m", Status: api.HealthPassing},
	}); err != nil {
		t.Fatal(err)
	}
}

// ldcAwaitPriorities waits until Envoy holds web's three hosts, dc1's at
// priority 0 with dc1Health and dc2's healthy at priority 1, and returns
// them.
func ldcAwaitPriorities(t *testing.T, s lzSetup, dcOf map[string]string, dc1Health corev3.HealthStatus) []harness.EnvoyHost {
	t.Helper()
	want := map[string]uint32{"dc1": 0, "dc2": 1}
	return s.envoy.AwaitHosts(t, "web", swWait, func(h []harness.EnvoyHost) bool {
		for _, x := range h {
			dc := dcOf[x.Addr]
			health := map[bool]corev3.HealthStatus{true: dc1Health, false: corev3.HealthStatus_HEALTHY}[dc == "dc1"]
			if p, ok := want[dc]; !ok || p != x.Priority || x.Health != health || x.Zone != "a" {
				return false
			}
		}
		return len(h) == len(dcOf)
	})
}

// ldcFailover: both dc1 checks critical -> every request served in dc2
// within 2 s of Consul's catalog holding them critical (lzAwaitZone logs
// the requests that failed meanwhile), none failed after; passing again
// -> back in dc1, none failed. Envoy holds dc1's hosts UNHEALTHY at
// priority 0 meanwhile. The TTL update reaches the catalog through
// the agent's anti-entropy, which Consul holds up to 3 s after a server
// event (its serverUpInterval jitter): that part is Consul's, logged, not
// asserted.
func ldcFailover(t *testing.T, s lzSetup, dcOf map[string]string) {
	catalog := ldcWatchCatalog(t, s.consul, ldcBackends["dc1"], api.HealthCritical)
	lzSetTTL(t, s, "web", ldcBackends["dc1"], api.HealthCritical)
	critical := time.Now()
	moved := lzAwaitZone(t, s, "/", "2")
	inCatalog := ldcAt(t, catalog)
	t.Logf("dc1 critical: in Consul's catalog %v after the TTL update; Envoy serves from dc2 %v after that",
		inCatalog.Sub(critical).Round(time.Millisecond), moved.Sub(inCatalog).Round(time.Millisecond))
	if lag := moved.Sub(inCatalog); lag > 2*time.Second {
		t.Errorf("moved to dc2 %v after dc1 turned critical in Consul's catalog; want within 2s", lag)
	}
	ldcAllIn(t, s, "after the switch", "2", 500)
	hosts := ldcAwaitPriorities(t, s, dcOf, corev3.HealthStatus_UNHEALTHY)
	t.Logf("dc1 critical: Envoy holds %s", harness.DescribeHosts(hosts))
	catalog = ldcWatchCatalog(t, s.consul, ldcBackends["dc1"], api.HealthPassing)
	lzSetTTL(t, s, "web", ldcBackends["dc1"], api.HealthPassing)
	passing := time.Now()
	back := lzAwaitZone(t, s, "/", "1")
	inCatalog = ldcAt(t, catalog)
	t.Logf("dc1 passing again: in Consul's catalog %v after the TTL update; back in dc1 %v after that",
		inCatalog.Sub(passing).Round(time.Millisecond), back.Sub(inCatalog).Round(time.Millisecond))
	ldcAllIn(t, s, "back", "1", 500)
}

// ldcAllIn sends n requests through Envoy and fails the test unless the
// backends of the datacenter numbered dc served them all, none failed.
func ldcAllIn(t *testing.T, s lzSetup, when, dc string, n int) {
	t.Helper()
	got := lzCount(t, s.addr, "/", n)
	t.Logf("%s: %s", when, got)
	if got.failed > 0 || got.share(dc) < 1 {
		t.Errorf("%s: %s; want every request served in dc%s, none failed", when, got, dc)
	}
}

// ldcWatchCatalog watches web's checks in agent's catalog (its servers'
// state, which xds-server reads, not the agent's local one) with blocking
// queries from now on, and sends on the channel it returns the time they
// first show every backend of ids with status (closed without a send on
// an error or after swWait).
func ldcWatchCatalog(t *testing.T, agent *harness.ConsulAgent, ids []string, status string) <-chan time.Time {
	t.Helper()
	health := agent.Client().Health()
	_, meta, err := health.Checks("web", nil)
	if err != nil {
		t.Fatal(err)
	}
	at := make(chan time.Time, 1)
	go func() {
		defer close(at)
		for deadline := time.Now().Add(swWait); time.Now().Before(deadline); {
			checks, m, err := health.Checks("web", &api.QueryOptions{WaitIndex: meta.LastIndex, WaitTime: 5 * time.Second})
			if err != nil {
				return
			}
			meta = m
			n := 0
			for _, c := range checks {
				if c.Status == status && slices.Contains(ids, strings.TrimPrefix(c.ServiceID, "web-")) {
					n++
				}
			}
			if n == len(ids) {
				at <- time.Now()
				return
			}
		}
	}()
	return at
}

// ldcAt is the time ldcWatchCatalog sends on at; it fails the test if the
// watch ends without one or none comes within swWait.
func ldcAt(t *testing.T, at <-chan time.Time) time.Time {
	t.Helper()
	select {
	case when, ok := <-at:
		if !ok {
			t.Fatal("Consul's catalog never showed the checks' new status")
		}
		return when
	case <-time.After(swWait):
		t.Fatal("Consul's catalog did not show the checks' new status in time")
	}
	return time.Time{}
}

// ldcStale: dc1's agent (xds-server's only way to either datacenter)
// stopped while its backends stay healthy: xds-server marks both
// datacenters stale and keeps their last known endpoints through failed
// reads (10 awaited), so Envoy keeps dc1's hosts healthy at priority 0 and
// serves every request in dc1.
func ldcStale(t *testing.T, s lzSetup, dcOf map[string]string) {
	s.consul.Stop()
	stopped := time.Now()
	s.envoy.Await(t, "xds-server stale", swWait, func() (bool, string, error) {
		for _, series := range []string{`xds_discovery_stale{source="consul"}`,
			`xds_discovery_consul_datacenter_stale{datacenter="dc1"}`,
			`xds_discovery_consul_datacenter_stale{datacenter="dc2"}`} {
			if v := secMetric(t, s.srv, series); v != 1 {
				return false, fmt.Sprintf("%s %v", series, v), nil
			}
		}
		return true, "", nil
	})
	t.Logf("dc1's agent stopped: xds-server stale %v later", time.Since(stopped).Round(time.Millisecond))
	const reads = `xds_discovery_consul_datacenter_errors_total{datacenter="dc1"}`
	s.envoy.Await(t, "10 failed reads of dc1", swWait, func() (bool, string, error) {
		v := secMetric(t, s.srv, reads)
		return v >= 10, fmt.Sprintf("%s %v", reads, v), nil
	})
	t.Logf("10 failed reads of dc1 %v after the stop", time.Since(stopped).Round(time.Millisecond))
	hosts := ldcAwaitPriorities(t, s, dcOf, corev3.HealthStatus_HEALTHY)
	t.Logf("dc1's agent stopped: Envoy holds %s", harness.DescribeHosts(hosts))
	ldcAllIn(t, s, "dc1's agent stopped (last known data)", "1", 1000)
}
