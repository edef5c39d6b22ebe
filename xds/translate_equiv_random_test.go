package xds

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/xds-server/xds-server/discovery"
	"github.com/xds-server/xds-server/envoy"
	"github.com/xds-server/xds-server/subsetting"
	"github.com/xds-server/xds-server/translate"
)

// TestTranslateEquivalenceRandom extends TestTranslateEquivalence to
// random inputs: services of 0 to 9 endpoints in every health (drained
// ones with a reason), classic, steady or no subsets, global and per-node
// weights, Envoy or proxyless nodes with or without a client index, and
// listeners some of which match.
func TestTranslateEquivalenceRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(25, 2))
	for i := range 150 {
		in := randomInput(rng)
		t.Run(fmt.Sprint(i), func(t *testing.T) { checkEquivalent(t, in) })
	}
}

// randomInput draws one node's input.
func randomInput(rng *rand.Rand) translate.NodeInput {
	in := translate.NodeInput{
		Node: translate.NodeIdentity{ID: fmt.Sprintf("node-%d", rng.IntN(3)), Cluster: []string{"edge", "mesh", ""}[rng.IntN(3)],
			Envoy: rng.IntN(2) == 0, Index: rng.IntN(12) - 1},
		Weights: map[string]map[string]uint32{}, NodeWeights: map[string]map[string]uint32{},
		RateLimitAddress: "127.0.0.1:18081",
	}
	if rng.IntN(3) == 0 {
		in.RateLimitTLS = &envoy.RateLimitTLS{ClientCertificate: rng.IntN(2) == 0}
	}
	settings := map[string]translate.ServiceSettings{}
	for k := range 1 + rng.IntN(4) {
		name := fmt.Sprintf("svc-%d", k)
		svc, w, own := randomService(rng, name)
		in.Snapshot.Services = append(in.Snapshot.Services, svc)
		if w != nil {
			in.Weights[name] = w
		}
		if own != nil {
			in.NodeWeights[name] = own
		}
		settings[name] = randomSettings(rng)
	}
	in.Settings = func(s string) translate.ServiceSettings { return settings[s] }
	in.Listeners = randomListeners(rng)
	randomPlaces(rng, &in)
	return in
}

// randomService draws a service, its global weights and the node's own
// (each nil at times).
func randomService(rng *rand.Rand, name string) (discovery.Service, map[string]uint32, map[string]uint32) {
	svc := discovery.Service{Name: name}
	var w, own map[string]uint32
	if rng.IntN(2) == 0 {
		w = map[string]uint32{}
	}
	if rng.IntN(2) == 0 {
		own = map[string]uint32{}
	}
	for j := range rng.IntN(10) {
		ep := discovery.Endpoint{
			ID: fmt.Sprintf("%s-%d", name, j), Address: fmt.Sprintf("10.0.%d.%d", len(name), j+1), Port: 8080,
			Health: discovery.Health(rng.IntN(5)), Weight: uint32(rng.IntN(3)),
			Locality: discovery.Locality{Region: fmt.Sprintf("r%d", rng.IntN(2)), Zone: fmt.Sprintf("z%d", rng.IntN(3))},
			Meta:     map[string]string{}, Datacenter: []string{"", "dc1", "dc2", "dc3"}[rng.IntN(4)],
		}
		if ep.Health == discovery.HealthDraining {
			ep.Drain = []string{"admin", "consul_maintenance", "deregistered", "meta", "orca", "static", "tag"}[rng.IntN(7)]
		}
		svc.Endpoints = append(svc.Endpoints, ep)
		if w != nil && rng.IntN(2) == 0 {
			w[ep.ID] = uint32(1 + rng.IntN(100))
		}
		if own != nil && rng.IntN(2) == 0 {
			own[ep.ID] = uint32(1 + rng.IntN(100))
		}
	}
	return svc, w, own
}

func randomSettings(rng *rand.Rand) translate.ServiceSettings {
	set := translate.ServiceSettings{
		LBPolicy:   []envoy.LBPolicy{"", envoy.RoundRobin, envoy.RingHash, envoy.LeastRequest}[rng.IntN(4)],
		SubsetSize: []int{0, 0, 1, 2, 3, 5}[rng.IntN(6)],
		Subsetting: []subsetting.Algorithm{"", subsetting.Classic, subsetting.Steady}[rng.IntN(3)],
	}
	if rng.IntN(3) == 0 {
		set.ConnectTimeout = time.Duration(1+rng.IntN(5)) * 100 * time.Millisecond
	}
	levels := []translate.Failover{{}, {translate.LevelZone}, {translate.LevelZone, translate.LevelRegion, translate.LevelDatacenter},
		{translate.LevelDatacenter}, {translate.LevelRegion, translate.LevelZone}}
	set.Locality = translate.LocalityPolicy{Failover: levels[rng.IntN(len(levels))],
		Distribute: []float64{0, 0, 0.8}[rng.IntN(3)], Spill: rng.IntN(3) == 0}
	set.OverprovisioningFactor = []uint32{0, 0, 120}[rng.IntN(3)]
	return set
}

// randomPlaces places the node (datacenter, region, zone, each maybe
// unknown), orders the datacenters and draws zone spill states.
func randomPlaces(rng *rand.Rand, in *translate.NodeInput) {
	in.Node.Datacenter = []string{"", "dc1", "dc2"}[rng.IntN(3)]
	in.Node.Locality.Region = []string{"", "r0", "r1"}[rng.IntN(3)]
	in.Node.Locality.Zone = []string{"", "z0", "z1", "z2"}[rng.IntN(4)]
	in.Datacenters = [][]string{nil, {"dc1", "dc2", "dc3"}, {"dc2", "dc3"}}[rng.IntN(3)]
	if in.Node.Datacenter == "" && len(in.Datacenters) > 0 {
		in.Node.Datacenter = in.Datacenters[0] // what the server makes of a node naming none
	}
	in.Spill = map[string]map[translate.Zone]translate.ZoneSpill{}
	for _, svc := range in.Snapshot.Services {
		zones := map[translate.Zone]translate.ZoneSpill{}
		for r := range 2 {
			for z := range 3 {
				zones[translate.Zone{Region: fmt.Sprintf("r%d", r), Zone: fmt.Sprintf("z%d", z)}] = translate.ZoneSpill{
					Keep: []float64{1, 0.6, 0.3}[rng.IntN(3)], Spare: []float64{0, 40}[rng.IntN(2)]}
			}
		}
		in.Spill[svc.Name] = zones
	}
}

// randomListeners draws up to three of a fixed set of listeners: one
// with a rate limit for edge nodes, one for the mesh cluster with
// admission control, one for every node routing to a service that may
// not exist.
func randomListeners(rng *rand.Rand) []translate.Listener {
	all := []translate.Listener{
		{Nodes: []string{"node-1", "edge"}, HTTPListener: envoy.HTTPListener{Name: "ingress", Address: "0.0.0.0:10000",
			Routes:    []envoy.Route{{Prefix: "/", Service: "svc-0"}},
			RateLimit: &envoy.RateLimit{Domain: "edge", Actions: [][]envoy.RateLimitAction{{{RemoteAddress: true}}}}}},
		{Nodes: []string{"mesh"}, HTTPListener: envoy.HTTPListener{Name: "internal", Address: "0.0.0.0:10001",
			Routes:           []envoy.Route{{Prefix: "/", Service: "svc-1"}},
			AdmissionControl: &envoy.AdmissionControl{SuccessRateThreshold: 0.5}}},
		{HTTPListener: envoy.HTTPListener{Name: "svc-2", Address: "127.0.0.1:10002",
			Routes: []envoy.Route{{Prefix: "/", Service: "svc-9"}}}},
	}
	var out []translate.Listener
	for _, l := range all {
		if rng.IntN(2) == 0 {
			out = append(out, l)
		}
	}
	return out
}
