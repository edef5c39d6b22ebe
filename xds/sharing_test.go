package xds

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/xds-server/xds-server/discovery"
	"github.com/xds-server/xds-server/subsetting"
	"github.com/xds-server/xds-server/translate"
	"github.com/xds-server/xds-server/xdscache"
)

// fleetNode is one node of a random fleet and what makes its inputs.
type fleetNode struct {
	id, cluster, agent string
	index              int    // subset.index in its metadata
	zone               string // node.locality.zone; "" none
}

// randomLocality draws a service's locality policy: none half the time.
func randomLocality(rng *rand.Rand) translate.LocalityPolicy {
	switch rng.IntN(6) {
	case 0:
		return translate.LocalityPolicy{Failover: translate.Failover{translate.LevelZone}}
	case 1:
		return translate.LocalityPolicy{Failover: translate.Failover{translate.LevelZone, translate.LevelRegion}, Distribute: 0.7}
	case 2:
		return translate.LocalityPolicy{Distribute: 0.5}
	}
	return translate.LocalityPolicy{}
}

// randomFleet draws a catalog (health, subset sizes and algorithms per
// service), nodes (kind, cluster, client index: few indices, so nodes share
// them) and per-node weights for some of them.
func randomFleet(rng *rand.Rand) (discovery.Snapshot, map[string]translate.ServiceSettings, []fleetNode, NodeWeights) {
	snap := world(3+rng.IntN(3), 4+rng.IntN(8))
	settings := map[string]translate.ServiceSettings{}
	for i, svc := range snap.Services {
		for j := range svc.Endpoints {
			switch rng.IntN(8) {
			case 0:
				snap.Services[i].Endpoints[j].Health = discovery.HealthUnhealthy
			case 1:
				snap.Services[i].Endpoints[j].Health = discovery.HealthDraining
			}
		}
		alg := subsetting.Steady
		if rng.IntN(3) == 0 {
			alg = subsetting.Classic
		}
		settings[svc.Name] = translate.ServiceSettings{SubsetSize: rng.IntN(len(svc.Endpoints)), Subsetting: alg,
			Locality: randomLocality(rng)}
	}
	var nodes []fleetNode
	weights := NodeWeights{}
	for n := range 12 + rng.IntN(20) {
		cluster := []string{"edge", "mesh", "other"}[rng.IntN(3)]
		agent := []string{"envoy", "gRPC Go"}[rng.IntN(2)]
		fn := fleetNode{id: fmt.Sprintf("%s-%02d", cluster, n), cluster: cluster, agent: agent, index: rng.IntN(4),
			zone: []string{"", "z0", "z1", "z2"}[rng.IntN(4)]}
		nodes = append(nodes, fn)
		if rng.IntN(4) == 0 {
			svc := snap.Services[rng.IntN(len(snap.Services))]
			w := map[string]uint32{}
			for _, ep := range svc.Endpoints {
				w[ep.ID] = 1 + uint32(rng.IntN(100))
			}
			if weights[svc.Name] == nil {
				weights[svc.Name] = map[string]map[string]uint32{}
			}
			weights[svc.Name][fn.id] = w
		}
	}
	return snap, settings, nodes, weights
}

// sharingServer serves a random fleet's catalog and weights to nodes.
func sharingServer(t *testing.T, snap discovery.Snapshot, settings map[string]translate.ServiceSettings, weights NodeWeights, nodes []fleetNode) *Server {
	t.Helper()
	s := newTestServer(t, Config{
		Listeners: testListeners(), RateLimitAddress: "127.0.0.1:18081",
		Settings:   func(name string) translate.ServiceSettings { return settings[name] },
		Subsetting: SubsetConfig{IndexSource: IndexMetadata},
	})
	for i, n := range nodes {
		md, err := structpb.NewStruct(map[string]any{"subset.index": float64(n.index)})
		if err != nil {
			t.Fatal(err)
		}
		s.cb.request(int64(i+1), &core.Node{Id: n.id, Cluster: n.cluster, UserAgentName: n.agent, Metadata: md,
			Locality: &core.Locality{Zone: n.zone}})
	}
	s.Update(snap)
	s.SetNodeWeights(weights)
	s.rec.reconcile()
	return s
}

// servedBytes is what a node is served: type -> name -> the resource's bytes,
// plus each type's version.
func servedBytes(t *testing.T, s *Server, node string) map[types.ResponseType]map[string]string {
	t.Helper()
	snap, ok := s.rec.snapshotOf(node)
	if !ok {
		t.Fatalf("node %s has no snapshot", node)
	}
	out := map[types.ResponseType]map[string]string{}
	for _, k := range xdscache.Kinds {
		out[k] = map[string]string{"(version)": snap.Resources[k].Version}
		for name, r := range snap.Resources[k].Items {
			b, err := cache.MarshalResource(r.Resource)
			if err != nil {
				t.Fatal(err)
			}
			out[k][name] = string(b)
		}
	}
	return out
}

// TestSharingNeverMixesNodes is a property test over random fleets: nodes
// with equal inputs share snapshots and encodings, and every node of the
// fleet is served byte for byte what a server with that node alone (same
// catalog, index, cluster, kind, weights and listeners) serves it, so two
// nodes with different subsets, weights or listeners never get each
// other's resources. Every snapshot is consistent and every resource valid.
func TestSharingNeverMixesNodes(t *testing.T) {
	shared := 0
	for seed := range uint64(12) {
		rng := rand.New(rand.NewPCG(seed, 17))
		snap, settings, nodes, weights := randomFleet(rng)
		fleet := sharingServer(t, snap, settings, weights, nodes)
		distinct := map[*cache.Snapshot]bool{}
		for _, n := range nodes {
			got := servedBytes(t, fleet, n.id)
			alone := sharingServer(t, snap, settings, weights, []fleetNode{n})
			want := servedBytes(t, alone, n.id)
			for _, k := range xdscache.Kinds {
				if !maps.Equal(got[k], want[k]) {
					t.Errorf("seed %d: node %s (%s, %s, index %d): type %d served in the fleet differs from alone",
						seed, n.id, n.cluster, n.agent, n.index, k)
				}
			}
			built := checkConsistent(t, fleet, n.id)
			for _, k := range xdscache.Kinds {
				for name, r := range built.Resources[k].Items {
					if err := r.Resource.(interface{ ValidateAll() error }).ValidateAll(); err != nil {
						t.Errorf("seed %d: node %s: %s: %v", seed, n.id, name, err)
					}
				}
			}
			sn, _ := fleet.rec.snapshotOf(n.id)
			distinct[sn] = true
		}
		shared += len(nodes) - len(distinct)
	}
	if shared == 0 {
		t.Error("no two nodes shared a snapshot in any fleet: the property was not exercised")
	}
}
