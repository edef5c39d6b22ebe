package xdscache

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
	c := New(false)
	s := &orderStream{t: t, c: c, node: &core.Node{Id: "edge", UserAgentName: "envoy"},
		out: make(chan cache.DeltaResponse, 8), subs: map[string]*stream.Subscription{}, cancels: map[string]func(){}}
	if err := c.SetSnapshot("edge", testSnapshot(t, 1)); err != nil {
		t.Fatal(err)
	}
	for _, typeURL := range []string{resource.ClusterType, resource.EndpointType, resource.ListenerType} {
		names := map[string][]string{resource.EndpointType: {"svc-000"}}[typeURL]
		s.request(typeURL, names...)
		s.take(typeURL)
		s.request(typeURL) // the ACK
	}
	s.none("after the first snapshot")
	if err := c.SetSnapshot("edge", testSnapshot(t, 2)); err != nil { // svc-001 added
		t.Fatal(err)
	}
	s.take(resource.ClusterType)
	s.none("cluster sent")
	s.request(resource.ClusterType) // ACK
	s.none("cluster ACKed, its load assignment not asked for")
	s.request(resource.EndpointType, "svc-001")
	s.take(resource.EndpointType)
	s.none("load assignment sent")
	s.request(resource.EndpointType) // ACK
	s.take(resource.ListenerType)
}

// orderStream plays a delta ADS stream of an Envoy node against the cache
// as go-control-plane's stream server does: a request of a type replaces
// its watch, and a response sent sets what the stream has.
type orderStream struct {
	t       *testing.T
	c       *Cache
	node    *core.Node
	out     chan cache.DeltaResponse
	subs    map[string]*stream.Subscription
	cancels map[string]func()
}

// request sends a request of typeURL subscribing to names; without names
// (and after a first request) it is an ACK.
func (s *orderStream) request(typeURL string, subscribe ...string) {
	s.t.Helper()
	req := &discoverygrpc.DeltaDiscoveryRequest{Node: s.node, TypeUrl: typeURL, ResourceNamesSubscribe: subscribe}
	sub := s.subs[typeURL]
	switch {
	case sub == nil:
		ns := stream.NewDeltaSubscription(subscribe, nil, nil, len(subscribe) == 0)
		sub = &ns
		s.subs[typeURL] = sub
	case len(subscribe) == 0:
		req.ResponseNonce = "n"
	default:
		names := subscribe
		for n := range sub.SubscribedResources() {
			names = append(names, n)
		}
		sub.SetResourceSubscription(names)
	}
	if cancel := s.cancels[typeURL]; cancel != nil {
		cancel()
	}
	cancel, err := s.c.CreateDeltaWatch(req, *sub, s.out)
	if err != nil {
		s.t.Fatal(err)
	}
	s.cancels[typeURL] = cancel
}

// take receives the next answer, which must be of type want.
func (s *orderStream) take(want string) {
	s.t.Helper()
	select {
	case r := <-s.out:
		got := r.GetDeltaRequest().GetTypeUrl()
		if got != want {
			s.t.Fatalf("answer of %s, want %s", TypeName(got), TypeName(want))
		}
		s.subs[got].SetReturnedResources(r.GetNextVersionMap())
	default:
		s.t.Fatalf("no answer, want one of %s", TypeName(want))
	}
}

// none fails if an answer is waiting.
func (s *orderStream) none(when string) {
	s.t.Helper()
	if len(s.out) > 0 {
		s.t.Fatalf("%s: %s answered; want the listener held", when, TypeName((<-s.out).GetDeltaRequest().GetTypeUrl()))
	}
}
