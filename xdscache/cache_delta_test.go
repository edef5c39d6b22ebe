package xdscache

import (
	"maps"
	"slices"
	"testing"
	"unsafe"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/envoyproxy/go-control-plane/pkg/server/stream/v3"
	"google.golang.org/protobuf/types/known/anypb"
)

// deltaStream is one delta stream of node "d" for load assignments, as
// go-control-plane's server keeps it: it records each response's map.
type deltaStream struct {
	t     *testing.T
	c     *Cache
	sub   stream.Subscription
	nonce int
}

// request opens a watch for a request (un)subscribing names, after
// go-control-plane updated the subscription, and returns its answer (nil:
// none yet).
func (s *deltaStream) request(subscribe, unsubscribe []string) (*discoverygrpc.DeltaDiscoveryResponse, error) {
	s.t.Helper()
	req := &discoverygrpc.DeltaDiscoveryRequest{Node: &core.Node{Id: "d"}, TypeUrl: resource.EndpointType,
		ResourceNamesSubscribe: subscribe, ResourceNamesUnsubscribe: unsubscribe}
	if s.nonce > 0 {
		req.ResponseNonce = "n"
		s.sub.UpdateResourceSubscriptions(subscribe, unsubscribe)
	} else {
		s.sub = stream.NewDeltaSubscription(subscribe, unsubscribe, nil, true)
	}
	out := make(chan cache.DeltaResponse, 1)
	if _, err := s.c.CreateDeltaWatch(req, s.sub, out); err != nil {
		return nil, err
	}
	return s.receive(out), nil
}

func (s *deltaStream) receive(out chan cache.DeltaResponse) *discoverygrpc.DeltaDiscoveryResponse {
	s.t.Helper()
	select {
	case r := <-out:
		s.nonce++
		s.sub.SetReturnedResources(r.GetNextVersionMap())
		resp, err := r.GetDeltaDiscoveryResponse()
		if err != nil {
			s.t.Fatal(err)
		}
		return resp
	default:
		return nil
	}
}

func names(resp *discoverygrpc.DeltaDiscoveryResponse) []string {
	var out []string
	for _, r := range resp.GetResources() {
		out = append(out, r.GetName())
	}
	return out
}

// TestCacheDeltaWildcardHoldsNoCopy: a wildcard delta stream is reported
// to hold one entry standing for the type's version map, not a copy of it,
// and is still sent exactly what changed and what left.
func TestCacheDeltaWildcardHoldsNoCopy(t *testing.T) {
	c := New(false)
	before := testSnapshot(t, 3)
	if err := c.SetSnapshot("d", before); err != nil {
		t.Fatal(err)
	}
	s := &deltaStream{t: t, c: c}
	first, err := s.request(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	all := slices.Sorted(maps.Keys(before.VersionMap[resource.EndpointType]))
	if got := names(first); !slices.Equal(got, all) {
		t.Fatalf("first answer %v, want %v", got, all)
	}
	if got := s.sub.ReturnedResources(); len(got) != 1 || got[versionKey] == "" {
		t.Fatalf("the stream holds %d entries (%v), want versionKey alone", len(got), slices.Collect(maps.Keys(got)))
	}
	if resp, err := s.request(nil, nil); err != nil || resp != nil {
		t.Fatalf("ACK answered with %v (%v), want nothing", names(resp), err)
	}
	// svc-001 goes down (its load assignment changes), svc-002 leaves.
	after := testSnapshot(t, 2, 1)
	out := make(chan cache.DeltaResponse, 1)
	if _, err := c.CreateDeltaWatch(&discoverygrpc.DeltaDiscoveryRequest{Node: &core.Node{Id: "d"}, TypeUrl: resource.EndpointType,
		ResponseNonce: "n"}, s.sub, out); err != nil {
		t.Fatal(err)
	}
	if err := c.SetSnapshot("d", after); err != nil {
		t.Fatal(err)
	}
	resp := s.receive(out)
	if got, want := names(resp), []string{all[1]}; !slices.Equal(got, want) {
		t.Errorf("sent %v, want %v", got, want)
	}
	if got, want := resp.GetRemovedResources(), []string{all[2]}; !slices.Equal(got, want) {
		t.Errorf("removed %v, want %v", got, want)
	}
	if got := s.sub.ReturnedResources(); len(got) != 1 {
		t.Errorf("the stream holds %d entries, want 1", len(got))
	}
}

// TestCacheDeltaWildcardUnsubscribe: go-control-plane marks a name a
// wildcard stream unsubscribes, having subscribed to it too, to be sent
// again, and forgets one it only had through the wildcard (sent again as
// well): the stream's one-entry map gets the same answers a full copy did.
func TestCacheDeltaWildcardUnsubscribe(t *testing.T) {
	c := New(false)
	snap := testSnapshot(t, 3)
	if err := c.SetSnapshot("d", snap); err != nil {
		t.Fatal(err)
	}
	all := slices.Sorted(maps.Keys(snap.VersionMap[resource.EndpointType]))
	s := &deltaStream{t: t, c: c}
	if _, err := s.request([]string{"*", all[0]}, nil); err != nil {
		t.Fatal(err)
	}
	resp, err := s.request(nil, []string{all[0], all[2], "unknown"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := names(resp), []string{all[0], all[2]}; !slices.Equal(got, want) {
		t.Errorf("sent %v, want %v", got, want)
	}
	if len(resp.GetRemovedResources()) != 0 {
		t.Errorf("removed %v, want none", resp.GetRemovedResources())
	}
	if resp, err := s.request(nil, nil); err != nil || resp != nil {
		t.Errorf("ACK answered with %v (%v), want nothing", names(resp), err)
	}
}

// TestCacheDeltaUnknownTag: a stream holding a tag the node does not know
// (more streams of the node than it keeps maps for) is refused: it ends,
// and its client resumes on a new stream.
func TestCacheDeltaUnknownTag(t *testing.T) {
	c := New(false)
	if err := c.SetSnapshot("d", testSnapshot(t, 1)); err != nil {
		t.Fatal(err)
	}
	sub := stream.NewDeltaSubscription(nil, nil, nil, true)
	sub.SetReturnedResources(map[string]string{versionKey: "v@7"})
	req := &discoverygrpc.DeltaDiscoveryRequest{Node: &core.Node{Id: "d"}, TypeUrl: resource.EndpointType, ResponseNonce: "n"}
	if _, err := c.CreateDeltaWatch(req, sub, make(chan cache.DeltaResponse, 1)); err == nil {
		t.Fatal("a stream holding an unknown tag was answered")
	}
}

// TestCacheResponsesShareResources: the nodes of a group sent the same
// resources get one shared slice of them (the codec encodes it once).
func TestCacheResponsesShareResources(t *testing.T) {
	c := New(false)
	snap := testSnapshot(t, 3)
	for _, id := range []string{"a", "b"} {
		if err := c.SetSnapshot(id, snap); err != nil {
			t.Fatal(err)
		}
	}
	var delta []*discoverygrpc.Resource
	var sotw []*anypb.Any
	for _, id := range []string{"a", "b"} {
		dout := make(chan cache.DeltaResponse, 1)
		dreq := &discoverygrpc.DeltaDiscoveryRequest{Node: &core.Node{Id: id}, TypeUrl: resource.EndpointType}
		if _, err := c.CreateDeltaWatch(dreq, stream.NewDeltaSubscription(nil, nil, nil, true), dout); err != nil {
			t.Fatal(err)
		}
		d, err := (<-dout).GetDeltaDiscoveryResponse()
		if err != nil {
			t.Fatal(err)
		}
		sout := make(chan cache.Response, 1)
		if _, err := c.CreateWatch(sotwRequest(id, "grpc-go", resource.EndpointType), stream.NewSotwSubscription(nil, true), sout); err != nil {
			t.Fatal(err)
		}
		s, err := (<-sout).GetDiscoveryResponse()
		if err != nil {
			t.Fatal(err)
		}
		if len(d.GetResources()) != 3 || len(s.GetResources()) != 3 {
			t.Fatalf("%s: %d delta and %d SotW resources, want 3", id, len(d.GetResources()), len(s.GetResources()))
		}
		if delta != nil && (unsafe.SliceData(delta) != unsafe.SliceData(d.Resources) || unsafe.SliceData(sotw) != unsafe.SliceData(s.Resources)) {
			t.Error("two nodes sent the same resources got slices of their own")
		}
		delta, sotw = d.Resources, s.Resources
	}
}
