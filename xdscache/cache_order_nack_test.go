package xdscache

import (
	"testing"

	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/envoyproxy/go-control-plane/pkg/server/stream/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
)

// TestCacheRejectedClustersDoNotHoldListeners: an Envoy node that rejects
// its clusters still gets its listeners once its load assignments are in
// place: a rejected cluster must not hold back every listener (make before
// break waits for clusters the node takes, not for those it refuses).
func TestCacheRejectedClustersDoNotHoldListeners(t *testing.T) {
	c := New(false)
	out := make(chan cache.Response, 8) // one channel for every type, as ADS multiplexes them
	subs := map[string]*stream.Subscription{}
	for _, typeURL := range []string{resource.ListenerType, resource.EndpointType, resource.ClusterType} {
		req := sotwRequest("edge", "envoy", typeURL)
		if typeURL == resource.EndpointType {
			req.ResourceNames = []string{"svc-000", "svc-001"}
		}
		sub := stream.NewSotwSubscription(req.ResourceNames, true)
		subs[typeURL] = &sub
		if _, err := c.CreateWatch(req, sub, out); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.SetSnapshot("edge", testSnapshot(t, 2)); err != nil {
		t.Fatal(err)
	}
	reply := func(r cache.Response, nack bool) {
		typeURL := r.GetRequest().GetTypeUrl()
		subs[typeURL].SetReturnedResources(r.GetReturnedResources())
		req := sotwRequest("edge", "envoy", typeURL)
		req.ResourceNames, req.VersionInfo, req.ResponseNonce = r.GetRequest().GetResourceNames(), r.GetResponseVersion(), "n"
		if nack {
			req.VersionInfo, req.ErrorDetail = "", &statuspb.Status{Code: 3, Message: "rejected"}
		}
		if _, err := c.CreateWatch(req, *subs[typeURL], out); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]int{}
	for range 6 { // at most: clusters, endpoints, clusters again (the NACK's answer), listeners
		select {
		case r := <-out:
			typeURL := r.GetRequest().GetTypeUrl()
			got[TypeName(typeURL)]++
			if typeURL == resource.ListenerType {
				return
			}
			reply(r, typeURL == resource.ClusterType)
		default:
			t.Fatalf("listeners held while the node rejects its clusters (answers so far: %v)", got)
		}
	}
	t.Fatalf("no listener answer (answers: %v)", got)
}
