package envoye2e

import (
	"math"
	"slices"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/hashicorp/consul/api"

	"github.com/xds-server/xds-server/e2e/harness"
)

// polConfig routes everything the listener ingress gets to web.
const polConfig = `
listeners:
  - name: ingress
    address: 127.0.0.1:0
    routes:
      - { prefix: /, service: web }
`

// TestEnvoyPolicyCanary: web's backends v1 x2 and v2 x2
// (Service.Meta.version) in a real Consul whose service-resolver defines
// subsets v1 and v2 and whose service-splitter sends 90/10; a real Envoy
// behind a listener route {prefix: /, service: web}. Envoy's route is
// weighted_clusters of web~v1 and web~v2, and of 2,000 requests v2 serves
// 10% +-3 points. The splitter rewritten to 50/50, then 0/100, while a
// load runs: Envoy follows each, and not one request fails.
func TestEnvoyPolicyCanary(t *testing.T) {
	env := polStart(t, polConfig, []string{"web"}, func(svc string) []api.ConfigEntry {
		return []api.ConfigEntry{polSplitter(svc, 90)}
	}, "ingress")
	env.awaitRoutes(t, "ingress", "prefix / -> web~v1:9000 web~v2:1000")
	r := env.count(t, "ingress", "/canary", 2000, 4)
	v := polVersions(r)
	share := 100 * float64(v["v2"]) / float64(r.Total)
	t.Logf("90/10: v2 served %.1f%% of %s", share, r)
	if r.Failed() != 0 || math.Abs(share-10) > 3 {
		t.Errorf("90/10: v2 served %.1f%%, want 10 +-3, and no failure: %s", share, r)
	}

	l := harness.StartHTTPLoad(harness.HTTPLoadConfig{URL: "http://" + env.addrs["ingress"] + "/shift", Workers: 4})
	defer l.Stop()
	env.awaitLoad(t, l, 200)
	for _, step := range []struct {
		v1    float32
		route string
	}{
		{50, "prefix / -> web~v1:5000 web~v2:5000"},
		{0, "prefix / -> web~v2"},
	} {
		polSet(t, env.consul, polSplitter("web", step.v1))
		env.awaitRoutes(t, "ingress", step.route)
		before := env.awaitLoad(t, l, 50) // what Envoy routed before the change has been answered
		seg := polSince(before, env.awaitLoad(t, l, 600))
		v := polVersions(seg)
		t.Logf("%v/%v: %s", step.v1, 100-step.v1, seg)
		if step.v1 == 0 && v["v1"] != 0 {
			t.Errorf("0/100: v1 still served %d requests: %s", v["v1"], seg)
		}
		if step.v1 == 50 && (v["v1"] < seg.Total/4 || v["v2"] < seg.Total/4) {
			t.Errorf("50/50: %v; want each version to serve about half", v)
		}
	}
	total := l.Stop()
	t.Logf("load across the shifts: %s", total)
	if total.Failed() != 0 {
		t.Errorf("across the shifts 90/10 -> 50/50 -> 0/100: %d requests failed: %s", total.Failed(), total)
	}
	env.finish(t)
}

// TestEnvoyPolicyRouter: web's service-router in a real Consul, through
// Envoy's listener route {prefix: /, service: web}: a request with header
// x-canary: 1 reaches v2 only (200 of 200; without it, v1 too); with
// v1-a answering 503, a path-prefix route to v1 that retries (NumRetries
// 3, RetryOn 5xx) fails no request, retried on v1-b, while the same
// route without retries fails some (proving the backend does fail).
func TestEnvoyPolicyRouter(t *testing.T) {
	env := polStart(t, polConfig, []string{"web"}, func(svc string) []api.ConfigEntry {
		v1 := api.ServiceRouteDestination{ServiceSubset: "v1"}
		retrying := v1
		retrying.NumRetries, retrying.RetryOn = 3, []string{"5xx"}
		return []api.ConfigEntry{&api.ServiceRouterConfigEntry{Kind: api.ServiceRouter, Name: svc, Routes: []api.ServiceRoute{
			{Match: &api.ServiceRouteMatch{HTTP: &api.ServiceRouteHTTPMatch{
				Header: []api.ServiceRouteHTTPMatchHeader{{Name: "x-canary", Exact: "1"}}}},
				Destination: &api.ServiceRouteDestination{ServiceSubset: "v2"}},
			{Match: &api.ServiceRouteMatch{HTTP: &api.ServiceRouteHTTPMatch{PathPrefix: "/retry"}}, Destination: &retrying},
			{Match: &api.ServiceRouteMatch{HTTP: &api.ServiceRouteHTTPMatch{PathPrefix: "/plain"}}, Destination: &v1},
		}}}
	}, "ingress")
	env.awaitRoutes(t, "ingress", "prefix / [x-canary=1] -> web~v2", "prefix /retry -> web~v1 retry 3 5xx",
		"prefix /plain -> web~v1", "prefix / -> web")
	canary := env.count(t, "ingress", "/", 200, 4, "x-canary", "1")
	if v := polVersions(canary); canary.Total < 200 || v["v2"] != canary.Total {
		t.Errorf("x-canary: 1: %s; want every request served by v2", canary)
	}
	if plain := env.count(t, "ingress", "/", 200, 4); polVersions(plain)["v1"] == 0 || plain.Failed() != 0 {
		t.Errorf("without x-canary: %s; want v1 too (the catch-all to every instance), no failure", plain)
	}

	env.backends["v1-a"].fail.Store(true)
	bare := env.count(t, "ingress", "/plain", 200, 1)
	t.Logf("/plain (no retries), v1-a failing: %s", bare)
	if share := float64(bare.Failed()) / float64(bare.Total); share < 0.2 {
		t.Errorf("/plain without retries: %s; want > 20%% failed (v1-a answers 503)", bare)
	}
	retried := env.count(t, "ingress", "/retry", 200, 1)
	t.Logf("/retry (3 retries on 5xx), v1-a failing: %s; Envoy: %s", retried, env.stats(t, "cluster.web~v1.upstream_rq_retry"))
	if retried.Failed() != 0 || retried.ByBackend["v1-b"] != retried.Total {
		t.Errorf("/retry: %s; want every request served by v1-b (retried), none failed", retried)
	}
	env.finish(t)
}

// polOtherSplitConfig: web retries on the other side of its split, webn
// (the same backends, the same config entries) does not; the listener
// routes /n/ to webn, the rest to web. Both have room for retries:
// Envoy's default circuit breaker allows 3 retries in flight per cluster
// (a retry holds one through its back-off), which a load of 4 workers
// against v2 failing overflows (upstream_rq_retry_overflow: the request
// fails); the retries of a split route are the aggregate's, which has
// its first child's service's circuit breakers.
const polOtherSplitConfig = `
services:
  web: { retry_other_split: true, circuit_breakers: { max_retries: 1000 } }
  webn: { circuit_breakers: { max_retries: 1000 } }
listeners:
  - name: ingress
    address: 127.0.0.1:0
    routes:
      - { prefix: /n/, service: webn }
      - { prefix: /, service: web }
`

// TestEnvoyRetryOtherSplit: a 50/50 split of web between v1 and v2, every
// v2 backend answering 503, and a service-router catch-all route to the
// splitter that retries once on 5xx. With retry_other_split every target
// is an aggregate cluster (web~v2+web~v1: v2, then v1) and the retry
// leaves the priority tried (previous_priorities): all of 400 requests
// succeed, the failed half retried on v1. Without it (webn), the retry
// stays on v2 and about half fail.
func TestEnvoyRetryOtherSplit(t *testing.T) {
	env := polStart(t, polOtherSplitConfig, []string{"web", "webn"}, func(svc string) []api.ConfigEntry {
		return []api.ConfigEntry{polSplitter(svc, 50), &api.ServiceRouterConfigEntry{Kind: api.ServiceRouter, Name: svc,
			Routes: []api.ServiceRoute{{Destination: &api.ServiceRouteDestination{NumRetries: 1, RetryOn: []string{"5xx"}}}}}}
	}, "ingress")
	env.awaitRoutes(t, "ingress",
		"prefix /n/ -> webn~v1:5000 webn~v2:5000 retry 1 5xx", "prefix /n/ -> webn~v1:5000 webn~v2:5000",
		"prefix / -> web~v1+web~v2:5000 web~v2+web~v1:5000 retry 1 5xx other", "prefix / -> web~v1:5000 web~v2:5000")
	for _, id := range []string{"v2-a", "v2-b"} {
		env.backends[id].fail.Store(true)
	}
	other := env.count(t, "ingress", "/", 400, 4)
	t.Logf("retry_other_split: %s; Envoy: %s", other, env.stats(t, "cluster.web~v2+web~v1.upstream_rq_retry"))
	if other.Failed() != 0 || polVersions(other)["v1"] != other.Total {
		t.Errorf("retry_other_split: %s; want every request served by v1 (v2's retried there), none failed", other)
	}
	if n := env.envoy.Stat(t, "cluster.web~v2+web~v1.upstream_rq_retry_success"); n == 0 {
		t.Errorf("retry_other_split: Envoy counted no successful retry on web~v2+web~v1")
	}
	same := env.count(t, "ingress", "/n/", 400, 4)
	t.Logf("without: %s; Envoy: %s", same, env.stats(t, "cluster.webn~v2.upstream_rq_retry"))
	if share := float64(same.Failed()) / float64(same.Total); share < 0.2 {
		t.Errorf("without retry_other_split: %s; want > 20%% failed (retried on v2)", same)
	}
	env.finish(t)
}

// polHealthConfig: webk keeps a split's share on a target without a
// serving endpoint (Consul's behaviour), web (the default) sends it to
// the other targets; the listener routes /k/ to webk, the rest to web.
const polHealthConfig = `
services:
  webk: { unhealthy_split: keep }
listeners:
  - name: ingress
    address: 127.0.0.1:0
    routes:
      - { prefix: /k/, service: webk }
      - { prefix: /, service: web }
`

// TestEnvoySubsetHealth: a 90/10 split of web while load runs; every v2
// instance turns critical in Consul, and then (dead in fact) answers 503.
// Envoy's route sends v2's share to v1 and no request fails, through the
// change included. With unhealthy_split: keep (webk, the same backends
// and entries), the share stays on the dead v2 and requests fail.
func TestEnvoySubsetHealth(t *testing.T) {
	env := polStart(t, polHealthConfig, []string{"web", "webk"}, func(svc string) []api.ConfigEntry {
		return []api.ConfigEntry{polSplitter(svc, 90)}
	}, "ingress")
	env.awaitRoutes(t, "ingress", "prefix /k/ -> webk~v1:9000 webk~v2:1000", "prefix / -> web~v1:9000 web~v2:1000")
	l := harness.StartHTTPLoad(harness.HTTPLoadConfig{URL: "http://" + env.addrs["ingress"] + "/", Workers: 2})
	defer l.Stop()
	lk := harness.StartHTTPLoad(harness.HTTPLoadConfig{URL: "http://" + env.addrs["ingress"] + "/k/", Workers: 2})
	defer lk.Stop()
	env.awaitLoad(t, l, 200)

	for _, svc := range []string{"web", "webk"} {
		env.setTTL(t, svc, api.HealthCritical, "v2-a", "v2-b")
	}
	env.awaitRoutes(t, "ingress", "prefix /k/ -> webk~v1:9000 webk~v2:1000", "prefix / -> web~v1")
	env.envoy.AwaitHosts(t, "webk~v2", swWait, func(h []harness.EnvoyHost) bool {
		return !slices.ContainsFunc(h, func(h harness.EnvoyHost) bool { return h.Health == corev3.HealthStatus_HEALTHY })
	})
	before, beforeK := env.awaitLoad(t, l, 50), lk.Snapshot()
	for _, id := range []string{"v2-a", "v2-b"} {
		env.backends[id].fail.Store(true)
	}
	seg := polSince(before, env.awaitLoad(t, l, 1000))
	segK := polSince(beforeK, lk.Snapshot())
	total := l.Stop()
	t.Logf("v2 critical, then failing: redistribute: %s (whole run: %s); keep: %s", seg, total, segK)
	if total.Failed() != 0 || polVersions(seg)["v2"] != 0 {
		t.Errorf("redistribute: %d of %d requests failed over the whole run, v2 served %d after its share moved: %s",
			total.Failed(), total.Total, polVersions(seg)["v2"], seg)
	}
	if segK.Failed() < segK.Total/20 {
		t.Errorf("unhealthy_split keep: %s; want v2's share (about 10%%) to fail", segK)
	}
	env.finish(t)
}
