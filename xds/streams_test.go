package xds

import (
	"testing"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
)

// TestSotwAndDeltaStreamIDsApart: go-control-plane numbers sotw and delta
// streams from 1 each; a sotw stream 1 and a delta stream 1 are two nodes,
// and closing one leaves the other connected.
func TestSotwAndDeltaStreamIDsApart(t *testing.T) {
	s := newTestServer(t, Config{})
	if err := s.cb.OnStreamRequest(1, &discoverygrpc.DiscoveryRequest{Node: &core.Node{Id: "sotw-node", Cluster: "c"}}); err != nil {
		t.Fatal(err)
	}
	if err := s.cb.OnStreamDeltaRequest(1, &discoverygrpc.DeltaDiscoveryRequest{Node: &core.Node{Id: "delta-node", Cluster: "c"}}); err != nil {
		t.Fatal(err)
	}
	if got := s.reg.connected(); got != 2 {
		t.Fatalf("%d nodes connected, want 2", got)
	}
	s.cb.OnDeltaStreamClosed(1, nil)
	if got := s.reg.nodeOf(1); got != "sotw-node" {
		t.Errorf("sotw stream 1 belongs to %q after delta stream 1 closed, want sotw-node", got)
	}
}
