package xdscache

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/envoyproxy/go-control-plane/pkg/server/stream/v3"

	"github.com/xds-server/xds-server/discovery"
	"github.com/xds-server/xds-server/translate"
)

// testSnapshot is the proxyless snapshot of services svc-000.. with one
// endpoint each; down marks services whose endpoint is unhealthy.
func testSnapshot(t testing.TB, services int, down ...int) *cache.Snapshot {
	t.Helper()
	w := world(services, 1)
	for _, i := range down {
		w.Services[i].Endpoints[0].Health = discovery.HealthUnhealthy
	}
	return snapshotOf(t, w)
}

// snapshotOf is the proxyless snapshot of w.
func snapshotOf(t testing.TB, w discovery.Snapshot) *cache.Snapshot {
	t.Helper()
	var items []ServiceItems
	for _, svc := range w.Services {
		it, err := encode(translate.Service(svc, translate.ServiceSettings{}, nil))
		if err != nil {
			t.Fatal(err)
		}
		items = append(items, it)
	}
	snap, err := (*listenerSet)(nil).base(keyProxyless, items)
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

func sotwRequest(id, agent, typeURL string, names ...string) *discoverygrpc.DiscoveryRequest {
	return &discoverygrpc.DiscoveryRequest{Node: &core.Node{Id: id, UserAgentName: agent}, TypeUrl: typeURL, ResourceNames: names}
}

// TestCacheADSOrder: an Envoy node's answers go out in type order, and
// its listeners and routes only once its stream has the clusters and
// their load assignments (it ACKed both): a route never reaches Envoy
// before the cluster it names is warm (cache_order.go).
func TestCacheADSOrder(t *testing.T) {
	c := New(false)
	out := make(chan cache.Response, 8) // one channel for every type, as ADS multiplexes them
	subs := map[string]*stream.Subscription{}
	for _, typeURL := range []string{resource.RouteType, resource.ListenerType, resource.EndpointType, resource.ClusterType} {
		req := sotwRequest("edge", "envoy", typeURL)
		if typeURL == resource.EndpointType || typeURL == resource.RouteType {
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
	var got []string
	ack := func() {
		r := <-out
		typeURL := r.GetRequest().GetTypeUrl()
		got = append(got, TypeName(typeURL))
		subs[typeURL].SetReturnedResources(r.GetReturnedResources())
		req := sotwRequest("edge", "envoy", typeURL)
		req.ResourceNames, req.VersionInfo, req.ResponseNonce = r.GetRequest().GetResourceNames(), r.GetResponseVersion(), "n"
		if _, err := c.CreateWatch(req, *subs[typeURL], out); err != nil {
			t.Fatal(err)
		}
	}
	held := func() {
		if len(out) != 2 {
			t.Fatalf("%d answers out, want clusters and load assignments alone", len(out))
		}
	}
	held()
	ack()
	ack()
	ack()
	ack()
	if want := []string{"cluster", "endpoint", "listener", "route"}; !slices.Equal(got, want) {
		t.Errorf("answered in order %v, want %v", got, want)
	}
}

// TestCacheSotWPartialAndShared: a change of one service sends its load
// assignment alone, reports every resource the stream then has, and
// responses to different nodes carry the same encoded resources (one
// Any per resource for the fleet, none per node).
func TestCacheSotWPartialAndShared(t *testing.T) {
	c := New(false)
	before, after := testSnapshot(t, 3), testSnapshot(t, 3, 1)
	var got []*discoverygrpc.DiscoveryResponse
	for _, id := range []string{"a", "b"} {
		if err := c.SetSnapshot(id, before); err != nil {
			t.Fatal(err)
		}
		sub := stream.NewSotwSubscription(nil, true)
		out := make(chan cache.Response, 1)
		if _, err := c.CreateWatch(sotwRequest(id, "grpc-go", resource.EndpointType), sub, out); err != nil {
			t.Fatal(err)
		}
		first := <-out
		if got := first.GetReturnedResources(); len(got) != 1 || !strings.HasPrefix(got[versionKey], before.GetVersion(resource.EndpointType)+"@") {
			t.Fatalf("first answer returned %v, want every resource at version %s", got, before.GetVersion(resource.EndpointType))
		}
		sub.SetReturnedResources(first.GetReturnedResources())
		ack := sotwRequest(id, "grpc-go", resource.EndpointType)
		ack.VersionInfo, ack.ResponseNonce = first.GetResponseVersion(), "1"
		if _, err := c.CreateWatch(ack, sub, out); err != nil {
			t.Fatal(err)
		}
		select {
		case r := <-out:
			t.Fatalf("answered an ACK with nothing new: %v", r.GetReturnedResources())
		default:
		}
		if err := c.SetSnapshot(id, after); err != nil {
			t.Fatal(err)
		}
		r := <-out
		resp, err := r.GetDiscoveryResponse()
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.GetResources()) != 1 {
			t.Fatalf("the change of one service sent %d load assignments, want 1", len(resp.GetResources()))
		}
		if name, _ := anyName(resp.GetResources()[0]); name != "svc-001" {
			t.Errorf("sent %s, want svc-001", name)
		}
		if got := r.GetReturnedResources(); len(got) != 1 || !strings.HasPrefix(got[versionKey], after.GetVersion(resource.EndpointType)+"@") {
			t.Errorf("returned %v, want all three at their current hashes (version %s)", got, after.GetVersion(resource.EndpointType))
		}
		got = append(got, resp)
	}
	if got[0].GetResources()[0] != got[1].GetResources()[0] {
		t.Error("two nodes' responses carry different copies of one resource")
	}
	if got[0] == got[1] {
		t.Error("two nodes share one response message (its nonce is set per stream)")
	}
}

// TestCacheDeltaUsesPrecomputedHashes: a delta resource's version is the
// snapshot's precomputed hash, and its message is the shared one.
func TestCacheDeltaUsesPrecomputedHashes(t *testing.T) {
	c := New(false)
	snap := testSnapshot(t, 2)
	if err := c.SetSnapshot("d", snap); err != nil {
		t.Fatal(err)
	}
	req := &discoverygrpc.DeltaDiscoveryRequest{Node: &core.Node{Id: "d"}, TypeUrl: resource.EndpointType}
	out := make(chan cache.DeltaResponse, 1)
	if _, err := c.CreateDeltaWatch(req, stream.NewDeltaSubscription(nil, nil, nil, true), out); err != nil {
		t.Fatal(err)
	}
	resp, err := (<-out).GetDeltaDiscoveryResponse()
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetResources()) != 2 {
		t.Fatalf("%d resources, want 2", len(resp.GetResources()))
	}
	for _, r := range resp.GetResources() {
		if r.GetVersion() != snap.VersionMap[resource.EndpointType][r.GetName()] {
			t.Errorf("%s: version %q, want the snapshot's hash", r.GetName(), r.GetVersion())
		}
		if w := snap.Resources[types.Endpoint].Items[r.GetName()].Resource.(*wire); r != w.delta {
			t.Errorf("%s: not the shared delta resource", r.GetName())
		}
	}
}

// TestCacheClear: clearing a node drops its snapshot; a node with an open
// watch keeps it, and the next snapshot answers it.
func TestCacheClear(t *testing.T) {
	c := New(false)
	snap := testSnapshot(t, 1)
	for _, id := range []string{"idle", "watching"} {
		if err := c.SetSnapshot(id, snap); err != nil {
			t.Fatal(err)
		}
	}
	out := make(chan cache.Response, 1)
	req := sotwRequest("watching", "grpc-go", resource.ClusterType)
	req.VersionInfo, req.ResponseNonce = snap.GetVersion(resource.ClusterType), "1"
	sub := stream.NewSotwSubscription(nil, true)
	sub.SetReturnedResources(map[string]string{"svc-000": snap.VersionMap[resource.ClusterType]["svc-000"]})
	if _, err := c.CreateWatch(req, sub, out); err != nil {
		t.Fatal(err)
	}
	c.Clear("idle")
	c.Clear("watching")
	for _, id := range []string{"idle", "watching"} {
		if _, err := c.GetSnapshot(id); err == nil {
			t.Errorf("%s: snapshot kept after clear", id)
		}
	}
	if _, ok := c.nodes.Load("idle"); ok {
		t.Error("idle node kept after clear")
	}
	if err := c.SetSnapshot("watching", testSnapshot(t, 2)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-out:
	default:
		t.Fatal("the open watch of a cleared node was not answered by its next snapshot")
	}
}

// TestCacheFetch: a fetch is answered with what it names, unless it has
// the version.
func TestCacheFetch(t *testing.T) {
	c := New(false)
	snap := testSnapshot(t, 3)
	if err := c.SetSnapshot("f", snap); err != nil {
		t.Fatal(err)
	}
	r, err := c.Fetch(context.Background(), sotwRequest("f", "", resource.ClusterType, "svc-002", "nope", "svc-000"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := r.GetDiscoveryResponse()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, a := range resp.GetResources() {
		n, _ := anyName(a)
		names = append(names, n)
	}
	if !slices.Equal(names, []string{"svc-000", "svc-002"}) || resp.GetVersionInfo() != snap.GetVersion(resource.ClusterType) {
		t.Errorf("fetched %v at %q", names, resp.GetVersionInfo())
	}
	req := sotwRequest("f", "", resource.ClusterType)
	req.VersionInfo = snap.GetVersion(resource.ClusterType)
	var skip *types.SkipFetchError
	if _, err := c.Fetch(context.Background(), req); !errors.As(err, &skip) {
		t.Errorf("fetch at the current version: %v, want SkipFetchError", err)
	}
	if _, err := c.Fetch(context.Background(), sotwRequest("nobody", "", resource.ClusterType)); err == nil {
		t.Error("fetch of an unknown node answered")
	}
}

// TestCacheConcurrentNodes: snapshots set for many nodes while their
// streams open, answer and cancel watches, concurrently (run with
// -race): every stream ends with its node's latest snapshot.
func TestCacheConcurrentNodes(t *testing.T) {
	c := New(false)
	snaps := []*cache.Snapshot{testSnapshot(t, 4), testSnapshot(t, 4, 0), testSnapshot(t, 4, 2)}
	const nodes = 64
	type streamState struct {
		mu       sync.Mutex
		returned map[string]string
		answered chan struct{} // buffered(1): a new answer
	}
	states := make([]*streamState, nodes)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	done := make(chan struct{})
	for i := range nodes {
		id := fmt.Sprintf("n%02d", i)
		st := &streamState{answered: make(chan struct{}, 1)}
		states[i] = st
		wg.Go(func() { // a stream: re-opens its watch after each answer, as after an ACK
			sub := stream.NewSotwSubscription(nil, true)
			version, nonce := "", ""
			for n := 0; ; n++ {
				out := make(chan cache.Response, 1)
				req := sotwRequest(id, "grpc-go", resource.EndpointType)
				req.VersionInfo, req.ResponseNonce = version, nonce
				stop, err := c.CreateWatch(req, sub, out)
				if err != nil {
					t.Error(err)
					return
				}
				select {
				case r := <-out:
					sub.SetReturnedResources(r.GetReturnedResources())
					version, nonce = r.GetResponseVersion(), fmt.Sprint(n)
					st.mu.Lock()
					st.returned = r.GetReturnedResources()
					st.mu.Unlock()
					select {
					case st.answered <- struct{}{}:
					default:
					}
				case <-done:
					stop()
					return
				case <-ctx.Done():
					stop()
					return
				}
			}
		})
	}
	var setters sync.WaitGroup
	for s := range 4 {
		setters.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(s), 0))
			for range 500 {
				id := fmt.Sprintf("n%02d", rng.IntN(nodes))
				if err := c.SetSnapshot(id, snaps[rng.IntN(len(snaps))]); err != nil {
					t.Error(err)
				}
			}
		})
	}
	setters.Wait()
	for i, st := range states {
		snap, err := c.GetSnapshot(fmt.Sprintf("n%02d", i))
		if err != nil {
			continue // never given one
		}
		want := snap.GetVersion(resource.EndpointType) + "@"
		for {
			st.mu.Lock()
			ok := strings.HasPrefix(st.returned[versionKey], want)
			st.mu.Unlock()
			if ok {
				break
			}
			select {
			case <-st.answered:
			case <-ctx.Done():
				t.Fatalf("n%02d: the stream never got its snapshot %v", i, want)
			}
		}
	}
	close(done)
	wg.Wait()
}

// TestCacheNamedStreamBehindALoss: an Envoy's load assignment response
// made before one of its clusters left (and came back unchanged) is read
// after it; the Envoy dropped that cluster's assignment meanwhile, and its
// requests saying so were ignored (their nonce was stale, as a response
// was on its way). When it ACKs, naming the cluster again, it is sent the
// full state: the stream's stamp (see stamp) predates the loss.
func TestCacheNamedStreamBehindALoss(t *testing.T) {
	c := New(false)
	node := &core.Node{Id: "edge", UserAgentName: "envoy"}
	s1, s2 := testSnapshot(t, 2), testSnapshot(t, 2, 1)
	w := world(2, 1)
	w.Services = w.Services[1:]
	w.Services[0].Endpoints[0].Health = discovery.HealthUnhealthy
	s3 := snapshotOf(t, w)      // svc-000 gone (its cluster with it)
	s4 := testSnapshot(t, 2, 1) // svc-000 back, as it was
	names := []string{"svc-000", "svc-001"}
	if err := c.SetSnapshot("edge", s1); err != nil {
		t.Fatal(err)
	}
	sim := newSotwSim(c, node)
	request := func(version, nonce string, names []string) bool {
		t.Helper()
		ok, err := sim.request(&discoverygrpc.DiscoveryRequest{TypeUrl: resource.EndpointType, VersionInfo: version,
			ResponseNonce: nonce, ResourceNames: names})
		if err != nil {
			t.Fatal(err)
		}
		sim.tag(s1, func(string) server { return server{} })
		return ok
	}
	request("", "", names)
	r0, err := sim.send(resource.EndpointType)
	if err != nil {
		t.Fatal(err)
	}
	request(r0.version, r0.nonce, names)
	for _, s := range []*cache.Snapshot{s2, s3, s4} { // s2 answers the watch; s3 and s4 come while that answer waits
		if err := c.SetSnapshot("edge", s); err != nil {
			t.Fatal(err)
		}
		sim.tag(s, func(string) server { return server{} })
	}
	r1, err := sim.send(resource.EndpointType)
	if err != nil {
		t.Fatal(err)
	}
	if request(r0.version, r0.nonce, names[1:]) || request(r0.version, r0.nonce, names) {
		t.Fatal("requests with a stale nonce were read")
	}
	request(r1.version, r1.nonce, names) // the ACK, naming svc-000 again
	if len(sim.pending()) != 1 {
		t.Fatal("the ACK was not answered")
	}
	r2, err := sim.send(resource.EndpointType)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := r2.res["svc-000"]; !ok {
		t.Errorf("answer carries %v, want svc-000 again (the Envoy dropped it with its cluster)", r2.order)
	}
}
