package xds

import (
	"testing"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
)

// envoyLikeNode is a node as Envoy sends it: with the extensions it was
// built with (a few hundred in Envoy 1.40, each with its type URLs).
func envoyLikeNode(id string) *core.Node {
	n := &core.Node{Id: id, Cluster: "edge", UserAgentName: "envoy", UserAgentVersionType: &core.Node_UserAgentVersion{UserAgentVersion: "1.40.0"}}
	for range 300 {
		n.Extensions = append(n.Extensions, &core.Extension{Name: "envoy.filters.http.router", Category: "envoy.filters.http",
			TypeUrls: []string{"envoy.extensions.filters.http.router.v3.Router"}})
	}
	return n
}

// TestRequestsForgetNodeExtensions: the extension list of a node's
// requests (SotW and delta) is dropped once the node is registered, since
// go-control-plane keeps each type's last request (BenchmarkEnvoyFleet:
// about 700 KiB of server heap per real Envoy before); the node itself is
// registered as usual.
func TestRequestsForgetNodeExtensions(t *testing.T) {
	s, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	sotw := &discoverygrpc.DiscoveryRequest{Node: envoyLikeNode("sotw-envoy"), TypeUrl: resource.ClusterType}
	if err := s.cb.OnStreamRequest(1, sotw); err != nil {
		t.Fatal(err)
	}
	delta := &discoverygrpc.DeltaDiscoveryRequest{Node: envoyLikeNode("delta-envoy"), TypeUrl: resource.ClusterType}
	if err := s.cb.OnStreamDeltaRequest(2, delta); err != nil {
		t.Fatal(err)
	}
	if n := len(sotw.GetNode().GetExtensions()) + len(delta.GetNode().GetExtensions()); n != 0 {
		t.Errorf("%d extensions kept in the requests, want 0", n)
	}
	seen := map[string]string{}
	for _, n := range s.Nodes() {
		seen[n.ID] = n.UserAgent
	}
	for _, id := range []string{"sotw-envoy", "delta-envoy"} {
		if seen[id] != "envoy 1.40.0" {
			t.Errorf("node %s registered with user agent %q, want %q (all nodes: %v)", id, seen[id], "envoy 1.40.0", seen)
		}
	}
}
