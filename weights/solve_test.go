package weights

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// solveCase is a small problem with its expected weights and splits.
type solveCase struct {
	p     Problem
	want  map[string][]uint32  // node -> weights
	share map[string][]float64 // node -> split, to 0.01; nil: not checked
}

func solveCases() map[string]solveCase {
	ep := func(id string, capacity, background, global float64) EndpointLoad {
		return EndpointLoad{ID: id, Capacity: capacity, Background: background, Global: global}
	}
	node := func(id string, rate float64, subset ...string) NodeLoad {
		n := NodeLoad{Node: id, Subset: subset}
		if rate > 0 {
			n.Rates = map[string]float64{subset[0]: rate}
		}
		return n
	}
	return map[string]solveCase{
		"equal capacities split equally": {
			p:    Problem{Endpoints: []EndpointLoad{ep("a", 1, 0, 1), ep("b", 1, 0, 1)}, Nodes: []NodeLoad{node("n", 10, "a", "b")}},
			want: map[string][]uint32{"n": {100, 100}},
		},
		"split follows capacity": {
			p:    Problem{Endpoints: []EndpointLoad{ep("a", 1, 0, 1), ep("b", 3, 0, 1)}, Nodes: []NodeLoad{node("n", 10, "a", "b")}},
			want: map[string][]uint32{"n": {100, 300}},
		},
		"background load pushes away": {
			p:    Problem{Endpoints: []EndpointLoad{ep("a", 10, 5, 1), ep("b", 10, 0, 1)}, Nodes: []NodeLoad{node("n", 10, "a", "b")}},
			want: map[string][]uint32{"n": {100, 300}},
		},
		"a saturated endpoint keeps the minimum weight": {
			p:     Problem{Endpoints: []EndpointLoad{ep("a", 10, 100, 1), ep("b", 10, 0, 1)}, Nodes: []NodeLoad{node("n", 10, "a", "b")}},
			want:  map[string][]uint32{"n": {100, 10000}},
			share: map[string][]float64{"n": {0, 1}},
		},
		"nodes share endpoints": {
			p: Problem{
				Endpoints: []EndpointLoad{ep("a", 1, 0, 1), ep("b", 1, 0, 1), ep("c", 1, 0, 1)},
				Nodes:     []NodeLoad{node("n1", 2, "a", "b"), node("n2", 1, "b", "c")},
			},
			share: map[string][]float64{"n1": {0.5, 0.5}, "n2": {0, 1}},
		},
		"unknown rates get the global weights": {
			p:    Problem{Endpoints: []EndpointLoad{ep("a", 5, 0, 1), ep("b", 1, 0, 2)}, Nodes: []NodeLoad{node("n", 0, "a", "b")}},
			want: map[string][]uint32{"n": {100, 200}},
		},
		"unknown capacity and global get the mean": {
			p:    Problem{Endpoints: []EndpointLoad{ep("a", 2, 0, 3), ep("b", 0, 0, 0), ep("c", 4, 0, 3)}, Nodes: []NodeLoad{node("n", 9, "a", "b"), node("m", 0, "b", "c")}},
			want: map[string][]uint32{"n": {100, 150}, "m": {100, 100}},
		},
		"subset members missing from the endpoints": {
			p:    Problem{Endpoints: []EndpointLoad{ep("a", 2, 0, 1)}, Nodes: []NodeLoad{node("n", 9, "a", "x")}},
			want: map[string][]uint32{"n": {100, 100}},
		},
		"rates outside the subset count": {
			p: Problem{
				Endpoints: []EndpointLoad{ep("a", 1, 0, 1), ep("b", 1, 0, 1), ep("c", 1, 1, 1)},
				Nodes:     []NodeLoad{{Node: "n", Subset: []string{"a", "b"}, Rates: map[string]float64{"c": 2}}, node("m", 2, "b", "c")},
			},
			share: map[string][]float64{"n": {5.0 / 6, 1.0 / 6}, "m": {2.0 / 3, 1.0 / 3}},
		},
		"damped half way from the previous weights": {
			p: Problem{
				Endpoints: []EndpointLoad{ep("a", 1, 0, 1), ep("b", 3, 0, 1)},
				Nodes:     []NodeLoad{{Node: "n", Subset: []string{"a", "b"}, Rates: map[string]float64{"a": 4}, Previous: []float64{7, 7}}},
			},
			want:  map[string][]uint32{"n": {100, 167}},
			share: map[string][]float64{"n": {0.375, 0.625}},
		},
		"empty subset": {
			p:    Problem{Endpoints: []EndpointLoad{ep("a", 1, 0, 1)}, Nodes: []NodeLoad{{Node: "n", Rates: map[string]float64{"a": 1}}}},
			want: map[string][]uint32{"n": {}},
		},
	}
}

func TestSolve(t *testing.T) {
	for name, tc := range solveCases() {
		t.Run(name, func(t *testing.T) {
			sol, err := Solve(tc.p, DefaultSolveConfig())
			if err != nil {
				t.Fatal(err)
			}
			for i, n := range sol.Nodes {
				if n.Node != tc.p.Nodes[i].Node || !slices.Equal(n.Subset, tc.p.Nodes[i].Subset) {
					t.Fatalf("node %d is %q %v, want %q %v", i, n.Node, n.Subset, tc.p.Nodes[i].Node, tc.p.Nodes[i].Subset)
				}
				if want, ok := tc.want[n.Node]; ok && !slices.Equal(n.Weights, want) {
					t.Errorf("%s: weights %v, want %v", n.Node, n.Weights, want)
				}
				for m, want := range tc.share[n.Node] {
					if math.Abs(n.Share[m]-want) > 0.01 {
						t.Errorf("%s: split %v, want %v", n.Node, n.Share, tc.share[n.Node])
						break
					}
				}
			}
		})
	}
}

func TestSolveValidate(t *testing.T) {
	ok := func() Problem {
		return Problem{
			Endpoints: []EndpointLoad{{ID: "a", Capacity: 1}, {ID: "b"}},
			Nodes:     []NodeLoad{{Node: "n", Subset: []string{"a", "b"}, Rates: map[string]float64{"a": 1}, Previous: []float64{1, 2}}},
		}
	}
	for name, tc := range map[string]struct {
		edit func(*Problem)
		want []string
	}{
		"valid":                   {edit: func(*Problem) {}},
		"empty endpoint ID":       {edit: func(p *Problem) { p.Endpoints[1].ID = "" }, want: []string{`endpoint ID "" empty or duplicate`}},
		"duplicate endpoint":      {edit: func(p *Problem) { p.Endpoints[1].ID = "a" }, want: []string{`endpoint ID "a"`}},
		"NaN capacity":            {edit: func(p *Problem) { p.Endpoints[0].Capacity = math.NaN() }, want: []string{"capacity NaN"}},
		"negative background":     {edit: func(p *Problem) { p.Endpoints[0].Background = -1 }, want: []string{"background -1"}},
		"infinite global":         {edit: func(p *Problem) { p.Endpoints[0].Global = math.Inf(1) }, want: []string{"global +Inf"}},
		"empty node ID":           {edit: func(p *Problem) { p.Nodes[0].Node = "" }, want: []string{`node ID ""`}},
		"duplicate node":          {edit: func(p *Problem) { p.Nodes = append(p.Nodes, p.Nodes[0]) }, want: []string{`node ID "n" empty or duplicate`}},
		"duplicate subset":        {edit: func(p *Problem) { p.Nodes[0].Subset[1] = "a" }, want: []string{`subset member "a"`}},
		"negative rate":           {edit: func(p *Problem) { p.Nodes[0].Rates["a"] = -1 }, want: []string{`rate to "a" is -1`}},
		"absurd rate":             {edit: func(p *Problem) { p.Nodes[0].Rates["a"] = 1e10 }, want: []string{`rate to "a" is 1e+10`}},
		"previous length":         {edit: func(p *Problem) { p.Nodes[0].Previous = []float64{1} }, want: []string{"1 previous weights for 2"}},
		"NaN previous":            {edit: func(p *Problem) { p.Nodes[0].Previous[0] = math.NaN() }, want: []string{"previous weight NaN"}},
		"several problems":        {edit: func(p *Problem) { p.Endpoints[1].ID = ""; p.Nodes[0].Node = "" }, want: []string{"endpoint ID", "node ID"}},
		"all zero previous is ok": {edit: func(p *Problem) { p.Nodes[0].Previous = []float64{0, 0} }},
	} {
		t.Run(name, func(t *testing.T) {
			p := ok()
			tc.edit(&p)
			checkErr(t, p.Validate(), ErrInvalidProblem, tc.want)
			_, err := Solve(p, DefaultSolveConfig())
			checkErr(t, err, ErrInvalidProblem, tc.want)
		})
	}
}

// TestSolveBalancesRandomFleet is the design guide's reference instance
// (§6): 100 backends of capacity 1-2x, 300 clients with lognormal rates
// (sigma 1), random subsets of 10. It logs max/mean utilization for round
// robin, global weights (capacity) and the per-node solution, as EDS
// integer weights.
func TestSolveBalancesRandomFleet(t *testing.T) {
	worst := 0.0
	for seed := range uint64(5) {
		f := randomFleet(rand.New(rand.NewPCG(seed, 42)), 100, 300, 10, 1)
		sol, err := Solve(f.problem(), DefaultSolveConfig())
		if err != nil {
			t.Fatal(err)
		}
		rr, gl, pn := f.spread(roundRobin(f)), f.spread(global(f)), f.spread(perNode(sol))
		t.Logf("seed %d: max/mean utilization: round robin %.3f, global %.3f, per-node %.3f (predicted %.3f; %d sweeps, converged %v)",
			seed, rr, gl, pn, sol.Spread, sol.Sweeps, sol.Converged)
		if math.Abs(pn-sol.Spread) > 1e-9 {
			t.Errorf("seed %d: Solution.Spread %v, recomputed %v", seed, sol.Spread, pn)
		}
		if !(pn < gl && pn < rr) {
			t.Errorf("seed %d: per-node %.3f not below global %.3f and round robin %.3f", seed, pn, gl, rr)
		}
		worst = max(worst, pn)
	}
	if worst > 1.05 {
		t.Errorf("per-node max/mean utilization %.3f, want <= 1.05", worst)
	}
}

// TestSolveRespectsSubsets: every node gets exactly one weight >= 1 per
// subset member, within MaxRatio, a split of its whole rate, and load lands
// only on its subset.
func TestSolveRespectsSubsets(t *testing.T) {
	f := randomFleet(rand.New(rand.NewPCG(9, 9)), 60, 200, 7, 1.5)
	p := f.problem()
	for i := range p.Nodes {
		if i%5 == 0 {
			p.Nodes[i].Rates = nil // unknown: global weights
		}
	}
	p.Endpoints = append(p.Endpoints, EndpointLoad{ID: "lonely", Capacity: 1, Background: 0.25})
	cfg := DefaultSolveConfig()
	cfg.MaxRatio = 20
	sol, err := Solve(p, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range sol.Nodes {
		if len(n.Weights) != len(p.Nodes[i].Subset) || len(n.Share) != len(n.Weights) {
			t.Fatalf("%s: %d weights, %d shares for %d members", n.Node, len(n.Weights), len(n.Share), len(p.Nodes[i].Subset))
		}
		lo, hi := slices.Min(n.Weights), slices.Max(n.Weights)
		if lo < 1 || float64(hi) > cfg.MaxRatio*float64(lo) {
			t.Fatalf("%s: weights %v", n.Node, n.Weights)
		}
		sum := 0.0
		for _, s := range n.Share {
			sum += s
		}
		if math.Abs(sum-1) > 1e-9 || n.Global != (p.Nodes[i].Rates == nil) {
			t.Fatalf("%s: shares sum to %v, global %v", n.Node, sum, n.Global)
		}
	}
	last := sol.Endpoints[len(sol.Endpoints)-1]
	if last.ID != "lonely" || last.Load != 0.25 || last.Utilization != 0.25 {
		t.Errorf("an endpoint in no subset: %+v, want only its background", last)
	}
}

// potential is the convex function the sweeps descend: sum over endpoints
// of load^2 / (2 * capacity), the loads from the nodes' exact splits.
func potential(f fleet, sol Solution) float64 {
	load := make([]float64, len(f.caps))
	for i, n := range sol.Nodes {
		for m, j := range f.subsets[i] {
			load[j] += f.rates[i] * n.Share[m]
		}
	}
	p := 0.0
	for j := range load {
		p += load[j] * load[j] / (2 * f.caps[j])
	}
	return p
}

// TestSolveConverges: each sweep lowers the potential (no oscillation), the
// sweeps stop on the tolerance, and at the end every node sends only to
// the least utilized members of its subset beyond its floor (the
// optimum's condition), on a loose instance (equal utilization reachable)
// and a tight one (few clients of very unequal rates).
func TestSolveConverges(t *testing.T) {
	for name, f := range map[string]fleet{
		"loose 100x300x10": randomFleet(rand.New(rand.NewPCG(5, 6)), 100, 300, 10, 1),
		"tight 100x40x3":   randomFleet(rand.New(rand.NewPCG(5, 7)), 100, 40, 3, 2),
	} {
		t.Run(name, func(t *testing.T) {
			cfg := DefaultSolveConfig()
			cfg.Tolerance = 1e-12
			prev := math.Inf(1)
			for sweeps := 1; sweeps <= 12; sweeps++ {
				cfg.MaxSweeps = sweeps
				sol, err := Solve(f.problem(), cfg)
				if err != nil {
					t.Fatal(err)
				}
				p := potential(f, sol)
				if p > prev*(1+1e-12) {
					t.Fatalf("potential rose from %v to %v at sweep %d", prev, p, sweeps)
				}
				prev = p
			}
			cfg.Tolerance, cfg.MaxSweeps = 1e-6, 1000
			sol, err := Solve(f.problem(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if !sol.Converged {
				t.Fatalf("not converged after %d sweeps", sol.Sweeps)
			}
			t.Logf("converged to 1e-6 in %d sweeps; max/mean utilization %.3f", sol.Sweeps, sol.Spread)
			checkOptimal(t, f, sol, DefaultMaxRatio)
		})
	}
}

// checkOptimal: no node sends more than the largest possible floor to a
// member whose utilization is above the lowest of its subset.
func checkOptimal(t *testing.T, f fleet, sol Solution, maxRatio float64) {
	t.Helper()
	load := make([]float64, len(f.caps))
	for i, n := range sol.Nodes {
		for m, j := range f.subsets[i] {
			load[j] += f.rates[i] * n.Share[m]
		}
	}
	for i, n := range sol.Nodes {
		lowest := math.Inf(1)
		for _, j := range f.subsets[i] {
			lowest = min(lowest, load[j]/f.caps[j])
		}
		floor := 1 / (maxRatio + float64(len(f.subsets[i])) - 1)
		for m, j := range f.subsets[i] {
			if u := load[j] / f.caps[j]; n.Share[m] > floor*1.01 && u > lowest*1.001 {
				t.Fatalf("%s sends %.4f of its rate to utilization %.4f, above its lowest %.4f",
					n.Node, n.Share[m], u, lowest)
			}
		}
	}
}

// TestSolveDampedLoop closes the loop: each round the nodes send by the
// weights of the previous round, which the next Solve damps from. From
// round robin, the spread falls every round (no oscillation) and ends
// within the target.
func TestSolveDampedLoop(t *testing.T) {
	f := randomFleet(rand.New(rand.NewPCG(11, 12)), 100, 300, 10, 1)
	p := f.problem()
	spreads := []float64{f.spread(roundRobin(f))}
	for i := range p.Nodes {
		p.Nodes[i].Previous = roundRobin(f)(i)
	}
	for range 10 {
		sol, err := Solve(p, DefaultSolveConfig())
		if err != nil {
			t.Fatal(err)
		}
		s := f.spread(perNode(sol))
		if s > spreads[len(spreads)-1]+1e-9 {
			t.Fatalf("spread rose: %.4f after %.4f", s, spreads)
		}
		spreads = append(spreads, s)
		for i := range sol.Nodes {
			p.Nodes[i].Previous = perNode(sol)(i)
		}
	}
	t.Logf("max/mean utilization by round, damping %v: %.3f", DefaultDamping, spreads)
	if last := spreads[len(spreads)-1]; last > 1.05 {
		t.Errorf("after 10 rounds max/mean utilization %.3f, want <= 1.05", last)
	}
}
