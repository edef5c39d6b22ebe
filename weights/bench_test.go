package weights

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// BenchmarkSolve is the target: the per-node solver for 1,000
// nodes x 1,000 endpoints, subsets of 20, lognormal rates, capacities
// 1-2x, default config (input building excluded). One op must stay under
// 200 ms.
func BenchmarkSolve(b *testing.B) {
	f := randomFleet(rand.New(rand.NewPCG(1, 2)), 1000, 1000, 20, 1)
	p := f.problem()
	cfg := DefaultSolveConfig()
	var sol Solution
	for b.Loop() {
		var err error
		if sol, err = Solve(p, cfg); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(sol.Sweeps), "sweeps")
	b.ReportMetric(sol.Spread, "max/mean")
}

// BenchmarkBalance is global balancing on the solver's fleet: 1,000 nodes
// x 1,000 endpoints, subsets of 20; one op is one update of one service.
func BenchmarkBalance(b *testing.B) {
	f := randomFleet(rand.New(rand.NewPCG(1, 2)), 1000, 1000, 20, 1)
	p := f.problem()
	cfg := DefaultBalanceConfig()
	var out Balanced
	for b.Loop() {
		var err error
		if out, err = Balance(p, cfg); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(out.Iterations), "steps")
	b.ReportMetric(out.Before, "max/mean-before")
	b.ReportMetric(out.After, "max/mean")
}

// BenchmarkIngest is the tracker's share of the ingestion target: 10,000
// endpoints (100 services x 100) each observing one backend report, then
// one Update, per op: one second's work at one report per endpoint per
// second (the decoding of ORCA, LRS or HTTP is not included).
func BenchmarkIngest(b *testing.B) {
	tr, err := NewTracker(DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	var reports []Report
	for s := range 100 {
		name := fmt.Sprintf("svc-%d", s)
		eps := make([]Endpoint, 100)
		for e := range eps {
			eps[e] = Endpoint{ID: fmt.Sprintf("10.%d.0.%d:8080", s, e)}
			reports = append(reports, Report{Service: name, Endpoint: eps[e].ID, QPS: 100 + float64(e), CPU: 0.5})
		}
		if err := tr.SetEndpoints(name, eps); err != nil {
			b.Fatal(err)
		}
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for b.Loop() {
		now = now.Add(time.Second)
		for _, r := range reports {
			r.At = now
			if err := tr.Observe(r, now); err != nil {
				b.Fatal(err)
			}
		}
		tr.Update(now)
	}
}
