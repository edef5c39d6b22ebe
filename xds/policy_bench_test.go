package xds

import (
	"fmt"
	"slices"
	"testing"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/xds-server/xds-server/discovery"
	"github.com/xds-server/xds-server/policy"
)

// BenchmarkPolicyReconcile: 1,000 proxyless nodes and 200 services of 20
// endpoints; with policies=all, every service is a 90/10 canary (a
// resolver with subsets v1 and v2 by Service.Meta.version, a splitter),
// so each serves three clusters and load assignments and a route with
// weighted clusters. Each op flips one endpoint's health and rebuilds
// what every node is sent; the ratio of the two is the cost of policies.
//
//	go test ./xds -run '^$' -bench PolicyReconcile -benchmem -count 5
func BenchmarkPolicyReconcile(b *testing.B) {
	for _, all := range []bool{false, true} {
		b.Run(fmt.Sprintf("nodes=1000/services=200/endpoints=20/policies=%v", map[bool]string{false: "none", true: "all"}[all]), func(b *testing.B) {
			benchPolicyReconcile(b, 1000, 200, 20, all)
		})
	}
}

func benchPolicyReconcile(b *testing.B, nodes, services, endpoints int, withPolicies bool) {
	s, err := New(Config{Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	for i := range nodes {
		s.cb.request(int64(i+1), &core.Node{Id: fmt.Sprintf("node-%05d", i), Cluster: "c"})
	}
	w := world(services, endpoints)
	for _, svc := range w.Services {
		for k := range svc.Endpoints {
			svc.Endpoints[k].Meta = map[string]string{"version": []string{"v1", "v2"}[k%5/4]} // 4 v1 : 1 v2
		}
	}
	if withPolicies {
		pols := map[string]policy.Policy{}
		for _, svc := range w.Services {
			p := canaryPolicy(b, policy.Split{Weight: 90, ServiceSubset: "v1"}, policy.Split{Weight: 10, ServiceSubset: "v2"})
			p.Service = svc.Name
			pols[svc.Name] = p
		}
		s.SetPolicies(pols)
	}
	s.Update(w)
	s.rec.reconcile()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		svc := &w.Services[i%services]
		svc.Endpoints = slices.Clone(svc.Endpoints)
		ep := &svc.Endpoints[i%endpoints]
		ep.Health = map[bool]discovery.Health{true: discovery.HealthUnhealthy, false: discovery.HealthHealthy}[ep.Health == discovery.HealthHealthy]
		s.Update(w)
		s.rec.reconcile()
	}
	b.StopTimer()
	s.rec.mu.Lock()
	b.ReportMetric(float64(len(s.rec.memo)), "clusters")
	s.rec.mu.Unlock()
}
