package xds

import (
	"slices"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/envoyproxy/go-control-plane/pkg/server/stream/v3"

	"github.com/xds-server/xds-server/envoy"
	"github.com/xds-server/xds-server/translate"
	"github.com/xds-server/xds-server/translate/translatetest"
	"github.com/xds-server/xds-server/xdscache"
)

func TestParseGlob(t *testing.T) {
	for glob, tc := range map[string]struct {
		match, miss []string
	}{
		"*":          {[]string{"", "edge-1", "a/b"}, nil},
		"edge-*":     {[]string{"edge-", "edge-1", "edge-eu/1"}, []string{"edge", "xedge-1"}},
		"edge-?":     {[]string{"edge-1"}, []string{"edge-12", "edge-"}},
		"edge-[0-2]": {[]string{"edge-0", "edge-2"}, []string{"edge-3"}},
		"edge-[!0]":  {[]string{"edge-1"}, []string{"edge-0"}},
		`a\*b`:       {[]string{"a*b"}, []string{"axb"}},
		"a.b":        {[]string{"a.b"}, []string{"axb"}},
	} {
		re, err := translate.ParseGlob(glob)
		if err != nil {
			t.Fatalf("ParseGlob(%q): %v", glob, err)
		}
		for _, s := range tc.match {
			if !re.MatchString(s) {
				t.Errorf("%q does not match %q", glob, s)
			}
		}
		for _, s := range tc.miss {
			if re.MatchString(s) {
				t.Errorf("%q matches %q", glob, s)
			}
		}
	}
	for _, bad := range []string{"[", "a[]", `a\`, "[z-a]"} {
		if _, err := translate.ParseGlob(bad); err == nil {
			t.Errorf("ParseGlob(%q): no error", bad)
		}
	}
}

// testListeners are translatetest.Listeners.
func testListeners() []translate.Listener { return translatetest.Listeners() }

// connectAs registers a node with a cluster and a user agent.
func connectAs(s *Server, stream int64, id, cluster, agent string) {
	cb := s.cb
	cb.request(stream, &core.Node{Id: id, Cluster: cluster, UserAgentName: agent})
}

// resourceNames lists the resource names of one type in a node's snapshot.
func resourceNames(t *testing.T, s *Server, node string, kind types.ResponseType) []string {
	t.Helper()
	snap, ok := s.rec.snapshotOf(node)
	if !ok {
		t.Fatalf("node %s has no snapshot", node)
	}
	var out []string
	for name := range snap.Resources[kind].Items {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// checkConsistent decodes a node's snapshot and checks it with
// go-control-plane's Consistent() (and ours, which also follows
// api_listeners to their routes).
func checkConsistent(t *testing.T, s *Server, node string) *cache.Snapshot {
	t.Helper()
	snap, _ := s.rec.snapshotOf(node)
	decoded := map[string][]types.Resource{}
	for _, kind := range xdscache.Kinds {
		url, _ := cache.GetResponseTypeURL(kind)
		for _, r := range snap.Resources[kind].Items {
			m, err := xdscache.Decode(r.Resource)
			if err != nil {
				t.Fatal(err)
			}
			decoded[url] = append(decoded[url], m)
		}
	}
	built, err := cache.NewSnapshot("v", decoded)
	if err != nil {
		t.Fatal(err)
	}
	if err := xdscache.Consistent(built); err != nil {
		t.Errorf("node %s: snapshot not consistent: %v", node, err)
	}
	if len(decoded[resource.ListenerType]) > 0 && isEnvoyID(node) {
		if err := built.Consistent(); err != nil {
			t.Errorf("node %s: Consistent(): %v", node, err)
		}
	}
	return built
}

func isEnvoyID(node string) bool {
	return node == "edge-envoy" || node == "mesh-envoy" || node == "other-envoy"
}

// TestListenersServed checks which nodes get which configured listeners:
// Envoy nodes matching a listener's globs (by id or cluster) get its
// Listener, RouteConfiguration and, for a rate limit, the RLS cluster;
// proxyless nodes get it as an api_listener; nodes matching nothing get
// what they got before; every snapshot is consistent.
func TestListenersServed(t *testing.T) {
	s := newTestServer(t, Config{Listeners: testListeners(), RateLimitAddress: "127.0.0.1:18081"})
	connectAs(s, 1, "edge-envoy", "edge", "envoy")
	connectAs(s, 2, "mesh-envoy", "mesh", "envoy")
	connectAs(s, 3, "other-envoy", "other", "envoy")
	connectAs(s, 4, "edge-grpc", "edge", "gRPC Go")
	connectAs(s, 5, "other-grpc", "other", "gRPC Go")
	s.Update(world(3, 2))
	s.rec.reconcile()
	services := []string{"svc-000", "svc-001", "svc-002"}
	for node, want := range map[string]struct {
		clusters, listeners, routes []string
	}{
		"edge-envoy":  {append(slices.Clone(services), envoy.RateLimitClusterName), []string{"ingress"}, []string{"ingress"}},
		"mesh-envoy":  {services, []string{"internal"}, []string{"internal"}},
		"other-envoy": {services, nil, nil},
		"edge-grpc":   {services, append([]string{"ingress"}, services...), append([]string{"ingress"}, services...)},
		"other-grpc":  {services, services, services},
	} {
		t.Run(node, func(t *testing.T) {
			for kind, w := range map[types.ResponseType][]string{types.Cluster: want.clusters, types.Listener: want.listeners, types.Route: want.routes} {
				w = slices.Sorted(slices.Values(w))
				if got := resourceNames(t, s, node, kind); !slices.Equal(got, w) {
					t.Errorf("type %d: %v, want %v", kind, got, w)
				}
			}
			built := checkConsistent(t, s, node)
			for _, r := range built.Resources[types.Listener].Items {
				l := r.Resource.(*listenerv3.Listener)
				if isEnvoyID(node) && (l.GetAddress() == nil || l.GetApiListener() != nil) {
					t.Errorf("Envoy got listener %s without an address or with an api_listener", l.GetName())
				}
				if !isEnvoyID(node) && l.GetApiListener() == nil {
					t.Errorf("proxyless node got listener %s without an api_listener", l.GetName())
				}
			}
			if node == "edge-envoy" {
				rls := built.Resources[types.Cluster].Items[envoy.RateLimitClusterName].Resource.(*clusterv3.Cluster)
				if rls.GetType() != clusterv3.Cluster_STATIC {
					t.Errorf("RLS cluster type %v", rls.GetType())
				}
			}
		})
	}
	a, _ := s.rec.snapshotOf("other-envoy")
	b, _ := s.rec.snapshotOf("edge-envoy")
	if a == b || xdscache.SameVersions(a, b) {
		t.Error("Envoy nodes with different listener sets share a snapshot")
	}
	// A node connecting after the pass, with a listener set no node had,
	// gets its snapshot at once; one with a known set shares it.
	connectAs(s, 6, "mesh-late", "mesh", "envoy")
	connectAs(s, 7, "edge-late", "edge", "envoy")
	if got := resourceNames(t, s, "mesh-late", types.Listener); !slices.Equal(got, []string{"internal"}) {
		t.Errorf("late mesh node listeners %v", got)
	}
	late, _ := s.rec.snapshotOf("edge-late")
	if !xdscache.SameVersions(late, b) {
		t.Error("late edge node does not get the edge snapshot")
	}
}

// TestListenerNameTakesServiceName: a discovered service named like a
// configured listener loses its api_listener and route to the listener's
// for proxyless nodes (validation keeps configured names apart; Consul
// may not).
func TestListenerNameTakesServiceName(t *testing.T) {
	lis := testListeners()[:1]
	lis[0].Name = "svc-000"
	s := newTestServer(t, Config{Listeners: lis, RateLimitAddress: "127.0.0.1:18081"})
	connectAs(s, 1, "edge-grpc", "", "gRPC Go")
	s.Update(world(2, 1))
	s.rec.reconcile()
	built := checkConsistent(t, s, "edge-grpc")
	if got := resourceNames(t, s, "edge-grpc", types.Listener); !slices.Equal(got, []string{"svc-000", "svc-001"}) {
		t.Errorf("listeners %v", got)
	}
	rc := built.Resources[types.Route].Items["svc-000"].Resource.(*routev3.RouteConfiguration)
	if got := len(rc.GetVirtualHosts()[0].GetRoutes()); got != 2 {
		t.Errorf("svc-000 route has %d routes, want the listener's 2", got)
	}
}

// TestNamedRequestsAnswered: a proxyless node that names only what it
// uses (as grpc-go does) is answered although its snapshot holds more;
// an Envoy node's named requests are held until they name everything (ADS).
func TestNamedRequestsAnswered(t *testing.T) {
	s := newTestServer(t, Config{})
	connectAs(s, 1, "grpc", "", "gRPC Go")
	s.Update(world(3, 1))
	s.rec.reconcile()
	out := make(chan cache.Response, 1)
	req := &discoverygrpc.DiscoveryRequest{Node: &core.Node{Id: "grpc", UserAgentName: "gRPC Go"},
		TypeUrl: resource.ClusterType, ResourceNames: []string{"svc-001"}}
	if _, err := s.cache.CreateWatch(req, stream.NewSotwSubscription(req.ResourceNames, false), out); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-out:
		if got := r.GetReturnedResources(); len(got) != 1 {
			t.Errorf("returned %v, want svc-001 only", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a named CDS request of a proxyless node was not answered")
	}
}
