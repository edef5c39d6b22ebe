package xds

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/xds-server/xds-server/nodeindex"
	"github.com/xds-server/xds-server/translate"
	"github.com/xds-server/xds-server/translate/translatetest"
	"github.com/xds-server/xds-server/xdscache"
)

// TestTranslateEquivalence pins production to the golden-tested function:
// for every golden input of translate (and variants of it: other client
// indices, the other kind of node), a fresh server's snapshot for the
// node, decoded, equals translate.Node's resources, one by one.
func TestTranslateEquivalence(t *testing.T) {
	ins, err := filepath.Glob("../translate/testdata/golden/*.in.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(ins) < 30 {
		t.Fatalf("%d golden inputs, want at least 30", len(ins))
	}
	for _, path := range ins {
		in, _, err := translatetest.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimSuffix(filepath.Base(path), ".in.yaml")
		if why, ok := nodeOnly[name]; ok {
			t.Logf("%s: not for a server: %s", name, why)
			continue
		}
		for _, v := range variants(in) {
			t.Run(name+"/"+v.label, func(t *testing.T) {
				checkEquivalent(t, v.in)
			})
		}
	}
}

// nodeOnly are golden inputs a server cannot be given, and why.
var nodeOnly = map[string]string{
	"steady_subset_slots_missing": "a slot table gives every endpoint a slot",
}

type variant struct {
	label string
	in    translate.NodeInput
}

// variants are the input as is, with client indices 1, 3 and 6, and with
// the node's kind flipped (Envoy or proxyless).
func variants(in translate.NodeInput) []variant {
	out := []variant{{"as-is", in}}
	for _, i := range []int{1, 3, 6} {
		v := in
		v.Node.Index = i
		out = append(out, variant{fmt.Sprintf("index-%d", i), v})
	}
	flipped := in
	flipped.Node.Envoy = !in.Node.Envoy
	return append(out, variant{"kind-flipped", flipped})
}

// checkEquivalent compares a fresh server's snapshot for in's node with
// translate.Node(in).
func checkEquivalent(t *testing.T, in translate.NodeInput) {
	t.Helper()
	want, wantErr := translate.Node(in)
	got, gotErr := serverResources(t, in)
	if (wantErr != nil) != (gotErr != nil) {
		t.Fatalf("translate.Node error: %v; server error: %v", wantErr, gotErr)
	}
	if wantErr != nil {
		return
	}
	if equalResources(want, got) {
		return
	}
	w, err := translatetest.Render(want, nil)
	if err != nil {
		t.Fatal(err)
	}
	g, err := translatetest.Render(got, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Errorf("the server's snapshot differs from translate.Node (-node +server):\n%s", translatetest.Diff(string(w), string(g)))
}

// serverResources runs in through a fresh Server (one reconcile pass) and
// returns the node's snapshot decoded, each kind sorted by name.
func serverResources(t *testing.T, in translate.NodeInput) (translate.NodeResources, error) {
	t.Helper()
	var out translate.NodeResources
	cfg := Config{
		Settings: in.Settings, Listeners: in.Listeners,
		RateLimitAddress: in.RateLimitAddress, RateLimitTLS: in.RateLimitTLS,
		Registerer: prometheus.NewRegistry(), Logger: quietLogger(), Datacenters: in.Datacenters,
	}
	if in.Slots != nil { // without, the default table: a fresh nodeindex.Local
		cfg.Subsetting.Table = &slotTable{slots: in.Slots, Local: nodeindex.NewLocal(time.Minute, time.Now)}
	}
	s, err := New(cfg)
	if err != nil {
		return out, err
	}
	agent := "grpc-go"
	if in.Node.Envoy {
		agent = "envoy"
	}
	n := &core.Node{Id: in.Node.ID, Cluster: in.Node.Cluster, UserAgentName: agent,
		Locality: &core.Locality{Region: in.Node.Locality.Region, Zone: in.Node.Locality.Zone, SubZone: in.Node.Locality.SubZone}}
	if in.Node.Datacenter != "" {
		n.Metadata = &structpb.Struct{Fields: map[string]*structpb.Value{"datacenter": structpb.NewStringValue(in.Node.Datacenter)}}
	}
	s.cb.request(1, n)
	node, ok := s.reg.get(in.Node.ID)
	if !ok {
		t.Fatal("the node did not register")
	}
	s.reg.setIndex(node.ID, node.Group, in.Node.Index, node.IndexSource)
	s.SetWeights(in.Weights)
	nw := NodeWeights{}
	for svc, w := range in.NodeWeights {
		nw[svc] = map[string]map[string]uint32{in.Node.ID: w}
	}
	s.SetNodeWeights(nw)
	if in.Spill != nil {
		s.SetSpill(in.Spill)
	}
	if in.Policies != nil {
		s.SetPolicies(in.Policies)
	}
	s.Update(in.Snapshot)
	s.rec.reconcile()
	snap, ok := s.rec.snapshotOf(in.Node.ID)
	if !ok {
		return out, fmt.Errorf("node %s has no snapshot", in.Node.ID)
	}
	out.Clusters = decodeKind[*clusterv3.Cluster](t, snap.Resources[types.Cluster].Items)
	out.LoadAssignments = decodeKind[*endpointv3.ClusterLoadAssignment](t, snap.Resources[types.Endpoint].Items)
	out.Listeners = decodeKind[*listenerv3.Listener](t, snap.Resources[types.Listener].Items)
	out.Routes = decodeKind[*routev3.RouteConfiguration](t, snap.Resources[types.Route].Items)
	return out, nil
}

// decodeKind decodes one kind's resources of a snapshot, sorted by name.
func decodeKind[M proto.Message](t *testing.T, items map[string]types.ResourceWithTTL) []M {
	t.Helper()
	names := make([]string, 0, len(items))
	for name := range items {
		names = append(names, name)
	}
	slices.Sort(names)
	out := make([]M, 0, len(names))
	for _, name := range names {
		m, err := xdscache.Decode(items[name].Resource)
		if err != nil {
			t.Fatal(err)
		}
		r, ok := m.(M)
		if !ok {
			t.Fatalf("resource %s is a %T", name, m)
		}
		out = append(out, r)
	}
	return out
}

// equalResources compares two nodes' resources kind by kind, in order.
func equalResources(a, b translate.NodeResources) bool {
	return equalAll(a.Clusters, b.Clusters) && equalAll(a.LoadAssignments, b.LoadAssignments) &&
		equalAll(a.Listeners, b.Listeners) && equalAll(a.Routes, b.Routes)
}

func equalAll[M proto.Message](a, b []M) bool {
	return slices.EqualFunc(a, b, func(x, y M) bool { return proto.Equal(x, y) })
}

// slotTable is a client index table that gives the endpoints of the
// services in slots the slots listed there (the history a case assumes),
// and leaves everything else to a nodeindex.Local. The server acquires
// from a table other than a nodeindex.Local concurrently, so the slots of
// a steady subset service a case does not list would depend on timing:
// cases with slots list every steady subset service.
type slotTable struct {
	slots map[string]map[string]int // service -> endpoint id -> slot
	*nodeindex.Local
}

func (s *slotTable) Acquire(ctx context.Context, group, node string) (int, error) {
	if svc, ok := strings.CutPrefix(group, "endpoints:"); ok {
		if slot, ok := s.slots[svc][node]; ok {
			return slot, nil
		}
	}
	return s.Local.Acquire(ctx, group, node)
}

func (s *slotTable) Release(ctx context.Context, group, node string) error {
	return s.Local.Release(ctx, group, node)
}
