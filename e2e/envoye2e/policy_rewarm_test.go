package envoye2e

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
)

// TestEnvoyClusterChangeRewarms: a service-resolver's load balancer,
// changed at run time, changes web's cluster; Envoy replaces the cluster
// by one that warms until it gets web's load assignment again. The
// assignment carries the cluster's stamp, so it changed too and was sent:
// the new cluster is active well within Envoy's initial_fetch_timeout
// (15 s, what it took before the stamp), with no fetch timed out.
func TestEnvoyClusterChangeRewarms(t *testing.T) {
	env := polStart(t, polFailoverConfig, []string{"web"}, func(string) []api.ConfigEntry { return nil }, "ingress")
	env.awaitRoutes(t, "ingress", "prefix / -> web")
	active := func(policy string) func() (bool, string, error) {
		return func() (bool, string, error) {
			dump := env.envoy.Admin(t, "/config_dump?resource=dynamic_active_clusters")
			warming := env.envoy.Stat(t, "cluster_manager.warming_clusters")
			return bytes.Contains(dump, []byte(policy)) && warming == 0, fmt.Sprintf("%d warming", warming), nil
		}
	}
	for _, lb := range []string{"ring_hash", "least_request"} {
		polSet(t, env.consul, &api.ServiceResolverConfigEntry{Kind: api.ServiceResolver, Name: "web",
			Subsets: map[string]api.ServiceResolverSubset{
				"v1": {Filter: `Service.Meta.version == "v1"`}, "v2": {Filter: `Service.Meta.version == "v2"`}},
			LoadBalancer: &api.LoadBalancer{Policy: lb}})
		start := time.Now()
		env.envoy.Await(t, "web active with "+lb, 8*time.Second, active(map[string]string{"ring_hash": "RING_HASH", "least_request": "LEAST_REQUEST"}[lb]))
		t.Logf("%s: web's new cluster active %v after the entry was written", lb, time.Since(start).Round(time.Millisecond))
	}
	if n := env.envoy.Stat(t, "cluster.web.init_fetch_timeout"); n != 0 {
		t.Errorf("cluster.web.init_fetch_timeout %d: a changed cluster waited for its load assignment", n)
	}
	if n := env.envoy.Stat(t, "cluster_manager.cluster_modified"); n < 2 {
		t.Errorf("cluster_manager.cluster_modified %d, want the 2 changes", n)
	}
	env.finish(t)
}
