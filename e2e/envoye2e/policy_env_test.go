package envoye2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"github.com/hashicorp/consul/api"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/xds-server/xds-server/e2e/harness"
)

// polIDs are the backends of every policy test: two of version v1, two
// of v2 (their Service.Meta.version is the id's first two letters).
var polIDs = []string{"v1-a", "v1-b", "v2-a", "v2-b"}

// polBackend is an HTTP backend answering "hello from <id> (<path>)", or
// 503 while fail is set.
type polBackend struct {
	id   string
	addr string
	fail atomic.Bool
}

// polEnv is a real Consul holding the backends (under each service of
// the test) and its config entries, xds-server reading both, and an
// Envoy with the configured listeners.
type polEnv struct {
	consul   *harness.ConsulAgent
	srv      *harness.Server
	envoy    *harness.Envoy
	backends map[string]*polBackend
	addrs    map[string]string // listener name -> its address
}

// polStart registers the four backends under each service (each
// instance with a passing TTL check "ttl-<service>-<id>"), writes for
// each service the config entries that entries returns (after its
// service-defaults, protocol http, and its service-resolver with subsets
// v1 and v2), then starts xds-server with the config file and an Envoy,
// and waits for the listeners.
func polStart(t *testing.T, config string, services []string, entries func(svc string) []api.ConfigEntry, listeners ...string) *polEnv {
	t.Helper()
	skipShort(t)
	env := &polEnv{consul: harness.Consul(t), backends: map[string]*polBackend{}, addrs: map[string]string{}}
	for _, id := range polIDs {
		b := &polBackend{id: id}
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if b.fail.Load() {
				http.Error(w, "failing "+b.id, http.StatusServiceUnavailable)
				return
			}
			fmt.Fprintf(w, "hello from %s (%s)\n", b.id, r.URL.Path)
		}))
		t.Cleanup(s.Close)
		b.addr = s.Listener.Addr().String()
		env.backends[id] = b
		for _, svc := range services {
			polRegister(t, env.consul, svc, b)
		}
	}
	for _, svc := range services {
		polSet(t, env.consul, &api.ServiceConfigEntry{Kind: api.ServiceDefaults, Name: svc, Protocol: "http"})
		polSet(t, env.consul, &api.ServiceResolverConfigEntry{Kind: api.ServiceResolver, Name: svc,
			Subsets: map[string]api.ServiceResolverSubset{
				"v1": {Filter: `Service.Meta.version == "v1"`}, "v2": {Filter: `Service.Meta.version == "v2"`}}})
		for _, e := range entries(svc) {
			polSet(t, env.consul, e)
		}
	}
	env.srv = startServer(t, env.consul, "--config", swWriteConfig(t, config))
	env.envoy = harness.StartEnvoy(t, harness.EnvoyOptions{NodeID: "policy-envoy", XDSAddr: env.srv.XDSAddr})
	for _, l := range listeners {
		env.addrs[l] = env.envoy.AwaitListener(t, l, swWait)
	}
	return env
}

// polRegister registers b in Consul as svc-<id> of service svc, with its
// version as meta and a passing TTL check.
func polRegister(t *testing.T, consul *harness.ConsulAgent, svc string, b *polBackend) {
	t.Helper()
	host, port, _ := net.SplitHostPort(b.addr)
	p, _ := strconv.Atoi(port)
	if err := consul.Client().Agent().ServiceRegister(&api.AgentServiceRegistration{
		ID: svc + "-" + b.id, Name: svc, Address: host, Port: p, Meta: map[string]string{"version": b.id[:2]},
		Check: &api.AgentServiceCheck{CheckID: "ttl-" + svc + "-" + b.id, TTL: "10m", Status: api.HealthPassing},
	}); err != nil {
		t.Fatal(err)
	}
}

// polSet writes a config entry through Consul's API.
func polSet(t *testing.T, consul *harness.ConsulAgent, e api.ConfigEntry) {
	t.Helper()
	if ok, _, err := consul.Client().ConfigEntries().Set(e, nil); err != nil || !ok {
		t.Fatalf("writing %s %s: ok %v, %v", e.GetKind(), e.GetName(), ok, err)
	}
}

// polSplitter is a service-splitter of svc: weight of v1, the rest to
// v2 (a split of weight 0 is left out).
func polSplitter(svc string, v1 float32) *api.ServiceSplitterConfigEntry {
	var splits []api.ServiceSplit
	for _, s := range []api.ServiceSplit{{Weight: v1, ServiceSubset: "v1"}, {Weight: 100 - v1, ServiceSubset: "v2"}} {
		if s.Weight > 0 {
			splits = append(splits, s)
		}
	}
	return &api.ServiceSplitterConfigEntry{Kind: api.ServiceSplitter, Name: svc, Splits: splits}
}

// polSetTTL sets the TTL checks of svc's instances of ids to status.
func (env *polEnv) setTTL(t *testing.T, svc, status string, ids ...string) {
	t.Helper()
	for _, id := range ids {
		if err := env.consul.Client().Agent().UpdateTTL("ttl-"+svc+"-"+id, "e2e", status); err != nil {
			t.Fatal(err)
		}
	}
}

// routes is Envoy's route configuration name in brief, one line per
// route (see polRouteLine); nil when Envoy has none of that name.
func (env *polEnv) routes(name string) ([]string, error) {
	resp, err := http.Get(env.envoy.AdminURL("/config_dump?resource=dynamic_route_configs"))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var doc struct {
		Configs []struct {
			Route json.RawMessage `json:"route_config"`
		} `json:"configs"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		return nil, fmt.Errorf("envoy /config_dump: %w", err)
	}
	for _, c := range doc.Configs {
		var rc routev3.RouteConfiguration
		if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(c.Route, &rc); err != nil {
			return nil, fmt.Errorf("envoy /config_dump route: %w", err)
		}
		if rc.GetName() != name {
			continue
		}
		out := []string{}
		for _, vh := range rc.GetVirtualHosts() {
			for _, r := range vh.GetRoutes() {
				out = append(out, polRouteLine(r))
			}
		}
		return out, nil
	}
	return nil, nil
}

// polRouteLine is a route in brief: "prefix / [x-canary=1] -> web~v2",
// "prefix / -> web~v1:9000 web~v2:1000 retry 1 5xx other".
func polRouteLine(r *routev3.Route) string {
	var b strings.Builder
	m := r.GetMatch()
	switch {
	case m.GetPath() != "":
		fmt.Fprintf(&b, "path %s", m.GetPath())
	case m.GetSafeRegex() != nil:
		fmt.Fprintf(&b, "regex %s", m.GetSafeRegex().GetRegex())
	default:
		fmt.Fprintf(&b, "prefix %s", m.GetPrefix())
	}
	for _, h := range m.GetHeaders() {
		fmt.Fprintf(&b, " [%s=%s]", h.GetName(), h.GetStringMatch().GetExact())
	}
	a := r.GetRoute()
	b.WriteString(" ->")
	if a.GetCluster() != "" {
		b.WriteString(" " + a.GetCluster())
	}
	for _, c := range a.GetWeightedClusters().GetClusters() {
		fmt.Fprintf(&b, " %s:%d", c.GetName(), c.GetWeight().GetValue())
	}
	if rp := a.GetRetryPolicy(); rp != nil {
		fmt.Fprintf(&b, " retry %d %s", rp.GetNumRetries().GetValue(), rp.GetRetryOn())
		if rp.GetRetryPriority() != nil {
			b.WriteString(" other")
		}
	}
	return b.String()
}

// awaitRoutes waits until Envoy's route configuration name is want.
func (env *polEnv) awaitRoutes(t *testing.T, name string, want ...string) {
	t.Helper()
	env.envoy.Await(t, "routes of "+name+": "+strings.Join(want, "; "), swWait, func() (bool, string, error) {
		got, err := env.routes(name)
		return slices.Equal(got, want), fmt.Sprintf("routes %q", got), err
	})
}

// count sends n requests through listener to path with headers (name,
// value pairs), workers at a time, and returns what they got.
func (env *polEnv) count(t *testing.T, listener, path string, n, workers int, headers ...string) harness.LoadResult {
	t.Helper()
	h := http.Header{}
	for i := 0; i+1 < len(headers); i += 2 {
		h.Set(headers[i], headers[i+1])
	}
	l := harness.StartHTTPLoad(harness.HTTPLoadConfig{URL: "http://" + env.addrs[listener] + path, Workers: workers, Header: h})
	env.awaitLoad(t, l, n)
	return l.Stop()
}

// awaitLoad waits until l has counted at least n more requests than it
// had when called, and returns its snapshot then.
func (env *polEnv) awaitLoad(t *testing.T, l *harness.HTTPLoad, n int) harness.LoadResult {
	t.Helper()
	from := l.Snapshot().Total
	var r harness.LoadResult
	env.envoy.Await(t, fmt.Sprintf("%d requests", n), swWait, func() (bool, string, error) {
		r = l.Snapshot()
		return r.Total >= from+n, r.String(), nil
	})
	return r
}

// polVersions counts a load's answers by version (v1, v2).
func polVersions(r harness.LoadResult) map[string]int {
	out := map[string]int{}
	for id, n := range r.ByBackend {
		out[id[:2]] += n
	}
	return out
}

// polSince is what a load got between two of its snapshots.
func polSince(before, after harness.LoadResult) harness.LoadResult {
	d := harness.LoadResult{Total: after.Total - before.Total, ByStatus: map[int]int{}, ByBackend: map[string]int{},
		Errors: map[string]int{}, Samples: after.Samples}
	sub := func(out, a, b map[string]int) {
		for k, v := range a {
			if v != b[k] {
				out[k] = v - b[k]
			}
		}
	}
	for k, v := range after.ByStatus {
		if v != before.ByStatus[k] {
			d.ByStatus[k] = v - before.ByStatus[k]
		}
	}
	sub(d.ByBackend, after.ByBackend, before.ByBackend)
	sub(d.Errors, after.Errors, before.Errors)
	return d
}

// stats are Envoy's stats whose names start with prefix, in brief.
func (env *polEnv) stats(t *testing.T, prefix string) string {
	t.Helper()
	st, err := env.envoy.Stats()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, name := range slices.Sorted(maps.Keys(st)) {
		if strings.HasPrefix(name, prefix) {
			out = append(out, fmt.Sprintf("%s %d", name, st[name]))
		}
	}
	return strings.Join(out, ", ")
}

// finish checks that Envoy accepted everything it was sent.
func (env *polEnv) finish(t *testing.T) {
	t.Helper()
	env.envoy.AssertAccepted(t)
	if st, err := env.envoy.Stats(); err == nil {
		for _, name := range slices.Sorted(maps.Keys(st)) {
			if strings.HasSuffix(name, ".no_cluster") && st[name] != 0 {
				t.Errorf("Envoy answered %d requests for lack of a cluster (%s)", st[name], name)
			}
		}
	}
	if t.Failed() {
		t.Logf("xds-server log:\n%s", env.srv.Logs())
	}
}
