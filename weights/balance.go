package weights

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
)

// Defaults of BalanceConfig (see DefaultBalanceConfig).
const (
	DefaultBalanceIterations = 300  // multiplicative steps per Balance at most
	DefaultBalanceTolerance  = 1e-4 // converged when no weight moves by more than 0.01% in a step
)

// BalanceConfig tunes Balance. Start from DefaultBalanceConfig.
type BalanceConfig struct {
	// MaxRatio in [1, 1e6] bounds the largest over the smallest weight.
	MaxRatio float64
	// MaxIterations >= 1 bounds the steps.
	MaxIterations int
	// Tolerance in (0, 1): the steps stop once no weight moved by more
	// than this fraction.
	Tolerance float64
}

// DefaultBalanceConfig returns the defaults above and DefaultMaxRatio.
func DefaultBalanceConfig() BalanceConfig {
	return BalanceConfig{MaxRatio: DefaultMaxRatio, MaxIterations: DefaultBalanceIterations, Tolerance: DefaultBalanceTolerance}
}

// Validate reports every invalid field at once, wrapping ErrInvalidConfig.
func (c BalanceConfig) Validate() error {
	var errs []error
	if err := validateMaxRatio(c.MaxRatio); err != nil {
		errs = append(errs, err)
	}
	if c.MaxIterations < 1 {
		errs = append(errs, fmt.Errorf("balance iterations %d below 1", c.MaxIterations))
	}
	if !(c.Tolerance > 0 && c.Tolerance < 1) {
		errs = append(errs, fmt.Errorf("balance tolerance %v not in (0, 1)", c.Tolerance))
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrInvalidConfig, errors.Join(errs...))
}

// Balanced is Balance's output.
type Balanced struct {
	// Weights are the balanced global weights, aligned with
	// Problem.Endpoints, in the unit of their Global weights.
	Weights []float64
	// Before and After are the predicted max/mean utilization of the
	// endpoints of known capacity under the Global weights and under
	// Weights; 0 when nothing is loaded.
	Before, After float64
	Iterations    int  // steps done
	Converged     bool // the last step moved no weight by more than the tolerance
}

// Balance returns one global weight per endpoint that makes the predicted
// utilizations as equal as a single weight set sent to every node can,
// given each node's subset and measured rate (LRS).
//
// The model: a node of rate r splits it over its subset in proportion to
// the weights, the endpoints also serve their Background load, and
// utilization is load over Capacity. From the Global weights (the
// formula's capacity estimates), each step multiplies every weight of an
// endpoint of known capacity by mean/utilization (the mean over those
// endpoints) and clamps the weights to MaxRatio; endpoints of unknown
// capacity keep their Global weight. A node's total rate does not depend
// on the weights, so the inputs do not move with the result: each call
// solves from scratch, with no feedback loop through the fleet to
// oscillate. Nodes without rates are part of Background (NewProblem puts
// them there); Previous is not read.
func Balance(p Problem, cfg BalanceConfig) (Balanced, error) {
	if err := cfg.Validate(); err != nil {
		return Balanced{}, err
	}
	if err := p.Validate(); err != nil {
		return Balanced{}, err
	}
	s := newSolver(p, cfg.MaxRatio)
	known := make([]bool, len(s.ids))
	for i, e := range p.Endpoints {
		known[i] = e.Capacity > 0
	}
	w, next := slices.Clone(s.glob), make([]float64, len(s.glob))
	best := slices.Clone(w)
	out := Balanced{Before: s.predict(w, known)}
	out.After = out.Before
	for stale := 0; out.Iterations < cfg.MaxIterations && stale < balancePatience; {
		out.Iterations++
		moved := s.rebalance(w, next, known, cfg.MaxRatio) // uses the loads predict left
		spread := s.predict(w, known)
		if spread < out.After {
			out.After, stale = spread, 0
			copy(best, w)
		} else {
			stale++
		}
		if moved <= cfg.Tolerance {
			out.Converged = true
			break
		}
	}
	out.Weights = best[:len(p.Endpoints)]
	return out, nil
}

// balancePatience is how many steps in a row Balance takes without
// improving on its best weights before it stops: the steps are a
// heuristic, and once the weight bounds bind they can wander off.
const balancePatience = 20

// predict sets s.load to the loads under global weights w and returns the
// max/mean utilization over the known endpoints (0 when none is loaded).
func (s *solver) predict(w []float64, known []bool) float64 {
	copy(s.load, s.bg)
	for _, n := range s.nodes {
		if n.rate == 0 {
			continue
		}
		idx := s.idx[n.off : n.off+n.k]
		sum := 0.0
		for _, j := range idx {
			sum += w[j]
		}
		for _, j := range idx {
			s.load[j] += n.rate * w[j] / sum
		}
	}
	hi, total, n := 0.0, 0.0, 0
	for j, ok := range known {
		if ok {
			u := s.load[j] / s.cap[j]
			hi, total, n = max(hi, u), total+u, n+1
		}
	}
	if !(total > 0) {
		return 0
	}
	return hi / (total / float64(n))
}

// rebalance takes one step from the loads predict(w) left in s.load:
// w_j *= sqrt(mean/u_j) on the known endpoints, then
// clamps every weight into [g/sqrt(maxRatio), g*sqrt(maxRatio)] around
// their geometric mean g, so that no endpoint whose clients cannot fill
// it (its weight grows without bound) drags the others to the floor. It
// returns the largest relative move; next is scratch of len(w).
func (s *solver) rebalance(w, next []float64, known []bool, maxRatio float64) float64 {
	load, capacity := 0.0, 0.0
	for j, ok := range known {
		if ok {
			load, capacity = load+s.load[j], capacity+s.cap[j]
		}
	}
	if !(load > 0) {
		return 0
	}
	mean := load / capacity
	logSum := 0.0
	for j := range w {
		next[j] = w[j]
		if u := s.load[j] / s.cap[j]; known[j] && u > 0 {
			next[j] = w[j] * math.Sqrt(mean/u)
		} else if known[j] {
			next[j] = w[j] * 2 // idle: nobody sends to it yet
		}
		logSum += math.Log(next[j])
	}
	g, half := math.Exp(logSum/float64(len(w))), math.Sqrt(maxRatio)
	moved := 0.0
	for j := range w {
		v := min(max(next[j], g/half), g*half)
		moved = max(moved, math.Abs(v-w[j])/w[j])
		w[j] = v
	}
	return moved
}

// BalanceService balances one service's global weights (Balance) with
// its nodes' subsets (node -> endpoint ids) and fresh rates
// (Tracker.NodeRates), and returns a copy of st with the balanced Float,
// the integer Weight scaled with cfg.MaxRatio, Balance (the factor over
// the formula's weight) and PredictedSpread set. Endpoints without their
// own weight (blackout, expired, no reports) keep their fallback weight.
// It returns st unchanged and false when no node's rate is known.
func BalanceService(st ServiceTable, subsets map[string][]string, rates map[string]map[string]float64, cfg BalanceConfig) (ServiceTable, bool, error) {
	nodes := make([]NodeLoad, 0, len(subsets))
	anyRate := false
	for _, node := range slices.Sorted(maps.Keys(subsets)) {
		if sub := subsets[node]; len(sub) > 0 {
			nodes = append(nodes, NodeLoad{Node: node, Subset: sub, Rates: rates[node]})
			anyRate = anyRate || len(rates[node]) > 0
		}
	}
	if !anyRate {
		return st, false, nil
	}
	p := NewProblem(st, nodes) // blackout, expired, ...: capacity unknown, keeps its fallback weight
	b, err := Balance(p, cfg)
	if err != nil {
		return st, false, err
	}
	out := st
	out.Rows = slices.Clone(st.Rows)
	out.PredictedSpread = b.After
	ints := make([]uint32, len(b.Weights))
	scaleInto(ints, b.Weights, cfg.MaxRatio)
	for i := range out.Rows {
		r := &out.Rows[i]
		if r.Float > 0 {
			r.Balance = b.Weights[i] / r.Float
		}
		r.Float, r.Weight = b.Weights[i], ints[i]
	}
	return out, true, nil
}
