package xds

import "testing"

// BenchmarkConsoleSubsets measures what the console's service page asks
// each second, the summary (SubsetSummary with 500 node ids, plus SubsetOf
// one node), against /debug/subsets' report (Subsets: its default of 100
// nodes, one node, and all 10,000), for one service of 1,000 endpoints
// (subset size 20) and 10,000 connected nodes.
//
//	go test ./xds -run '^$' -bench ConsoleSubsets -benchmem
func BenchmarkConsoleSubsets(b *testing.B) {
	s := steadyFleet(b, 10000)
	s.Update(world(1, 1000))
	s.rec.reconcile()
	for name, q := range map[string]SubsetQuery{
		"report":       {Limit: DefaultReportNodes}, // /debug/subsets?service=S
		"report-node":  {Node: "node-04242"},
		"report-limit": {Limit: MaxReportNodes},
	} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				if _, ok := s.Subsets("svc-000", q); !ok {
					b.Fatal("no report")
				}
			}
		})
	}
	b.Run("summary", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if _, ok := s.SubsetSummary("svc-000", 500); !ok {
				b.Fatal("no summary")
			}
			if _, ok := s.SubsetOf("svc-000", "node-04242"); !ok {
				b.Fatal("no node")
			}
		}
	})
}
