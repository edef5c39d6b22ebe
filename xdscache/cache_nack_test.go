package xdscache

import (
	"testing"
	"time"

	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/envoyproxy/go-control-plane/pkg/server/stream/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
)

// TestCacheSotWNACKNotResent: a node that NACKs a SotW response of the
// clusters or listeners the snapshot still holds is not sent them again
// (Envoy 1.40 rejected a cluster 630 times a second when it was); once the
// snapshot changes, the node is sent the new state.
func TestCacheSotWNACKNotResent(t *testing.T) {
	for _, typeURL := range []string{resource.ClusterType, resource.ListenerType} {
		t.Run(TypeName(typeURL), func(t *testing.T) {
			c := New(false)
			before, after := testSnapshot(t, 3), testSnapshot(t, 4) // a service more: every type changes
			if err := c.SetSnapshot("edge", before); err != nil {
				t.Fatal(err)
			}
			sub := stream.NewSotwSubscription(nil, true)
			out := make(chan cache.Response, 1)
			if _, err := c.CreateWatch(sotwRequest("edge", "envoy", typeURL), sub, out); err != nil {
				t.Fatal(err)
			}
			first := <-out
			sub.SetReturnedResources(first.GetReturnedResources())
			cancel := func() {}
			for i := range 3 { // NACK after NACK: each is answered by nothing
				cancel() // the server replaces a type's watch with the next request's
				nack := sotwRequest("edge", "envoy", typeURL)
				nack.ResponseNonce = "1"
				nack.ErrorDetail = &statuspb.Status{Code: 3, Message: "rejected"}
				var err error
				if cancel, err = c.CreateWatch(nack, sub, out); err != nil {
					t.Fatal(err)
				}
				select {
				case r := <-out:
					t.Fatalf("NACK %d of what the snapshot holds answered with %v", i+1, r.GetReturnedResources())
				default:
				}
			}
			if err := c.SetSnapshot("edge", after); err != nil {
				t.Fatal(err)
			}
			var r cache.Response
			select {
			case r = <-out:
			case <-time.After(10 * time.Second):
				t.Fatal("not answered after the snapshot changed")
			}
			if r.GetResponseVersion() != after.GetVersion(typeURL) {
				t.Errorf("after the change: version %q, want %q", r.GetResponseVersion(), after.GetVersion(typeURL))
			}
		})
	}
}
