package xds

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/xds-server/xds-server/translate"
	"github.com/xds-server/xds-server/weights"
)

// BenchmarkWeightPushes is the push amplification target: 1,000 nodes,
// one service of 100 endpoints (subsets of 20), every endpoint reporting
// every second (ORCA: qps and a noisy utilization, so weights move by more
// than min_change most seconds) and, in per_node mode, every node
// reporting its rates (LRS) every second, for 60 simulated seconds. The
// runner (min_push_interval 5s) publishes through the server; after each
// second the server reconciles, and every node's load assignment version
// is compared with the one before. Reported: the shortest time between
// two pushes to one node (must be >= 5 s) and pushes per node per minute.
func BenchmarkWeightPushes(b *testing.B) {
	for _, mode := range []string{"global", "per_node"} {
		b.Run(mode, func(b *testing.B) {
			var gap time.Duration
			var perMin float64
			for b.Loop() {
				gap, perMin = simulatePushes(b, mode == "per_node")
			}
			b.ReportMetric(gap.Seconds(), "min-gap-s")
			b.ReportMetric(perMin, "pushes/node/min")
		})
	}
}

const (
	pushNodes    = 1000
	pushInterval = 5 * time.Second
	pushSeconds  = 60
)

func simulatePushes(b *testing.B, perNode bool) (time.Duration, float64) {
	b.Helper()
	s, err := New(Config{Logger: quietLogger(), Registerer: prometheus.NewRegistry(),
		Settings: func(string) translate.ServiceSettings { return translate.ServiceSettings{SubsetSize: 20} }})
	if err != nil {
		b.Fatal(err)
	}
	for i := range pushNodes {
		connect(s, int64(i+1), fmt.Sprintf("node-%04d", i))
	}
	w := world(1, 100)
	s.Update(w)
	s.rec.reconcile()
	cfg := weights.DefaultConfig()
	cfg.BlackoutPeriod = 0
	tr, err := weights.NewTracker(cfg)
	if err != nil {
		b.Fatal(err)
	}
	svc := w.Services[0]
	eps := make([]weights.Endpoint, len(svc.Endpoints))
	for i, ep := range svc.Endpoints {
		eps[i] = weights.Endpoint{ID: ep.ID}
	}
	if err := tr.SetEndpoints(svc.Name, eps); err != nil {
		b.Fatal(err)
	}
	planner, err := weights.NewPerNode(weights.DefaultSolveConfig(), weights.DefaultMinChange)
	if err != nil {
		b.Fatal(err)
	}
	rc := weights.RunnerConfig{Tracker: tr, MinPushInterval: pushInterval,
		Publish: func(t weights.Table) { s.SetWeights(t.Map()) }}
	if perNode {
		rc.PublishNodes = func(t weights.Table) bool {
			st, _ := t.Service(svc.Name)
			m, changed, err := planner.Plan(st, s.SubsetsView().NodeSubsets(svc.Name), tr.NodeRates(svc.Name, t.At))
			if err != nil {
				b.Fatal(err)
			}
			if changed {
				s.SetNodeWeights(NodeWeights{svc.Name: m})
			}
			return changed
		}
	}
	runner, err := weights.NewRunner(rc)
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	subsets := s.SubsetsView().NodeSubsets(svc.Name)
	last := map[string]string{}
	lastPush := map[string]time.Time{}
	gap, pushes := time.Duration(pushSeconds)*time.Second, 0
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for sec := range pushSeconds {
		now := t0.Add(time.Duration(sec) * time.Second)
		for _, ep := range svc.Endpoints {
			r := weights.Report{Service: svc.Name, Endpoint: ep.ID, At: now, QPS: 100, CPU: 0.5 * (1 + 0.2*(rng.Float64()-0.5))}
			if err := tr.Observe(r, now); err != nil {
				b.Fatal(err)
			}
		}
		if perNode {
			for node, sub := range subsets {
				rate := 50 * (1 + 0.2*(rng.Float64()-0.5))
				for _, id := range sub {
					r := weights.Report{Service: svc.Name, Endpoint: id, Node: node, At: now, QPS: rate / float64(len(sub))}
					if err := tr.Observe(r, now); err != nil {
						b.Fatal(err)
					}
				}
			}
		}
		runner.Step(now)
		s.rec.reconcile()
		for node := range subsets {
			v := versions(b, s, node)[types.Endpoint]
			if old, ok := last[node]; ok && old != v {
				pushes++
				if p, ok := lastPush[node]; ok {
					gap = min(gap, now.Sub(p))
				}
				lastPush[node] = now
			}
			last[node] = v
		}
	}
	return gap, float64(pushes) / pushNodes * 60 / pushSeconds
}
