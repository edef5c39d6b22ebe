package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/xds-server/xds-server/e2e/harness"
)

// What the traffic policy tests read of /debug/config and /debug/nodes:
// the routes, clusters and endpoints a node was sent, and whether it
// acked them.

// nodeConfig is /debug/config?node=N: what the node was last sent.
type nodeConfig struct {
	Resources map[string]struct {
		Version   string            `json:"version"`
		Versions  map[string]string `json:"versions"` // by resource name: its content's version
		Resources []json.RawMessage `json:"resources"`
	} `json:"resources"`
}

var debugTypeURLs = map[string]string{"cluster": resource.ClusterType, "endpoint": resource.EndpointType,
	"listener": resource.ListenerType, "route": resource.RouteType}

// route is the RouteConfiguration named name, or nil.
func (c nodeConfig) route(name string) *routev3.RouteConfiguration {
	for _, raw := range c.Resources["route"].Resources {
		var rc routev3.RouteConfiguration
		if protojson.Unmarshal(raw, &rc) == nil && rc.GetName() == name {
			return &rc
		}
	}
	return nil
}

// cluster is the Cluster named name, or nil.
func (c nodeConfig) cluster(name string) *clusterv3.Cluster {
	for _, raw := range c.Resources["cluster"].Resources {
		var cl clusterv3.Cluster
		if protojson.Unmarshal(raw, &cl) == nil && cl.GetName() == name {
			return &cl
		}
	}
	return nil
}

// clusters are the names of the clusters sent, sorted.
func (c nodeConfig) clusters() []string {
	var out []string
	for _, raw := range c.Resources["cluster"].Resources {
		var cl clusterv3.Cluster
		if protojson.Unmarshal(raw, &cl) == nil {
			out = append(out, cl.GetName())
		}
	}
	slices.Sort(out)
	return out
}

// endpointAddrs are the host:port of every endpoint of the load
// assignment name, sorted (nil if none was sent).
func (c nodeConfig) endpointAddrs(name string) []string {
	var out []string
	for _, raw := range c.Resources["endpoint"].Resources {
		var cla endpointv3.ClusterLoadAssignment
		if protojson.Unmarshal(raw, &cla) != nil || cla.GetClusterName() != name {
			continue
		}
		for _, a := range servingAddrs(&cla) {
			out = append(out, a.Addr)
		}
	}
	slices.Sort(out)
	return out
}

// addrsOf are the backends' host:port, sorted.
func addrsOf(bs ...[]*harness.Backend) []string {
	var out []string
	for _, b := range slices.Concat(bs...) {
		out = append(out, b.Addr())
	}
	slices.Sort(out)
	return out
}

// routes are the routes of the route configuration name (nil if none).
func (c nodeConfig) routes(name string) []*routev3.Route {
	rc := c.route(name)
	if rc == nil || len(rc.GetVirtualHosts()) != 1 {
		return nil
	}
	return rc.GetVirtualHosts()[0].GetRoutes()
}

// routeShares are a route's clusters with their share of its weight in
// [0, 1] (a single cluster: 1); clusters of weight 0 are left out.
func routeShares(r *routev3.Route) map[string]float64 {
	a := r.GetRoute()
	if c := a.GetCluster(); c != "" {
		return map[string]float64{c: 1}
	}
	out, total := map[string]float64{}, 0.0
	for _, w := range a.GetWeightedClusters().GetClusters() {
		if v := float64(w.GetWeight().GetValue()); v > 0 {
			out[w.GetName()], total = v, total+v
		}
	}
	for k := range out {
		out[k] /= total
	}
	return out
}

// catchAll are the shares of the last route of name ("" when none).
func (c nodeConfig) catchAll(name string) map[string]float64 {
	rs := c.routes(name)
	if len(rs) == 0 {
		return nil
	}
	return routeShares(rs[len(rs)-1])
}

// sameShares reports whether got and want have the same clusters with
// shares within 1e-4.
func sameShares(got, want map[string]float64) bool {
	if len(got) != len(want) {
		return false
	}
	for k, w := range want {
		if g, ok := got[k]; !ok || g-w > 1e-4 || w-g > 1e-4 {
			return false
		}
	}
	return true
}

// awaitSent polls /debug/config and /debug/nodes (another process:
// nothing to await) until what the node was sent satisfies cond and the
// node has acked it: per type, the version sent, or an earlier version
// holding the same resources of service that grpc-go needs (the server
// sends a SotW node nothing new when only resources it does not subscribe
// to changed, so its acked version stays behind). A NACK fails the test.
func (e *policyEnv) awaitSent(t *testing.T, what string, cond func(nodeConfig) bool) nodeConfig {
	t.Helper()
	var cfg nodeConfig
	var acked map[string]string
	seen := map[string]map[string]string{} // type/version -> resource versions by name
	ackedPolls := 0
	u := e.srv.AdminURL("/debug/config?node=" + url.QueryEscape(e.node))
	start := time.Now()
	for deadline := start.Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		cfg = nodeConfig{}
		if !tryGetJSON(u, &cfg) {
			continue
		}
		for typ, tc := range cfg.Resources {
			seen[typ+"/"+tc.Version] = tc.Versions
		}
		if !cond(cfg) {
			continue
		}
		var nack *debugNACK
		acked, nack = e.ackedVersions(t)
		if nack != nil && cfg.Resources[typeShort(nack.TypeURL)].Version == nack.Version {
			t.Fatalf("node %s NACKed %s version %s (%s): %s", e.node, nack.TypeURL, nack.Version, what, nack.Error)
		}
		if !cfg.acked(acked, seen) {
			ackedPolls = 0
			continue
		}
		// grpc-go ACKs a response before its channel applies it (the
		// balancer's update runs after): the config counts as taken when
		// it is still acked at the next poll, so that RPCs made next see it.
		if ackedPolls++; ackedPolls == 2 {
			t.Logf("%s: sent and acked within %v", what, time.Since(start).Round(time.Millisecond))
			return cfg
		}
	}
	t.Fatalf("node %s was not sent or did not ack %s within 20s; acked %v; last config: %s",
		e.node, what, acked, describeConfig(cfg))
	return cfg
}

// awaitSnapshot polls /debug/config (another process: nothing to await)
// until the node's snapshot satisfies cond, acked or not.
func (e *policyEnv) awaitSnapshot(t *testing.T, what string, cond func(nodeConfig) bool) {
	t.Helper()
	u := e.srv.AdminURL("/debug/config?node=" + url.QueryEscape(e.node))
	start := time.Now()
	var cfg nodeConfig
	for deadline := start.Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		cfg = nodeConfig{}
		if tryGetJSON(u, &cfg) && cond(cfg) {
			t.Logf("%s: in the node's snapshot within %v", what, time.Since(start).Round(time.Millisecond))
			return
		}
	}
	t.Fatalf("node %s's snapshot lacks %s after 20s: %s", e.node, what, describeConfig(cfg))
}

// acked reports whether, for every type, the node acked the version sent
// or one (in seen) with the same versions of the resources it needs.
func (c nodeConfig) acked(acked map[string]string, seen map[string]map[string]string) bool {
	needed := c.needed()
	for typ, tc := range c.Resources {
		u, ok := debugTypeURLs[typ]
		if !ok || tc.Version == "" || acked[u] == tc.Version {
			continue
		}
		old, ok := seen[typ+"/"+acked[u]]
		if !ok {
			return false
		}
		for _, name := range needed[typ] {
			if old[name] != tc.Versions[name] {
				return false
			}
		}
	}
	return true
}

// needed are, by type, the resources grpc-go subscribes to for xds:///web:
// listener and route web, and the clusters and load assignments the
// route sends to.
func (c nodeConfig) needed() map[string][]string {
	var clusters []string
	for _, r := range c.routes("web") {
		clusters = append(clusters, slices.Collect(maps.Keys(routeShares(r)))...)
	}
	return map[string][]string{"listener": {"web"}, "route": {"web"}, "cluster": clusters, "endpoint": clusters}
}

func typeShort(typeURL string) string {
	for k, v := range debugTypeURLs {
		if v == typeURL {
			return k
		}
	}
	return typeURL
}

type debugNACK struct {
	TypeURL string `json:"type_url"`
	Version string `json:"rejected_version"`
	Error   string `json:"error"`
}

// ackedVersions are the node's acked versions by type URL and its last NACK.
func (e *policyEnv) ackedVersions(t *testing.T) (map[string]string, *debugNACK) {
	var nodes struct {
		Nodes []struct {
			ID       string            `json:"id"`
			Acked    map[string]string `json:"acked_versions"`
			LastNACK *debugNACK        `json:"last_nack"`
		} `json:"nodes"`
	}
	if !tryGetJSON(e.srv.AdminURL("/debug/nodes"), &nodes) {
		return nil, nil
	}
	for _, n := range nodes.Nodes {
		if n.ID == e.node {
			return n.Acked, n.LastNACK
		}
	}
	return nil, nil
}

// describeConfig is the clusters and route shares of cfg, for failures.
func describeConfig(cfg nodeConfig) string {
	out := fmt.Sprintf("clusters %v", cfg.clusters())
	for _, raw := range cfg.Resources["route"].Resources {
		var rc routev3.RouteConfiguration
		if protojson.Unmarshal(raw, &rc) != nil {
			continue
		}
		for _, vh := range rc.GetVirtualHosts() {
			for i, r := range vh.GetRoutes() {
				out += fmt.Sprintf("; route %s[%d] %v -> %v", rc.GetName(), i, r.GetMatch(), routeShares(r))
			}
		}
	}
	return out
}
