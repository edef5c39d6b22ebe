package xds

import (
	"fmt"
	"slices"
	"testing"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/xds-server/xds-server/discovery"
	"github.com/xds-server/xds-server/translate"
)

// BenchmarkLocalityReconcile is BenchmarkSubsetReconcile with failover
// [zone]: 10,000 nodes in three zones, a service of 1,000 endpoints in
// the same three zones, one endpoint's health flipped per pass. With
// size=0 every node of a zone shares one load assignment (3 in all);
// with size=20 each (zone, client index) has its own, a subset per level.
//
//	go test ./xds -run '^$' -bench LocalityReconcile -benchmem -count 5
func BenchmarkLocalityReconcile(b *testing.B) {
	for _, size := range []int{0, 20} {
		b.Run(fmt.Sprintf("nodes=10000/endpoints=1000/zones=3/size=%d", size), func(b *testing.B) {
			benchLocalityReconcile(b, 10000, 1000, size)
		})
	}
}

func benchLocalityReconcile(b *testing.B, nodes, endpoints, size int) {
	set := translate.ServiceSettings{SubsetSize: size, Locality: translate.LocalityPolicy{Failover: translate.Failover{translate.LevelZone}}}
	s, err := New(Config{Settings: func(string) translate.ServiceSettings { return set }, Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	for i := range nodes {
		s.cb.request(int64(i+1), &core.Node{Id: fmt.Sprintf("node-%05d", i), Cluster: "c",
			Locality: &core.Locality{Zone: fmt.Sprintf("z%d", i%3)}})
	}
	w := world(1, endpoints)
	s.Update(w)
	s.rec.reconcile()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		w.Services[0].Endpoints = slices.Clone(w.Services[0].Endpoints)
		ep := &w.Services[0].Endpoints[i%endpoints]
		ep.Health = map[bool]discovery.Health{true: discovery.HealthUnhealthy, false: discovery.HealthHealthy}[ep.Health == discovery.HealthHealthy]
		s.Update(w)
		s.rec.reconcile()
	}
	b.StopTimer()
	s.rec.mu.Lock()
	b.ReportMetric(float64(len(s.rec.sub.variants)), "snapshots")
	b.ReportMetric(float64(len(s.rec.sub.local.items)), "assignments")
	s.rec.mu.Unlock()
}
