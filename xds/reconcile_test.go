package xds

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/protobuf/proto"

	"github.com/xds-server/xds-server/discovery"
	"github.com/xds-server/xds-server/translate"
	"github.com/xds-server/xds-server/translate/translatetest"
	"github.com/xds-server/xds-server/xdscache"
)

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func world(services, endpoints int) discovery.Snapshot {
	return translatetest.World(services, endpoints)
}

func newTestServer(t *testing.T, cfg Config) *Server {
	t.Helper()
	cfg.Logger = quietLogger()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// connect registers a node as if its first stream request had arrived.
func connect(s *Server, stream int64, id string) {
	cb := s.cb
	cb.request(stream, &core.Node{Id: id, Cluster: "test"})
}

func versions(t testing.TB, s *Server, node string) map[types.ResponseType]string {
	t.Helper()
	snap, ok := s.rec.snapshotOf(node)
	if !ok {
		t.Fatalf("node %s has no snapshot", node)
	}
	out := map[types.ResponseType]string{}
	for _, k := range xdscache.Kinds {
		out[k] = snap.Resources[k].Version
	}
	return out
}

func TestVersionsFollowContent(t *testing.T) {
	a, b := newTestServer(t, Config{}), newTestServer(t, Config{})
	connect(a, 1, "n1")
	connect(b, 1, "n1")
	a.Update(world(3, 4))
	a.rec.reconcile()
	b.Update(world(3, 4))
	b.rec.reconcile()
	va, vb := versions(t, a, "n1"), versions(t, b, "n1")
	for k, v := range va {
		if vb[k] != v {
			t.Errorf("type %d: equal content, versions %s vs %s (must not depend on process)", k, v, vb[k])
		}
	}

	sets := testutil.ToFloat64(a.m.snapshotSets)
	a.Update(world(3, 4)) // same content again
	a.rec.reconcile()
	if got := testutil.ToFloat64(a.m.snapshotSets); got != sets {
		t.Errorf("unchanged content re-set the snapshot (%v -> %v sets)", sets, got)
	}
	if v := versions(t, a, "n1"); v[types.Endpoint] != va[types.Endpoint] {
		t.Errorf("unchanged content changed the EDS version")
	}

	w := world(3, 4)
	w.Services[1].Endpoints[2].Health = discovery.HealthUnhealthy
	a.Update(w)
	a.rec.reconcile()
	vc := versions(t, a, "n1")
	if vc[types.Endpoint] == va[types.Endpoint] {
		t.Error("a health change did not change the EDS version")
	}
	for _, k := range []types.ResponseType{types.Cluster, types.Listener, types.Route} {
		if vc[k] != va[k] {
			t.Errorf("type %d version changed although only endpoints changed", k)
		}
	}
}

func TestOnlyChangedServicesAreRetranslated(t *testing.T) {
	s := newTestServer(t, Config{})
	s.Update(world(5, 2))
	s.rec.reconcile()
	before := s.rec.memo
	w := world(5, 2)
	w.Services[3].Endpoints[0].Port = 9999
	s.Update(w)
	s.rec.reconcile()
	for name, e := range s.rec.memo {
		same := e.items[0].Res == before[name].items[0].Res
		if name == "svc-003" && same {
			t.Errorf("%s changed but was not retranslated", name)
		}
		if name != "svc-003" && !same {
			t.Errorf("%s did not change but was retranslated", name)
		}
	}
}

func TestNewNodeGetsSnapshotOnConnect(t *testing.T) {
	s := newTestServer(t, Config{})
	if s.Ready() {
		t.Fatal("ready before any discovery snapshot")
	}
	s.Update(world(1, 1))
	s.rec.reconcile()
	if !s.Ready() {
		t.Fatal("not ready after the first snapshot")
	}
	connect(s, 7, "late")
	if _, ok := s.rec.snapshotOf("late"); !ok {
		t.Fatal("a node connecting after the first snapshot got nothing")
	}
	if _, err := s.cache.GetSnapshot("late"); err != nil {
		t.Fatalf("cache has no snapshot for the node: %v", err)
	}
}

// runLoop starts the reconcile loop of a server with one node; each
// pass ends with a value on the channel.
func runLoop(t *testing.T, cfg Config) (*Server, <-chan struct{}) {
	s := newTestServer(t, cfg)
	connect(s, 1, "n1")
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	rebuilt := make(chan struct{}, 100)
	s.rec.afterReconcile = func() { rebuilt <- struct{}{} }
	go s.rec.run(ctx)
	return s, rebuilt
}

func TestDebounceCoalescesBursts(t *testing.T) {
	s, rebuilt := runLoop(t, Config{Debounce: 20 * time.Millisecond, MaxDelay: time.Second})
	for i := range 100 {
		s.Update(world(1, i+1))
	}
	for {
		select {
		case <-rebuilt:
		case <-time.After(10 * time.Second):
			t.Fatal("no rebuild within 10s")
		}
		if snap, ok := s.rec.snapshotOf("n1"); ok && countEndpoints(snap) == 100 {
			break
		}
	}
	if n := testutil.ToFloat64(s.m.reconciles); n > 3 {
		t.Errorf("100 updates in a burst caused %v rebuilds, want at most 3", n)
	}
}

// TestDebounceLeadingEdge: a change after a quiet time is rebuilt at
// once, not after the debounce; the changes right after it wait for it.
func TestDebounceLeadingEdge(t *testing.T) {
	s, rebuilt := runLoop(t, Config{Debounce: time.Minute, MaxDelay: 2 * time.Minute})
	s.Update(world(1, 1))
	select {
	case <-rebuilt:
	case <-time.After(10 * time.Second):
		t.Fatal("a lone change waited for the debounce (1m)")
	}
	s.Update(world(1, 2)) // within the debounce of that pass: coalesced, later
	select {
	case <-rebuilt:
		t.Fatal("a change right after a pass was rebuilt without the debounce")
	default:
	}
}

func TestNodeExpiry(t *testing.T) {
	now := time.Unix(1000, 0)
	s := newTestServer(t, Config{NodeGrace: time.Minute, Now: func() time.Time { return now }})
	s.Update(world(1, 1))
	s.rec.reconcile()
	connect(s, 1, "gone")
	connect(s, 2, "stays")
	cb := s.cb
	cb.OnStreamClosed(1, nil)
	now = now.Add(59 * time.Second)
	s.Expire()
	if _, err := s.cache.GetSnapshot("gone"); err != nil {
		t.Fatal("snapshot dropped within the grace period")
	}
	now = now.Add(2 * time.Second)
	s.Expire()
	if _, err := s.cache.GetSnapshot("gone"); err == nil {
		t.Fatal("snapshot of a node gone longer than the grace period kept")
	}
	if _, err := s.cache.GetSnapshot("stays"); err != nil {
		t.Fatal("connected node lost its snapshot")
	}
	if got := testutil.ToFloat64(s.m.expired); got != 1 {
		t.Errorf("expired metric = %v, want 1", got)
	}
}

func countEndpoints(snap *cache.Snapshot) int {
	n := 0
	for _, r := range snap.Resources[types.Endpoint].Items {
		m, err := xdscache.Decode(r.Resource)
		if err != nil {
			panic(err)
		}
		for _, l := range m.(*endpointv3.ClusterLoadAssignment).GetEndpoints() {
			n += len(l.GetLbEndpoints())
		}
	}
	return n
}

// TestServedResourcesAreTheBuiltOnes checks that what the cache serves (the
// pre-marshaled wire form) is byte for byte the built resource, and valid.
func TestServedResourcesAreTheBuiltOnes(t *testing.T) {
	items, err := encodeService(translate.Service(world(1, 5).Services[0], translate.ServiceSettings{}, nil))
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range items {
		want, _ := proto.MarshalOptions{Deterministic: true}.Marshal(it.Res)
		got, err := cache.MarshalResource(it.Wire)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%T: wire form marshals to different bytes (%v)", it.Res, err)
		}
		back, err := xdscache.Decode(it.Wire)
		if err != nil || !proto.Equal(back, it.Res) {
			t.Errorf("%T: decoded wire form differs (%v)", it.Res, err)
		}
		if err := back.(interface{ ValidateAll() error }).ValidateAll(); err != nil {
			t.Errorf("%T: %v", it.Res, err)
		}
		if it.Hash != cache.HashResource(want) {
			t.Errorf("%T: hash is not go-control-plane's resource hash", it.Res)
		}
	}
}
