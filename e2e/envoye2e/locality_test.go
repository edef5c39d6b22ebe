package envoye2e

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/hashicorp/consul/api"

	"github.com/xds-server/xds-server/e2e/harness"
)

// lzConfig: four services on the same four backends (two in zone a, two
// in zone b), each with a locality policy, and a listener routing
// /<service> to each: lf fails over zone by zone (Envoy's default
// overprovisioning factor), lo140 and lo200 too with an explicit
// overprovisioning_factor, ld keeps 80% in the node's zone (distribute),
// and so does ldr with lb_policy random (a load_balancing_policy list,
// the locality weighting in the random policy's own config).
const lzConfig = `
services:
  lf: { locality: { failover: [zone] } }
  lo140: { locality: { failover: [zone] }, overprovisioning_factor: 140 }
  lo200: { locality: { failover: [zone] }, overprovisioning_factor: 200 }
  ld: { locality: { failover: [zone], distribute: 0.8 } }
  ldr: { lb_policy: random, locality: { failover: [zone], distribute: 0.8 } }
listeners:
  - name: ingress
    address: 127.0.0.1:0
    routes:
      - { prefix: /lf, service: lf }
      - { prefix: /lo140, service: lo140 }
      - { prefix: /lo200, service: lo200 }
      - { prefix: /ldr, service: ldr }
      - { prefix: /ld, service: ld }
`

// lzBackends are the backends' ids; the first letter is the zone.
var lzBackends = []string{"a1", "a2", "b1", "b2"}

// lzSetup is what every part of TestEnvoyZones shares.
type lzSetup struct {
	consul *harness.ConsulAgent
	srv    *harness.Server
	envoy  *harness.Envoy    // in zone a (state of the world)
	addr   string            // its ingress listener, host:port
	other  lzNode            // in region dc1, zone b (delta)
	zoneOf map[string]string // host:port as Envoy sees it -> zone
}

// lzNode is an Envoy, its ingress listener and its zone.
type lzNode struct {
	envoy *harness.Envoy
	addr  string
	zone  string
}

// TestEnvoyZones: a real Envoy 1.40 in zone a (its bootstrap's
// node.locality, from `xds-server envoy bootstrap --zone a`) and a delta
// Envoy in zone b (`--locality dc1/b`: Consul's endpoints have their
// datacenter as region) in front of HTTP backends registered in a real
// Consul with meta zone a or b:
//   - failover [zone]: each Envoy's /clusters has its own zone at priority
//     0 and the other at 1, and >= 99% of its traffic stays in its zone;
//   - both zone-a checks critical: Envoy serves from zone b within 2 s and
//     no request fails once it has; passing again: back to zone a;
//   - one zone-a endpoint drained (DRAINING): Envoy leaves it out of its
//     priority, so zone a keeps everything on the other; both drained:
//     zone b; undrained: back to zone a;
//   - one of two zone-a hosts critical: with overprovisioning_factor 140,
//     Envoy sends 50% x 1.4 = 70% to zone a and 30% to zone b; with 200,
//     100% to zone a;
//   - distribute 0.8: Envoy splits 80/20 by locality weight at priority 0.
func TestEnvoyZones(t *testing.T) {
	skipShort(t)
	s := lzSetup{consul: harness.Consul(t), zoneOf: map[string]string{}}
	for _, id := range lzBackends {
		addr := lzStartBackend(t, id)
		s.zoneOf[addr] = id[:1]
		for _, svc := range []string{"lf", "lo140", "lo200", "ld", "ldr"} {
			status := api.HealthPassing
			if id == "a1" && (svc == "lo140" || svc == "lo200") {
				status = api.HealthCritical // half of zone a down from the start
			}
			lzRegister(t, s.consul, svc, id, addr,
				&api.AgentServiceCheck{CheckID: "ttl-" + svc + "-" + id, TTL: "10m", Status: status})
		}
	}
	s.srv = startServer(t, s.consul, "--config", swWriteConfig(t, lzConfig))
	s.envoy = harness.StartEnvoy(t, harness.EnvoyOptions{NodeID: "zone-a-envoy", XDSAddr: s.srv.XDSAddr,
		BootstrapArgs: []string{"--zone", "a"}})
	s.addr = s.envoy.AwaitListener(t, "ingress", swWait)
	other := harness.StartEnvoy(t, harness.EnvoyOptions{NodeID: "zone-b-envoy", XDSAddr: s.srv.XDSAddr, Delta: true,
		BootstrapArgs: []string{"--locality", "dc1/b"}})
	s.other = lzNode{envoy: other, addr: other.AwaitListener(t, "ingress", swWait), zone: "b"}

	t.Run("priorities", func(t *testing.T) { lzPriorities(t, s) })
	t.Run("failover", func(t *testing.T) { lzFailover(t, s) })
	t.Run("drain", func(t *testing.T) { lzDrain(t, s) })
	t.Run("overprovisioning", func(t *testing.T) { lzOverprovisioning(t, s) })
	t.Run("distribute", func(t *testing.T) { lzDistribute(t, s) })
	t.Run("distribute random", func(t *testing.T) { lzDistributeRandom(t, s) })
	for _, e := range []*harness.Envoy{s.envoy, s.other.envoy} {
		e.AssertAccepted(t)
		if c := e.Complaints(); len(c) > 0 {
			t.Errorf("envoy %s complained:\n%s", e.NodeID, strings.Join(c, "\n"))
		}
	}
}

// lzStartBackend serves HTTP on a free loopback port until cleanup,
// answering every request "hello from <id> (zone <z>)", and returns its
// address.
func lzStartBackend(t *testing.T, id string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "hello from %s (zone %s)\n", id, id[:1])
	}))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// lzRegister registers backend id (at addr, in the zone its id's first
// letter names) in Consul as svc-id of service svc, with check (nil: none,
// so passing).
func lzRegister(t *testing.T, consul *harness.ConsulAgent, svc, id, addr string, check *api.AgentServiceCheck) {
	t.Helper()
	host, port, _ := net.SplitHostPort(addr)
	p, _ := strconv.Atoi(port)
	if err := consul.Client().Agent().ServiceRegister(&api.AgentServiceRegistration{
		ID: svc + "-" + id, Name: svc, Address: host, Port: p, Meta: map[string]string{"zone": id[:1]}, Check: check,
	}); err != nil {
		t.Fatal(err)
	}
}

// lzPriorities: in each Envoy's /clusters, lf's hosts of its own zone
// are at priority 0 and the other zone's at 1, and >= 99% of 1,000
// requests through it are served in its zone.
func lzPriorities(t *testing.T, s lzSetup) {
	for _, n := range []lzNode{{s.envoy, s.addr, "a"}, s.other} {
		want := map[string]uint32{"a": 1, "b": 1}
		want[n.zone] = 0
		hosts := lzAwaitPriorities(t, s, n.envoy, "lf", want)
		t.Logf("lf in %s: %s", n.envoy.NodeID, harness.DescribeHosts(hosts))
		got := lzCount(t, n.addr, "/lf", 1000)
		t.Logf("lf traffic through %s: %s", n.envoy.NodeID, got)
		if sh := got.share(n.zone); sh < 0.99 || got.failed > 0 {
			t.Errorf("%s: %.1f%% served in zone %s, %d failed; want >= 99%% and none (%s)",
				n.envoy.NodeID, 100*sh, n.zone, got.failed, got)
		}
	}
}

// lzAwaitPriorities waits until every host of cluster in e is at the
// priority of its zone in want, and returns them.
func lzAwaitPriorities(t *testing.T, s lzSetup, e *harness.Envoy, cluster string, want map[string]uint32) []harness.EnvoyHost {
	t.Helper()
	return e.AwaitHosts(t, cluster, swWait, func(h []harness.EnvoyHost) bool {
		for _, x := range h {
			if p, ok := want[s.zoneOf[x.Addr]]; !ok || p != x.Priority || x.Zone != s.zoneOf[x.Addr] {
				return false
			}
		}
		return len(h) == len(lzBackends)
	})
}

// lzFailover: both of lf's zone-a checks critical -> Envoy serves every
// request from zone b within 2 s (the requests that failed meanwhile are
// logged) and none fails after; passing again -> back in zone a.
func lzFailover(t *testing.T, s lzSetup) {
	lzSetTTL(t, s, "lf", []string{"a1", "a2"}, api.HealthCritical)
	critical := time.Now()
	moved := lzAwaitZone(t, s, "/lf", "b")
	t.Logf("zone a critical: Envoy serves from zone b %v after the checks turned critical", moved.Sub(critical).Round(time.Millisecond))
	if lag := moved.Sub(critical); lag > 2*time.Second {
		t.Errorf("moved to zone b %v after zone a turned critical; want within 2s", lag)
	}
	after := lzCount(t, s.addr, "/lf", 500)
	t.Logf("after the switch: %s", after)
	if after.failed > 0 || after.share("b") < 1 {
		t.Errorf("after the switch: %s; want every request served in zone b, none failed", after)
	}
	lzSetTTL(t, s, "lf", []string{"a1", "a2"}, api.HealthPassing)
	passing := time.Now()
	back := lzAwaitZone(t, s, "/lf", "a")
	t.Logf("zone a passing again: back in zone a after %v", back.Sub(passing).Round(time.Millisecond))
	after = lzCount(t, s.addr, "/lf", 500)
	t.Logf("back: %s", after)
	if after.failed > 0 || after.share("a") < 0.99 {
		t.Errorf("back: %s; want >= 99%% in zone a, none failed", after)
	}
}

// lzDrain: lf-a1 drained through the admin API: Envoy holds it DRAINING
// and, unlike an UNHEALTHY endpoint, leaves it out of priority 0's size:
// zone a keeps every request (on a2); a2 drained too: every request in
// zone b, none failed; both undrained: back in zone a.
func lzDrain(t *testing.T, s lzSetup) {
	draining := func(n int) {
		t.Helper()
		s.envoy.AwaitHosts(t, "lf", swWait, func(h []harness.EnvoyHost) bool {
			k := 0
			for _, x := range h {
				if x.Health == corev3.HealthStatus_DRAINING {
					k++
				}
			}
			return k == n
		})
	}
	lzAdmin(t, s.srv, http.MethodPost, "/v1/drain", `{"service": "lf", "endpoint": "lf-a1"}`)
	draining(1)
	got := lzCount(t, s.addr, "/lf", 1000)
	t.Logf("a1 draining: %s", got)
	if got.failed > 0 || got.byID["a2"] != 1000 {
		t.Errorf("a1 draining: %s; want every request on a2 (a DRAINING host is left out of its priority)", got)
	}
	lzAdmin(t, s.srv, http.MethodPost, "/v1/drain", `{"service": "lf", "endpoint": "lf-a2"}`)
	draining(2)
	got = lzCount(t, s.addr, "/lf", 1000)
	t.Logf("zone a draining: %s", got)
	if got.failed > 0 || got.share("b") < 1 {
		t.Errorf("zone a draining: %s; want every request in zone b, none failed", got)
	}
	for _, id := range []string{"a1", "a2"} {
		lzAdmin(t, s.srv, http.MethodDelete, "/v1/drain?service=lf&endpoint=lf-"+id, "")
	}
	draining(0)
	if got = lzCount(t, s.addr, "/lf", 500); got.failed > 0 || got.share("a") < 0.99 {
		t.Errorf("undrained: %s; want >= 99%% in zone a", got)
	}
}

// lzSetTTL sets the TTL checks of service's backends ids to status.
func lzSetTTL(t *testing.T, s lzSetup, service string, ids []string, status string) {
	t.Helper()
	for _, id := range ids {
		if err := s.consul.Client().Agent().UpdateTTL("ttl-"+service+"-"+id, "e2e", status); err != nil {
			t.Fatal(err)
		}
	}
}

// lzAwaitZone is lzAwaitZoneWithin 10 s.
func lzAwaitZone(t *testing.T, s lzSetup, path, zone string) time.Time {
	t.Helper()
	return lzAwaitZoneWithin(t, s, path, zone, 10*time.Second)
}

// lzAwaitZoneWithin sends requests to path one after another until 20 in
// a row are served in zone, logs how many failed meanwhile and why, and
// returns when the first of the 20 was answered.
func lzAwaitZoneWithin(t *testing.T, s lzSetup, path, zone string, limit time.Duration) time.Time {
	t.Helper()
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(limit)
	var first time.Time
	run, sent := 0, 0
	errs := map[string]int{}
	for time.Now().Before(deadline) {
		at := time.Now()
		id, err := lzGet(client, "http://"+s.addr+path)
		sent++
		switch {
		case err != nil:
			errs[err.Error()]++
			run = 0
		case id[:1] == zone:
			if run == 0 {
				first = at
			}
			if run++; run == 20 {
				t.Logf("switch to zone %s: %d of %d requests failed during it: %v", zone, swTotal(errs), sent, errs)
				return first
			}
		default:
			run = 0
		}
	}
	t.Fatalf("requests to %s did not move to zone %s within %v (%d sent, failures %v)", path, zone, limit, sent, errs)
	return time.Time{}
}

// lzOverprovisioning: with a1 critical in lo140 and lo200 (one of two
// zone-a hosts), Envoy's priority 0 is 50% healthy: with
// overprovisioning_factor 140 it takes 70% of the traffic and zone b the
// rest; with 200 it takes it all. Envoy's /config_dump holds the factor.
func lzOverprovisioning(t *testing.T, s lzSetup) {
	for _, c := range []struct {
		service string
		factor  uint32
		zoneA   float64
	}{{"lo140", 140, 0.70}, {"lo200", 200, 1.0}} {
		s.envoy.AwaitHosts(t, c.service, swWait, func(h []harness.EnvoyHost) bool {
			unhealthy := 0
			for _, x := range h {
				if x.Health == corev3.HealthStatus_UNHEALTHY {
					unhealthy++
				}
			}
			return len(h) == len(lzBackends) && unhealthy == 1
		})
		var cla endpointv3.ClusterLoadAssignment
		lzDumped(t, s.envoy, "endpoint", c.service, &cla)
		if f := cla.GetPolicy().GetOverprovisioningFactor().GetValue(); f != c.factor {
			t.Errorf("%s: Envoy holds overprovisioning_factor %d, want %d", c.service, f, c.factor)
		}
		got := lzCount(t, s.addr, "/"+c.service, 2000)
		t.Logf("%s (overprovisioning_factor %d, a1 critical): zone a %.1f%%; %s", c.service, c.factor, 100*got.share("a"), got)
		if sh := got.share("a"); sh < c.zoneA-0.05 || sh > c.zoneA+0.05 || got.failed > 0 {
			t.Errorf("%s: %.1f%% in zone a, %d failed; want %.0f%% +-5 points, none failed", c.service, 100*sh, got.failed, 100*c.zoneA)
		}
		if n := got.byID["a1"]; n > 0 {
			t.Errorf("%s: %d requests reached a1, whose check is critical", c.service, n)
		}
	}
}

// lzDistribute: with distribute 0.8, each Envoy holds ld's zones a and b
// at priority 0 with locality weights 4:1 for its own zone and the
// cluster's locality_weighted_lb_config, and serves 80% +-3 points of
// 2,000 requests in its zone.
func lzDistribute(t *testing.T, s lzSetup) {
	for _, n := range []lzNode{{s.envoy, s.addr, "a"}, s.other} {
		hosts := lzAwaitPriorities(t, s, n.envoy, "ld", map[string]uint32{"a": 0, "b": 0})
		t.Logf("ld in %s: %s", n.envoy.NodeID, harness.DescribeHosts(hosts))
		var c clusterv3.Cluster
		lzDumped(t, n.envoy, "cluster", "ld", &c)
		if c.GetCommonLbConfig().GetLocalityWeightedLbConfig() == nil {
			t.Errorf("%s: cluster ld has no common_lb_config.locality_weighted_lb_config: %v", n.envoy.NodeID, c.GetCommonLbConfig())
		}
		var cla endpointv3.ClusterLoadAssignment
		lzDumped(t, n.envoy, "endpoint", "ld", &cla)
		weights := map[string]uint32{}
		for _, l := range cla.GetEndpoints() {
			weights[l.GetLocality().GetZone()] += l.GetLoadBalancingWeight().GetValue()
		}
		other := map[string]string{"a": "b", "b": "a"}[n.zone]
		if weights[n.zone] != 4*weights[other] || weights[other] == 0 {
			t.Errorf("%s: ld locality weights %v; want zone %s 4 x zone %s", n.envoy.NodeID, weights, n.zone, other)
		}
		got := lzCount(t, n.addr, "/ld", 2000)
		t.Logf("ld (distribute 0.8) through %s: locality weights %v, zone %s %.1f%%; %s",
			n.envoy.NodeID, weights, n.zone, 100*got.share(n.zone), got)
		if sh := got.share(n.zone); sh < 0.77 || sh > 0.83 || got.failed > 0 {
			t.Errorf("%s: ld: %.1f%% in zone %s, %d failed; want 80%% +-3 points, none failed",
				n.envoy.NodeID, 100*sh, n.zone, got.failed)
		}
	}
}

// lzDistributeRandom: ldr (lb_policy random, sent as a
// load_balancing_policy list whose random policy carries the locality
// weighting) splits 80/20 too in the zone-a Envoy, within 3 points over
// 2,000 requests (Envoy picks the locality by weight, then a host in it
// at random).
func lzDistributeRandom(t *testing.T, s lzSetup) {
	lzAwaitPriorities(t, s, s.envoy, "ldr", map[string]uint32{"a": 0, "b": 0})
	var c clusterv3.Cluster
	lzDumped(t, s.envoy, "cluster", "ldr", &c)
	policies := c.GetLoadBalancingPolicy().GetPolicies()
	if len(policies) == 0 || policies[0].GetTypedExtensionConfig().GetName() != "envoy.load_balancing_policies.random" {
		t.Errorf("cluster ldr: load_balancing_policy %v; want the random policy first", c.GetLoadBalancingPolicy())
	}
	got := lzCount(t, s.addr, "/ldr", 2000)
	t.Logf("ldr (lb_policy random, distribute 0.8): zone a %.1f%%; %s", 100*got.share("a"), got)
	if sh := got.share("a"); sh < 0.77 || sh > 0.83 || got.failed > 0 {
		t.Errorf("ldr: %.1f%% in zone a, %d failed; want 80%% +-3 points, none failed", 100*sh, got.failed)
	}
}
