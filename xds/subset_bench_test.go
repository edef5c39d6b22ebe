package xds

import (
	"fmt"
	"slices"
	"testing"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/xds-server/xds-server/discovery"
	"github.com/xds-server/xds-server/subsetting"
	"github.com/xds-server/xds-server/translate"
)

// BenchmarkSubsetReconcile measures one reconcile pass with subsetting:
// a health change in a service of 1,000 endpoints (subset size 20) seen by
// 10,000 connected nodes, each getting its own load assignment. With
// groups > 1 the nodes are spread over that many groups, so nodes with
// equal indices share picks, load assignments and snapshots: the cost
// should follow the distinct indices, not the nodes.
//
//	go test ./xds -run '^$' -bench SubsetReconcile -benchmem -count 5
func BenchmarkSubsetReconcile(b *testing.B) {
	for _, tc := range []struct {
		alg    subsetting.Algorithm
		groups int
	}{
		{subsetting.Steady, 1}, {subsetting.Classic, 1}, {subsetting.Steady, 100},
	} {
		b.Run(fmt.Sprintf("%s/nodes=10000/endpoints=1000/groups=%d", tc.alg, tc.groups), func(b *testing.B) {
			benchSubsetReconcile(b, tc.alg, 10000, 1, 1000, 20, tc.groups)
		})
	}
	// The fleet benchmark's shape (bench/, issue 29): every node meets
	// every service of the pass, 500,000 picks.
	b.Run("steady/nodes=10000/services=50/endpoints=20/size=5", func(b *testing.B) {
		benchSubsetReconcile(b, subsetting.Steady, 10000, 50, 20, 5, 1)
	})
}

// BenchmarkSubsetStats measures one scrape of the subset balance metrics
// (xds_subset_connections and co.) at 10,000 nodes x 50 services: it
// holds the reconciler's lock, so a pass waits for it. computed: after
// a pass or a connect (the memo dropped each time); unchanged: the
// memo's answer, nothing having changed since the last scrape.
//
//	go test ./xds -run '^$' -bench SubsetStats -benchmem -count 5
func BenchmarkSubsetStats(b *testing.B) {
	s := benchSubsetServer(b, subsetting.Steady, 10000, 50, 20, 5, 1)
	for _, memo := range []bool{false, true} {
		b.Run(map[bool]string{false: "computed", true: "unchanged"}[memo], func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if !memo {
					s.rec.mu.Lock()
					s.rec.sub.stats = statsMemo{}
					s.rec.mu.Unlock()
				}
				if st := s.rec.subsetStats(s.reg.indexCounts(0).connected); len(st) != 50 {
					b.Fatalf("%d services in the stats, want 50", len(st))
				}
			}
		})
	}
}

func benchSubsetReconcile(b *testing.B, alg subsetting.Algorithm, nodes, services, endpoints, size, groups int) {
	s := benchSubsetServer(b, alg, nodes, services, endpoints, size, groups)
	w := world(services, endpoints)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		// Flip one endpoint: every pick of the service is recomputed.
		w.Services[0].Endpoints = slices.Clone(w.Services[0].Endpoints)
		ep := &w.Services[0].Endpoints[i%endpoints]
		ep.Health = map[bool]discovery.Health{true: discovery.HealthUnhealthy, false: discovery.HealthHealthy}[ep.Health == discovery.HealthHealthy]
		s.Update(w)
		s.rec.reconcile()
	}
	b.StopTimer()
	s.rec.mu.Lock()
	b.ReportMetric(float64(len(s.rec.sub.variants)), "snapshots")
	s.rec.mu.Unlock()
}

// benchSubsetServer is a server with nodes connected (over groups) and a
// world of services x endpoints reconciled once, every service with
// subset size size.
func benchSubsetServer(b *testing.B, alg subsetting.Algorithm, nodes, services, endpoints, size, groups int) *Server {
	s, err := New(Config{
		Settings: func(string) translate.ServiceSettings {
			return translate.ServiceSettings{SubsetSize: size, Subsetting: alg}
		},
		Logger: quietLogger(),
	})
	if err != nil {
		b.Fatal(err)
	}
	cb := s.cb
	for i := range nodes {
		cb.request(int64(i+1), &core.Node{Id: fmt.Sprintf("node-%05d", i), Cluster: fmt.Sprintf("g%d", i%groups)})
	}
	s.Update(world(services, endpoints))
	s.rec.reconcile()
	return s
}
