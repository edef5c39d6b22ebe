package envoye2e

import (
	"slices"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/hashicorp/consul/api"

	"github.com/xds-server/xds-server/e2e/harness"
)

// polFailoverConfig routes everything to web.
const polFailoverConfig = `
listeners:
  - name: ingress
    address: 127.0.0.1:0
    routes:
      - { prefix: /, service: web }
`

// TestEnvoyFailover: web's resolver fails v2 over to v1, so a 50/50
// split's v2 share goes to the aggregate cluster web~v2+web~v1. Under
// load, every v2 instance turns critical in Consul, then, once Envoy has
// them unhealthy, (dead in fact) answers 503: Envoy moves v2's share to v1 inside the aggregate, with
// the route unchanged, and no request fails.
func TestEnvoyFailover(t *testing.T) {
	env := polStart(t, polFailoverConfig, []string{"web"}, func(svc string) []api.ConfigEntry {
		return []api.ConfigEntry{
			&api.ServiceResolverConfigEntry{Kind: api.ServiceResolver, Name: svc,
				Subsets: map[string]api.ServiceResolverSubset{
					"v1": {Filter: `Service.Meta.version == "v1"`}, "v2": {Filter: `Service.Meta.version == "v2"`}},
				Failover: map[string]api.ServiceResolverFailover{"v2": {ServiceSubset: "v1"}}},
			polSplitter(svc, 50),
		}
	}, "ingress")
	route := "prefix / -> web~v1:5000 web~v2+web~v1:5000"
	env.awaitRoutes(t, "ingress", route)
	l := harness.StartHTTPLoad(harness.HTTPLoadConfig{URL: "http://" + env.addrs["ingress"] + "/", Workers: 2})
	defer l.Stop()
	if v := polVersions(env.awaitLoad(t, l, 400)); v["v2"] == 0 {
		t.Fatalf("before the failover v2 served none of 400 requests: %v", v)
	}
	env.setTTL(t, "web", api.HealthCritical, "v2-a", "v2-b")
	env.envoy.AwaitHosts(t, "web~v2", swWait, func(h []harness.EnvoyHost) bool {
		return !slices.ContainsFunc(h, func(h harness.EnvoyHost) bool { return h.Health == corev3.HealthStatus_HEALTHY })
	})
	before := env.awaitLoad(t, l, 50)
	for _, id := range []string{"v2-a", "v2-b"} {
		env.backends[id].fail.Store(true)
	}
	seg := polSince(before, env.awaitLoad(t, l, 1000))
	total := l.Stop()
	t.Logf("v2 critical, then failing: %s (whole run: %s)", seg, total)
	if total.Failed() != 0 {
		t.Errorf("%d of %d requests failed over the whole run: %s", total.Failed(), total.Total, total)
	}
	if polVersions(seg)["v2"] != 0 {
		t.Errorf("v2 served %d requests after failing: %s", polVersions(seg)["v2"], seg)
	}
	env.awaitRoutes(t, "ingress", route) // the route never moved: the failover is Envoy's own
	env.finish(t)
}
