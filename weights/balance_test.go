package weights

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func TestBalance(t *testing.T) {
	ep := func(id string, capacity, global float64) EndpointLoad {
		return EndpointLoad{ID: id, Capacity: capacity, Global: global}
	}
	node := func(name string, rate float64, subset ...string) NodeLoad {
		rates := map[string]float64{}
		for _, id := range subset {
			rates[id] = rate / float64(len(subset))
		}
		return NodeLoad{Node: name, Subset: subset, Rates: rates}
	}
	for name, tc := range map[string]struct {
		p         Problem
		wantAfter float64 // predicted max/mean at most
		check     func(t *testing.T, w []float64)
	}{
		"capacity weights cannot serve two unequal subsets; balanced ones can": {
			// a+b serve 100 req/s, b+c 120; capacity weights put 0.6 on a and 0.5 on c.
			p: Problem{
				Endpoints: []EndpointLoad{ep("a", 100, 100), ep("b", 200, 200), ep("c", 100, 100)},
				Nodes:     []NodeLoad{node("n1", 100, "a", "b"), node("n2", 120, "b", "c")},
			},
			wantAfter: 1.001,
		},
		"an endpoint of unknown capacity keeps its global weight": {
			p: Problem{
				Endpoints: []EndpointLoad{ep("a", 100, 100), ep("b", 100, 100), ep("x", 0, 37)},
				Nodes:     []NodeLoad{node("n1", 90, "a", "x"), node("n2", 30, "b", "x")},
			},
			wantAfter: 1.001,
			check: func(t *testing.T, w []float64) {
				if w[2] != 37 {
					t.Errorf("x moved from its global weight 37 to %v", w[2])
				}
			},
		},
		"background load is served before the nodes' split": {
			p: Problem{
				Endpoints: []EndpointLoad{{ID: "a", Capacity: 100, Global: 1, Background: 40}, ep("b", 100, 1)},
				Nodes:     []NodeLoad{node("n1", 60, "a", "b")},
			},
			wantAfter: 1.001,
			check: func(t *testing.T, w []float64) {
				if share := w[0] / (w[0] + w[1]); math.Abs(share-1.0/6) > 0.01 {
					t.Errorf("a gets %.3f of n1, want 1/6 (it already serves 40 of the 100 req/s)", share)
				}
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			b, err := Balance(tc.p, DefaultBalanceConfig())
			if err != nil {
				t.Fatal(err)
			}
			if b.After > tc.wantAfter {
				t.Errorf("predicted max/mean %.4f, want <= %.4f (before %.4f, %d steps)", b.After, tc.wantAfter, b.Before, b.Iterations)
			}
			if b.After > b.Before+1e-12 {
				t.Errorf("balanced %.4f is worse than the global weights' %.4f", b.After, b.Before)
			}
			if len(b.Weights) != len(tc.p.Endpoints) {
				t.Fatalf("%d weights for %d endpoints", len(b.Weights), len(tc.p.Endpoints))
			}
			if tc.check != nil {
				tc.check(t, b.Weights)
			}
		})
	}
}

// On random fleets (subsets of unequal clients, capacities 1-2x) the
// balanced weights are never predicted worse than the global ones, stay
// within MaxRatio, and bring max/mean near 1.
func TestBalanceRandomFleets(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 1))
		var p Problem
		for j := range 50 {
			c := 100 * (1 + rng.Float64())
			p.Endpoints = append(p.Endpoints, EndpointLoad{ID: fmt.Sprint("e", j), Capacity: c, Global: c})
		}
		for i := range 150 {
			n := NodeLoad{Node: fmt.Sprint("n", i), Rates: map[string]float64{}}
			for _, j := range rng.Perm(50)[:5] {
				id := fmt.Sprint("e", j)
				n.Subset = append(n.Subset, id)
				n.Rates[id] = math.Exp(0.7*rng.NormFloat64()) * 8
			}
			p.Nodes = append(p.Nodes, n)
		}
		cfg := DefaultBalanceConfig()
		cfg.MaxRatio = 20
		b, err := Balance(p, cfg)
		if err != nil {
			t.Fatal(err)
		}
		lo, hi := math.Inf(1), 0.0
		for _, w := range b.Weights {
			lo, hi = min(lo, w), max(hi, w)
		}
		if hi/lo > cfg.MaxRatio*(1+1e-9) {
			t.Errorf("seed %d: weights span %.2f, over max ratio %v", seed, hi/lo, cfg.MaxRatio)
		}
		if b.After > b.Before || b.After > 1.15 {
			t.Errorf("seed %d: predicted max/mean %.3f (global weights %.3f), want <= min(1.15, before)", seed, b.After, b.Before)
		}
	}
}

func TestBalanceConfigValidate(t *testing.T) {
	for name, cfg := range map[string]BalanceConfig{
		"max ratio below 1":   {MaxRatio: 0.5, MaxIterations: 1, Tolerance: 1e-3},
		"no iterations":       {MaxRatio: 10, MaxIterations: 0, Tolerance: 1e-3},
		"tolerance too large": {MaxRatio: 10, MaxIterations: 1, Tolerance: 1},
	} {
		if err := cfg.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: got %v, want ErrInvalidConfig", name, err)
		}
	}
	if err := DefaultBalanceConfig().Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
}

// balanceFixture is a tracker with endpoints a (capacity 100) and b
// (capacity 200), past blackout, and nodes n1 -> {a, b} at 100 req/s and
// n2 -> {b} at 50 req/s.
func balanceFixture(t *testing.T) (*Tracker, map[string][]string, time.Time) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.BlackoutPeriod, cfg.Smoothing = 0, 1
	tr, err := NewTracker(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.SetEndpoints("api", []Endpoint{{ID: "a"}, {ID: "b"}}); err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_000_000, 0)
	for _, r := range []Report{
		{Endpoint: "a", QPS: 50, CPU: 0.5}, {Endpoint: "b", QPS: 100, CPU: 0.5},
		{Endpoint: "a", Node: "n1", QPS: 50}, {Endpoint: "b", Node: "n1", QPS: 50}, {Endpoint: "b", Node: "n2", QPS: 50},
	} {
		r.Service, r.At = "api", now
		if err := tr.Observe(r, now); err != nil {
			t.Fatal(err)
		}
	}
	return tr, map[string][]string{"n1": {"a", "b"}, "n2": {"b"}}, now
}

func TestBalanceService(t *testing.T) {
	tr, subsets, now := balanceFixture(t)
	st, _ := tr.Update(now).Service("api")
	if _, ok, err := BalanceService(st, subsets, nil, DefaultBalanceConfig()); ok || err != nil {
		t.Fatalf("without node rates: balanced %v, err %v; want unchanged", ok, err)
	}
	b, ok, err := BalanceService(st, subsets, tr.NodeRates("api", now), DefaultBalanceConfig())
	if err != nil || !ok {
		t.Fatalf("balanced %v, err %v", ok, err)
	}
	// 150 req/s over 300 capacity: 0.5 each. b already has 50 from n2, so
	// a must take 50 of n1's 100 and b the other 50: equal weights.
	ra, _ := b.Row("a")
	rb, _ := b.Row("b")
	if got := float64(ra.Weight) / float64(rb.Weight); math.Abs(got-1) > 0.02 {
		t.Errorf("weight a/b = %.3f (a %d, b %d), want 1", got, ra.Weight, rb.Weight)
	}
	if ra.Balance == 0 || b.PredictedSpread == 0 || b.PredictedSpread > 1.01 {
		t.Errorf("balance factor %v, predicted spread %v: want set, spread ~1", ra.Balance, b.PredictedSpread)
	}
	if orig, _ := st.Row("a"); orig.Balance != 0 {
		t.Error("BalanceService modified its input table")
	}
}

// The publish stage (Runner.Offer) publishes the table the solve stage
// gave it, so the push policy compares balanced weights.
func TestRunnerOffersTheSolvedTable(t *testing.T) {
	tr, subsets, now := balanceFixture(t)
	var got Table
	r, err := NewRunner(RunnerConfig{Tracker: tr, Registerer: prometheus.NewRegistry(),
		Publish: func(t Table) { got = t }})
	if err != nil {
		t.Fatal(err)
	}
	tab := r.Track(now)
	st, _ := tab.Service("api")
	b, _, err := BalanceService(st, subsets, tr.NodeRates("api", tab.At), DefaultBalanceConfig())
	if err != nil {
		t.Fatal(err)
	}
	tab.Services = []ServiceTable{b}
	if !r.Offer(now, tab) {
		t.Fatal("the first offer published nothing")
	}
	if st, _ := got.Service("api"); st.PredictedSpread == 0 {
		t.Error("the published table is not the solved one")
	}
}
