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

// BenchmarkSubsetsView is the weights pipeline's read of node subsets at
// 10,000 nodes x 50 services (100 endpoints each, steady subsets of 20):
// pass is one reconcile pass after a health flip (publishing the view
// included); read-cold is one service's NodeSubsets from the view of a
// pass that retranslated it, read-warm from the view of a pass that
// changed another service (the first read of a view computes it).
//
//	go test ./xds -run '^$' -bench SubsetsView -benchmem
func BenchmarkSubsetsView(b *testing.B) {
	s := steadyFleet(b, 10000)
	w := world(50, 100)
	s.Update(w)
	s.rec.reconcile()
	flip := func(i int) {
		svc := &w.Services[i%50]
		svc.Endpoints = slices.Clone(svc.Endpoints)
		ep := &svc.Endpoints[i%100]
		ep.Health = map[bool]discovery.Health{true: discovery.HealthUnhealthy, false: discovery.HealthHealthy}[ep.Health == discovery.HealthHealthy]
		s.Update(w)
	}
	b.Run("pass", func(b *testing.B) {
		b.ReportAllocs()
		for i := range b.N {
			flip(i)
			s.rec.reconcile()
		}
	})
	for name, svc := range map[string]int{"read-cold": 7, "read-warm": 8} { // svc-007 retranslated, or another
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for i := range b.N {
				b.StopTimer()
				flip(svc + 50*i)
				s.rec.reconcile()
				b.StartTimer()
				if got := s.SubsetsView().NodeSubsets("svc-007"); len(got) != 10000 {
					b.Fatalf("%d nodes", len(got))
				}
			}
		})
	}
}

// steadyFleet is a server with steady subsets of 20 and nodes connected
// ("node-00000"... in one group).
func steadyFleet(b *testing.B, nodes int) *Server {
	b.Helper()
	s, err := New(Config{
		Settings: func(string) translate.ServiceSettings {
			return translate.ServiceSettings{SubsetSize: 20, Subsetting: subsetting.Steady}
		},
		Logger: quietLogger(),
	})
	if err != nil {
		b.Fatal(err)
	}
	for i := range nodes {
		s.cb.request(int64(i+1), &core.Node{Id: fmt.Sprintf("node-%05d", i), Cluster: "g"})
	}
	return s
}
