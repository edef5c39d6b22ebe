package xds_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/xds-server/xds-server/discovery"
	"github.com/xds-server/xds-server/e2e/harness"
	"github.com/xds-server/xds-server/envoy"
	"github.com/xds-server/xds-server/nodeindex"
	"github.com/xds-server/xds-server/subsetting"
	"github.com/xds-server/xds-server/translate"
	"github.com/xds-server/xds-server/xds"
)

// haWorld is a catalog with what could leak replica-local order into
// resources: several localities, metadata maps, a draining endpoint, and
// services and endpoints listed in an order that shuffle (if not nil)
// scrambles, as two replicas' discovery could list them differently.
// extra adds endpoint svc-0-extra and removes svc-1-7: a later catalog.
func haWorld(shuffle *rand.Rand, extra bool) discovery.Snapshot {
	s := testWorld(4, 8)
	zones := []string{"z-b", "z-a", "z-c"}
	for i := range s.Services {
		for j := range s.Services[i].Endpoints {
			ep := &s.Services[i].Endpoints[j]
			ep.Locality = discovery.Locality{Region: "r", Zone: zones[j%len(zones)]}
			ep.Meta = map[string]string{"version": fmt.Sprint(j % 2), "az": zones[j%len(zones)], "team": "t", "b": "x", "a": "y"}
			ep.Weight = uint32(1 + j%3)
		}
	}
	s.Services[1].Endpoints[2].Health = discovery.HealthDraining
	s.Services[1].Endpoints[2].Drain = "admin"
	s.Services[2].Endpoints[5].Health = discovery.HealthUnhealthy
	if extra {
		s.Services[0].Endpoints = append(s.Services[0].Endpoints, discovery.Endpoint{
			ID: "svc-0-extra", Address: "127.0.0.2", Port: 9999, Health: discovery.HealthHealthy,
			Locality: discovery.Locality{Region: "r", Zone: "z-a"}, Meta: map[string]string{"k": "v"},
		})
		s.Services[1].Endpoints = s.Services[1].Endpoints[:7]
	}
	if shuffle != nil {
		shuffle.Shuffle(len(s.Services), func(i, j int) { s.Services[i], s.Services[j] = s.Services[j], s.Services[i] })
		for i := range s.Services {
			eps := s.Services[i].Endpoints
			shuffle.Shuffle(len(eps), func(a, b int) { eps[a], eps[b] = eps[b], eps[a] })
		}
	}
	return s
}

// haSettings: steady subsets of svc-0, classic of svc-1, ring_hash with
// whole membership for svc-2, defaults for svc-3.
func haSettings(name string) translate.ServiceSettings {
	switch name {
	case "svc-0":
		return translate.ServiceSettings{SubsetSize: 3}
	case "svc-1":
		return translate.ServiceSettings{SubsetSize: 3, Subsetting: subsetting.Classic}
	case "svc-2":
		return translate.ServiceSettings{LBPolicy: envoy.RingHash}
	}
	return translate.ServiceSettings{}
}

func haListeners() []translate.Listener {
	return []translate.Listener{
		{Nodes: []string{"edge-*"}, HTTPListener: envoy.HTTPListener{
			Name: "ingress", Address: "0.0.0.0:10000",
			Routes: []envoy.Route{
				{Prefix: "/api", Service: "svc-1", Timeout: 5 * time.Second},
				{Prefix: "/", Service: "svc-0"},
			},
			RateLimit: &envoy.RateLimit{Domain: "edge", Actions: [][]envoy.RateLimitAction{{{RemoteAddress: true}}}},
		}},
		{Nodes: []string{"mesh"}, HTTPListener: envoy.HTTPListener{
			Name: "internal", Address: "0.0.0.0:10001",
			Routes: []envoy.Route{{Prefix: "/", Service: "svc-2"}},
		}},
	}
}

// replica starts an xDS server as one replica of a control plane whose
// client indices and endpoint slots live in Consul KV under prefix.
func replica(t *testing.T, consul *harness.ConsulAgent, name, prefix string) *fixture {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	table, err := nodeindex.NewConsul(context.Background(), nodeindex.ConsulConfig{
		Client: consul.Client(), Prefix: prefix, TTL: 10 * time.Minute, Replica: name, Logger: log,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = table.Close() })
	return startWith(t, xds.Config{
		Logger: log, Settings: haSettings, Listeners: haListeners(), RateLimitAddress: "127.0.0.1:18081",
		Subsetting: xds.SubsetConfig{IndexSource: xds.IndexConsul, Table: table},
	})
}

// haNode is a node as the replicas see it.
type haNode struct {
	id, cluster, agent string
	meta               map[string]any
}

func (n haNode) config(delta bool) harness.ADSConfig {
	cfg := harness.ADSConfig{NodeID: n.id, Cluster: n.cluster, Agent: n.agent, Delta: delta}
	if n.meta != nil {
		md, err := structpb.NewStruct(n.meta)
		if err != nil {
			panic(err)
		}
		cfg.Metadata = md
	}
	return cfg
}

// haNodes: Envoy and proxyless nodes, with and without configured
// listeners, in several index groups, some with metadata.
func haNodes() []haNode {
	return []haNode{
		{id: "edge-1", cluster: "edge", agent: "envoy"},
		{id: "edge-2", cluster: "edge", agent: "grpc-go/1.85.0", meta: map[string]any{"z": "1", "a": []any{"x", 2.0}}},
		{id: "mesh-1", cluster: "mesh", agent: "envoy", meta: map[string]any{"team": "t", "tier": "gold"}},
		{id: "mesh-2", cluster: "mesh", agent: "grpc-go/1.85.0"},
		{id: "app-1", cluster: "app", agent: "envoy"},
		{id: "app-2", cluster: "app", agent: "grpc-go/1.85.0"},
		{id: "app-3", cluster: "app", agent: "grpc-go/1.85.0"},
	}
}

// served is what a node was sent of each type: version and, per
// resource, its serialized bytes and (delta) version.
type served map[string]harness.ADSUpdate

func fetchAll(t *testing.T, f *fixture, cfg harness.ADSConfig) served {
	t.Helper()
	c := f.client(t, cfg)
	out := served(firstOfEach(t, c, allTypes))
	if err := c.Close(); err != nil && !isCanceled(err) {
		t.Errorf("%s: stream: %v", cfg.NodeID, err)
	}
	return out
}

func isCanceled(err error) bool {
	return err != nil && (err == context.Canceled || bytes.Contains([]byte(err.Error()), []byte("Canceled")))
}

// diff describes how b differs from a ("" if in nothing).
func (a served) diff(b served) string {
	var out bytes.Buffer
	for _, url := range allTypes {
		ua, ub := a[url], b[url]
		if ua.Version != ub.Version {
			fmt.Fprintf(&out, "%s: version %q vs %q; ", typeShort(url), ua.Version, ub.Version)
		}
		na, nb := slices.Sorted(maps.Keys(ua.Resources)), slices.Sorted(maps.Keys(ub.Resources))
		if !slices.Equal(na, nb) {
			fmt.Fprintf(&out, "%s: names %v vs %v; ", typeShort(url), na, nb)
			continue
		}
		for _, n := range na {
			if !bytes.Equal(ua.Resources[n].GetValue(), ub.Resources[n].GetValue()) || ua.Resources[n].GetTypeUrl() != ub.Resources[n].GetTypeUrl() {
				fmt.Fprintf(&out, "%s %s: bytes differ; ", typeShort(url), n)
			}
			if ua.Versions[n] != ub.Versions[n] {
				fmt.Fprintf(&out, "%s %s: version %q vs %q; ", typeShort(url), n, ua.Versions[n], ub.Versions[n])
			}
		}
	}
	return out.String()
}

func typeShort(url string) string { return url[bytes.LastIndexByte([]byte(url), '.')+1:] }

// TestReplicasServeIdenticalResources runs two xDS servers sharing client
// indices and endpoint slots through a real Consul, as two replicas
// would: replica a sees the catalog's history (an earlier catalog, nodes
// connected meanwhile), replica b only its last state, listed in another
// order. Every node, Envoy or proxyless, with or without subsets and
// listeners, gets byte-identical resources with identical versions (type
// versions, and delta resource versions) from both, over SotW and delta.
func TestReplicasServeIdenticalResources(t *testing.T) {
	consul := harness.Consul(t)
	a := replica(t, consul, "a", "xds-server/subsetting")
	a.srv.Update(haWorld(nil, false))
	a.srv.Reconcile()
	// Nodes that come and go on a alone take indices (kept for the TTL)
	// and make a's plans and slots carry history.
	early := haNodes()[4]
	early.id = "early"
	fetchAll(t, a, early.config(false))
	a.srv.Update(haWorld(nil, true))
	a.srv.Reconcile()

	b := replica(t, consul, "b", "xds-server/subsetting")
	b.srv.Update(haWorld(rand.New(rand.NewPCG(1, 2)), true))
	b.srv.Reconcile()
	// The same global weights table (as every replica serves the leader's).
	for _, f := range []*fixture{a, b} {
		f.srv.SetWeights(map[string]map[string]uint32{"svc-3": {"svc-3-0": 70, "svc-3-4": 5}, "svc-0": {"svc-0-extra": 9}})
		f.srv.Reconcile()
	}

	nodes := haNodes()
	for i, n := range nodes {
		// a registers them in order, b in reverse, over both protocols.
		m := nodes[len(nodes)-1-i]
		for _, delta := range []bool{false, true} {
			fetchAll(t, a, n.config(delta))
			fetchAll(t, b, m.config(delta))
		}
	}
	for _, n := range nodes {
		for _, delta := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/delta=%v", n.id, delta), func(t *testing.T) {
				fromA, fromB := fetchAll(t, a, n.config(delta)), fetchAll(t, b, n.config(delta))
				if d := fromA.diff(fromB); d != "" {
					t.Errorf("replicas differ: %s", d)
				}
				// The node got something worth comparing: every service, a subset of svc-0.
				if got := len(fromA[resource.ClusterType].Resources); got < 4 {
					t.Errorf("only %d clusters served", got)
				}
				if w := endpointWeight(t, fromA[resource.EndpointType].Resources["svc-3"], 10300); w != 70 {
					t.Errorf("svc-3-0 has weight %d, want the table's 70", w)
				}
				if got := lbEndpoints(t, fromA[resource.EndpointType].Resources["svc-0"]); got == 0 || got >= 9 {
					t.Errorf("svc-0: %d endpoints served, want a subset of 3 (plus replacements)", got)
				}
			})
		}
	}
}

// endpointWeight is the weight of the endpoint on port in a serialized
// ClusterLoadAssignment (0 if absent).
func endpointWeight(t *testing.T, a *anypb.Any, port uint32) uint32 {
	t.Helper()
	var cla endpointv3.ClusterLoadAssignment
	if err := a.UnmarshalTo(&cla); err != nil {
		t.Fatal(err)
	}
	for _, l := range cla.GetEndpoints() {
		for _, e := range l.GetLbEndpoints() {
			if e.GetEndpoint().GetAddress().GetSocketAddress().GetPortValue() == port {
				return e.GetLoadBalancingWeight().GetValue()
			}
		}
	}
	return 0
}

// lbEndpoints counts the endpoints of a serialized ClusterLoadAssignment.
func lbEndpoints(t *testing.T, a *anypb.Any) int {
	t.Helper()
	var cla endpointv3.ClusterLoadAssignment
	if a == nil {
		return 0
	}
	if err := a.UnmarshalTo(&cla); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, l := range cla.GetEndpoints() {
		n += len(l.GetLbEndpoints())
	}
	return n
}

// resumeFrom is what a node that got s tells the next server it has.
func resumeFrom(s served) map[string]harness.Resume {
	out := make(map[string]harness.Resume, len(s))
	for url, u := range s {
		out[url] = harness.Resume{Version: u.Version, Versions: u.Versions}
	}
	return out
}

// quietAfterResume opens cfg's stream to f, waits until f has registered
// the node, and reports the responses that arrive within window: a
// response to a request goes out at once, so window bounds the wait.
func quietAfterResume(t *testing.T, f *fixture, cfg harness.ADSConfig, window time.Duration) []harness.ADSUpdate {
	t.Helper()
	_, got := resumeOn(t, f, cfg, window)
	return got
}

// resumeOn is quietAfterResume that also returns the client.
func resumeOn(t *testing.T, f *fixture, cfg harness.ADSConfig, window time.Duration) (*harness.ADSClient, []harness.ADSUpdate) {
	t.Helper()
	c := f.client(t, cfg)
	eventually(t, func() bool {
		for _, n := range f.srv.Nodes() {
			if n.ID == cfg.NodeID && n.Streams > 0 {
				return true
			}
		}
		return false
	})
	var got []harness.ADSUpdate
	timeout := time.After(window)
	for {
		select {
		case u := <-c.Updates():
			got = append(got, u)
		case <-timeout:
			return c, got
		}
	}
}

// TestReplicaResumeSendsNothing: a node that got its config from replica
// a and reconnects to replica b with its last versions (SotW version_info,
// delta initial_resource_versions) gets no response from b; one that
// resumes with versions b does not have gets its config at once. (A delta
// type the node has none of still gets go-control-plane's empty first
// answer, which a new Envoy needs to finish initializing.)
func TestReplicaResumeSendsNothing(t *testing.T) {
	consul := harness.Consul(t)
	a := replica(t, consul, "a", "xds-server/subsetting")
	b := replica(t, consul, "b", "xds-server/subsetting")
	for _, f := range []*fixture{a, b} {
		f.srv.Update(haWorld(nil, true))
		f.srv.Reconcile()
	}
	const window = 500 * time.Millisecond
	for _, n := range haNodes() {
		for _, delta := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/delta=%v", n.id, delta), func(t *testing.T) {
				cfg := n.config(delta)
				cfg.Resume = resumeFrom(fetchAll(t, a, cfg))
				for _, u := range quietAfterResume(t, b, cfg, window) {
					// A delta type the node has nothing of cannot be told
					// from a new subscription: it gets its (empty) answer.
					if delta && len(cfg.Resume[u.TypeURL].Versions) == 0 && len(u.Resources) == 0 && len(u.Removed) == 0 {
						continue
					}
					t.Errorf("replica b answered a resumed node: %s version %q, %d resources, %d removed", typeShort(u.TypeURL), u.Version, len(u.Resources), len(u.Removed))
				}
			})
		}
	}
	t.Run("named SotW requests", func(t *testing.T) {
		// Envoy (ADS) names every resource it has: nothing to send. A
		// proxyless node names what it uses now, which may be more than it
		// had under that version: it gets its answer.
		for _, agent := range []string{"envoy", "grpc-go/1.85.0"} {
			cfg := harness.ADSConfig{NodeID: "named-" + agent[:4], Cluster: "app", Agent: agent}
			got := fetchAll(t, a, cfg)
			cfg.Resume = map[string]harness.Resume{}
			for url, u := range got {
				cfg.Resume[url] = harness.Resume{Version: u.Version, Names: slices.Sorted(maps.Keys(u.Resources))}
			}
			// Envoy names nothing for a type it has none of (a wildcard).
			n := len(quietAfterResume(t, b, cfg, window))
			if want := map[string]int{"envoy": 0, "grpc-go/1.85.0": len(allTypes)}[agent]; n != want {
				t.Errorf("%s: %d responses to a resume with names, want %d", agent, n, want)
			}
		}
	})
	t.Run("a resumed node gets later changes", func(t *testing.T) {
		for _, delta := range []bool{false, true} {
			b.srv.Update(haWorld(nil, true)) // as a has it again
			b.srv.Reconcile()
			cfg := haNodes()[3].config(delta)
			cfg.NodeID = fmt.Sprint("later-", delta)
			cfg.Resume = resumeFrom(fetchAll(t, a, cfg))
			c, _ := resumeOn(t, b, cfg, 0)
			world := haWorld(nil, true)
			world.Services = append(world.Services, discovery.Service{Name: fmt.Sprint("svc-new-", delta), Endpoints: []discovery.Endpoint{{
				ID: "n", Address: "127.0.0.3", Port: 1, Health: discovery.HealthHealthy, Meta: map[string]string{}}}})
			b.srv.Update(world)
			b.srv.Reconcile()
			if u := next(t, c, resource.ClusterType); u.Resources[fmt.Sprint("svc-new-", delta)] == nil {
				t.Errorf("delta=%v: the cluster update lacks the new service: %v", delta, names(u))
			}
		}
	})
	t.Run("stale versions are answered", func(t *testing.T) {
		for _, delta := range []bool{false, true} {
			cfg := haNodes()[0].config(delta)
			cfg.NodeID = fmt.Sprint("stale-", delta)
			cfg.Resume = map[string]harness.Resume{}
			for _, url := range allTypes {
				cfg.Resume[url] = harness.Resume{Version: "stale", Versions: map[string]string{"svc-0": "stale"}}
			}
			if got := quietAfterResume(t, b, cfg, window); len(got) < len(allTypes) {
				t.Errorf("delta=%v: a node resuming from stale versions got %d responses within %v, want one per type", delta, len(got), window)
			}
		}
	})
}
