package xds

import (
	"testing"
	"time"

	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/xds-server/xds-server/discovery"
	"github.com/xds-server/xds-server/translate"
	"github.com/xds-server/xds-server/xdscache"
)

// TestPushTimes: a change is measured when its response is sent, and
// forgotten when the node turns out to have what it asks for already.
func TestPushTimes(t *testing.T) {
	var p pushTimes
	s0, s1, s2 := testSnapshot(t, 2), testSnapshot(t, 2, 0), testSnapshot(t, 2, 1)
	t0 := time.Unix(100, 0)
	p.set("n", s0, s1, t0, nil)
	if at, ok := p.sent("n", resource.EndpointType, t0); !ok || !at.Equal(t0) {
		t.Fatalf("sent = %v, %v; want the change time", at, ok)
	}
	if _, ok := p.sent("n", resource.EndpointType, t0); ok {
		t.Fatal("a change measured twice")
	}
	p.set("n", s1, s2, t0.Add(time.Second), nil)
	p.upToDate("n", resource.EndpointType, s1) // an older snapshot: says nothing of s2
	if _, ok := p.sent("n", resource.EndpointType, t0); !ok {
		t.Fatal("the awaited change was forgotten on an older snapshot's account")
	}
	p.set("n", s2, s1, t0.Add(2*time.Second), nil)
	p.upToDate("n", resource.EndpointType, s1)
	if _, ok := p.sent("n", resource.EndpointType, t0); ok {
		t.Error("a change the node did not need was measured at its next push")
	}
	if _, ok := p.sent("n", resource.ClusterType, t0); ok {
		t.Error("a type that did not change was measured")
	}
}

// testSnapshot is the proxyless snapshot of services svc-000.. with one
// endpoint each; down marks services whose endpoint is unhealthy.
func testSnapshot(t testing.TB, services int, down ...int) *cache.Snapshot {
	t.Helper()
	w := world(services, 1)
	for _, i := range down {
		w.Services[i].Endpoints[0].Health = discovery.HealthUnhealthy
	}
	var items []xdscache.ServiceItems
	for _, svc := range w.Services {
		it, err := encodeService(translate.Service(svc, translate.ServiceSettings{}, nil))
		if err != nil {
			t.Fatal(err)
		}
		items = append(items, it)
	}
	snap, err := (&reconciler{}).base(keyProxyless, items)
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

// TestPerKindResolvesOnce: a served type's metric child is looked up once,
// when made, under its type name; another type's on every call.
func TestPerKindResolvesOnce(t *testing.T) {
	var calls []string
	p := newPerKind(func(name string) string { calls = append(calls, name); return "child:" + name })
	made := len(calls)
	for _, tc := range []struct{ url, want string }{
		{resource.ClusterType, "child:cluster"}, {resource.EndpointType, "child:endpoint"},
		{resource.ListenerType, "child:listener"}, {resource.RouteType, "child:route"},
	} {
		if got := p.get(tc.url); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.url, got, tc.want)
		}
	}
	if len(calls) != made || made != len(xdscache.Kinds) {
		t.Errorf("looked up %v, want each of the %d kinds once, when made", calls, len(xdscache.Kinds))
	}
	if got := p.get(resource.SecretType); got != "child:secret" || len(calls) != made+1 {
		t.Errorf("another type: %s after %v, want child:secret looked up then", got, calls)
	}
}

// TestForgottenNodeGetsNewPushTimes: the reconciler keeps each node's
// push times' entry with its snapshot; a forgotten node's goes with it,
// and the node coming back gets the entry its streams find.
func TestForgottenNodeGetsNewPushTimes(t *testing.T) {
	s := newTestServer(t, Config{})
	s.Update(world(2, 1))
	s.rec.reconcile()
	connect(s, 1, "n")
	first := s.rec.nodeSnap["n"].push
	if first == nil || first != s.rec.pushes.node("n") {
		t.Fatal("the reconciler's entry is not the one the node's streams find")
	}
	s.rec.forget("n")
	if _, ok := s.rec.pushes.nodes.Load("n"); ok {
		t.Fatal("a forgotten node kept its push times")
	}
	s.rec.connected("n") // as when its next stream opens
	again := s.rec.nodeSnap["n"].push
	if again == nil || again == first || again != s.rec.pushes.node("n") {
		t.Errorf("the node back got entry %p (before %p), its streams find %p", again, first, s.rec.pushes.node("n"))
	}
}
