package xdscache

import (
	"fmt"
	"time"

	"testing"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/envoyproxy/go-control-plane/pkg/server/stream/v3"
)

// skipProbe is one protocol's wildcard stream of one type: open opens its
// watch (acknowledging the last answer, if any) and answered reports an
// answer the watch got, if any.
type skipProbe struct {
	open     func(t *testing.T)
	answered func() bool
}

// received takes an answer waiting on out into last, if there is one.
func received[R any](out chan R, last *R) bool {
	select {
	case *last = <-out:
		return true
	default:
		return false
	}
}

func sotwProbe(c *Cache, id, typeURL string) *skipProbe {
	sub := stream.NewSotwSubscription(nil, true)
	out := make(chan cache.Response, 1)
	var last cache.Response
	return &skipProbe{
		open: func(t *testing.T) {
			req := sotwRequest(id, "grpc-go", typeURL)
			if last != nil {
				sub.SetReturnedResources(last.GetReturnedResources())
				req.VersionInfo, req.ResponseNonce = last.GetResponseVersion(), "n"
			}
			if _, err := c.CreateWatch(req, sub, out); err != nil {
				t.Fatal(err)
			}
		},
		answered: func() bool { return received(out, &last) },
	}
}

func deltaProbe(c *Cache, id, typeURL string) *skipProbe {
	sub := stream.NewDeltaSubscription(nil, nil, nil, true)
	out := make(chan cache.DeltaResponse, 1)
	var last cache.DeltaResponse
	return &skipProbe{
		open: func(t *testing.T) {
			req := &discoverygrpc.DeltaDiscoveryRequest{Node: &core.Node{Id: id}, TypeUrl: typeURL}
			if last != nil {
				sub.SetReturnedResources(last.GetNextVersionMap())
				req.ResponseNonce = "n"
			}
			if _, err := c.CreateDeltaWatch(req, &sub, out); err != nil {
				t.Fatal(err)
			}
		},
		answered: func() bool { return received(out, &last) },
	}
}

// TestCacheSkipsUnchangedTypes: once a watch has nothing to send, a
// snapshot that changes only another type does not look at it again (no
// UpToDate call), and the next snapshot that changes its type answers it.
func TestCacheSkipsUnchangedTypes(t *testing.T) {
	before, healthFlip, grown := testSnapshot(t, 3), testSnapshot(t, 3, 1), testSnapshot(t, 4)
	if before.GetVersion(resource.ClusterType) != healthFlip.GetVersion(resource.ClusterType) ||
		before.GetVersion(resource.EndpointType) == healthFlip.GetVersion(resource.EndpointType) ||
		healthFlip.GetVersion(resource.ClusterType) == grown.GetVersion(resource.ClusterType) {
		t.Fatal("test snapshots: a health flip must change only the load assignments, a new service the clusters")
	}
	for name, probe := range map[string]func(*Cache, string, string) *skipProbe{"sotw": sotwProbe, "delta": deltaProbe} {
		t.Run(name, func(t *testing.T) {
			c := New(false)
			upToDate := map[string]int{}
			c.UpToDate = func(_, typeURL string, _ *cache.Snapshot) { upToDate[typeURL]++ }
			if err := c.SetSnapshot("n", before); err != nil {
				t.Fatal(err)
			}
			cds, eds := probe(c, "n", resource.ClusterType), probe(c, "n", resource.EndpointType)
			for _, p := range []*skipProbe{cds, eds} {
				p.open(t)
				if !p.answered() {
					t.Fatal("a new stream got no answer")
				}
				p.open(t) // the ACK: nothing new
				if p.answered() {
					t.Fatal("an ACK was answered with nothing new")
				}
			}
			if upToDate[resource.ClusterType] != 1 {
				t.Fatalf("UpToDate of the clusters called %d times on their ACK, want 1", upToDate[resource.ClusterType])
			}
			if err := c.SetSnapshot("n", healthFlip); err != nil {
				t.Fatal(err)
			}
			if !eds.answered() {
				t.Fatal("the health flip was not sent")
			}
			if cds.answered() || upToDate[resource.ClusterType] != 1 {
				t.Fatalf("the unchanged clusters' watch was looked at again (answered or %d UpToDate calls, want 1)",
					upToDate[resource.ClusterType])
			}
			if err := c.SetSnapshot("n", grown); err != nil {
				t.Fatal(err)
			}
			if !cds.answered() {
				t.Error("a new cluster did not reach the skipped watch")
			}
		})
	}
}

// TestCacheFullChannelDoesNotBlock: an ADS stream's watches share one
// channel with room for one answer per known type; a client naming more
// type URLs than that gets its extra watches answered later, not a
// stream goroutine blocked for ever in CreateDeltaWatch under the node's
// lock (which would stall every snapshot set after it).
func TestCacheFullChannelDoesNotBlock(t *testing.T) {
	c := New(false)
	if err := c.SetSnapshot("n", testSnapshot(t, 1)); err != nil {
		t.Fatal(err)
	}
	out := make(chan cache.DeltaResponse, 2)
	opened := make(chan error, 1)
	go func() {
		for i := range 5 {
			req := &discoverygrpc.DeltaDiscoveryRequest{Node: &core.Node{Id: "n"}, TypeUrl: fmt.Sprintf("type.googleapis.com/made.Up%d", i)}
			sub := stream.NewDeltaSubscription(nil, nil, nil, true)
			if _, err := c.CreateDeltaWatch(req, &sub, out); err != nil {
				opened <- err
				return
			}
		}
		opened <- nil
	}()
	select {
	case err := <-opened:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("CreateDeltaWatch blocked on a full channel")
	}
	got := map[string]bool{}
	for len(got) < 5 {
		for len(out) > 0 {
			got[(<-out).GetDeltaRequest().GetTypeUrl()] = true
		}
		if len(got) < 5 {
			if err := c.SetSnapshot("n", testSnapshot(t, 1, 0)); err != nil { // answers what waited
				t.Fatal(err)
			}
			if len(out) == 0 {
				t.Fatalf("%d of 5 watches answered and a snapshot answered none", len(got))
			}
		}
	}
}
