package xds

import (
	"testing"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/envoyproxy/go-control-plane/pkg/server/stream/v3"
)

// TestCacheDeltaRoutesAfterClusters: a delta Envoy node that has
// everything of one snapshot is given the next, which adds a cluster and
// a listener: the cluster goes at once, the listener only once the node
// ACKed the cluster and got and ACKed its load assignment (cache_order.go).
func TestCacheDeltaRoutesAfterClusters(t *testing.T) {
	c := newNodeCache(false)
	node := &core.Node{Id: "edge", UserAgentName: "envoy"}
	out := make(chan cache.DeltaResponse, 8)
	subs := map[string]*stream.Subscription{}
	cancels := map[string]func(){} // a new request of a type replaces its watch, as the stream server does
	open := func(typeURL string, subscribe ...string) {
		t.Helper()
		req := &discoverygrpc.DeltaDiscoveryRequest{Node: node, TypeUrl: typeURL, ResourceNamesSubscribe: subscribe}
		if subs[typeURL] != nil && len(subscribe) == 0 {
			req.ResponseNonce = "n" // an ACK
		}
		if subs[typeURL] == nil {
			s := stream.NewDeltaSubscription(subscribe, nil, nil, len(subscribe) == 0)
			subs[typeURL] = &s
		} else if len(subscribe) > 0 {
			names := subscribe
			for n := range subs[typeURL].SubscribedResources() {
				names = append(names, n)
			}
			subs[typeURL].SetResourceSubscription(names)
		}
		if cancel := cancels[typeURL]; cancel != nil {
			cancel()
		}
		cancel, err := c.CreateDeltaWatch(req, *subs[typeURL], out)
		if err != nil {
			t.Fatal(err)
		}
		cancels[typeURL] = cancel
	}
	take := func(want string) { // receive the next answer, of type want, and record what the stream has
		t.Helper()
		select {
		case r := <-out:
			got := r.GetDeltaRequest().GetTypeUrl()
			if got != want {
				t.Fatalf("answer of %s, want %s", typeName(got), typeName(want))
			}
			subs[got].SetReturnedResources(r.GetNextVersionMap())
		default:
			t.Fatalf("no answer, want one of %s", typeName(want))
		}
	}
	none := func(when string) {
		t.Helper()
		if len(out) > 0 {
			t.Fatalf("%s: %s answered; want the listener held", when, typeName((<-out).GetDeltaRequest().GetTypeUrl()))
		}
	}
	if err := c.setSnapshot(Node{ID: "edge"}, testSnapshot(t, 1)); err != nil {
		t.Fatal(err)
	}
	for _, typeURL := range []string{resource.ClusterType, resource.EndpointType, resource.ListenerType} {
		names := map[string][]string{resource.EndpointType: {"svc-000"}}[typeURL]
		open(typeURL, names...)
		take(typeURL)
		open(typeURL) // the ACK
	}
	none("after the first snapshot")
	if err := c.setSnapshot(Node{ID: "edge"}, testSnapshot(t, 2)); err != nil { // svc-001 added
		t.Fatal(err)
	}
	take(resource.ClusterType)
	none("cluster sent")
	open(resource.ClusterType) // ACK
	none("cluster ACKed, its load assignment not asked for")
	open(resource.EndpointType, "svc-001")
	take(resource.EndpointType)
	none("load assignment sent")
	open(resource.EndpointType) // ACK
	take(resource.ListenerType)
}
