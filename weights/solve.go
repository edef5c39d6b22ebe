package weights

import (
	"errors"
	"fmt"
	"math"
)

// Defaults of SolveConfig (see DefaultSolveConfig).
const (
	DefaultDamping   = 0.5  // half way from the previous split to the optimum per Solve
	DefaultMaxSweeps = 100  // Gauss-Seidel sweeps per Solve at most
	DefaultTolerance = 1e-3 // converged when no node moves more than 0.1% of its rate in a sweep
)

// ErrInvalidProblem is wrapped by the errors of Problem.Validate.
var ErrInvalidProblem = errors.New("weights: invalid problem")

// SolveConfig tunes Solve. Start from DefaultSolveConfig.
type SolveConfig struct {
	// Damping in (0, 1] is the fraction of the way from a node's Previous
	// split to the optimum that one Solve goes: 1 jumps to the optimum.
	// Nodes without Previous go all the way.
	Damping float64
	// MaxRatio in [1, 1e6] bounds each node's max/min integer weight.
	MaxRatio float64
	// MaxSweeps >= 1 bounds the Gauss-Seidel sweeps over all nodes.
	MaxSweeps int
	// Tolerance in (0, 1): the sweeps stop once no node's split moved by
	// more than this fraction of its rate (sum of absolute changes).
	Tolerance float64
}

// DefaultSolveConfig returns the defaults above and DefaultMaxRatio.
func DefaultSolveConfig() SolveConfig {
	return SolveConfig{
		Damping: DefaultDamping, MaxRatio: DefaultMaxRatio,
		MaxSweeps: DefaultMaxSweeps, Tolerance: DefaultTolerance,
	}
}

// Validate reports every invalid field at once, wrapping ErrInvalidConfig.
func (c SolveConfig) Validate() error {
	var errs []error
	if !(c.Damping > 0 && c.Damping <= 1) {
		errs = append(errs, fmt.Errorf("damping %v not in (0, 1]", c.Damping))
	}
	if err := validateMaxRatio(c.MaxRatio); err != nil {
		errs = append(errs, err)
	}
	if c.MaxSweeps < 1 {
		errs = append(errs, fmt.Errorf("max sweeps %d below 1", c.MaxSweeps))
	}
	if !(c.Tolerance > 0 && c.Tolerance < 1) {
		errs = append(errs, fmt.Errorf("tolerance %v not in (0, 1)", c.Tolerance))
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrInvalidConfig, errors.Join(errs...))
}

// Problem is the per-node solver's input for one service.
type Problem struct {
	// Endpoints describes the endpoints; a subset member missing here has
	// unknown capacity and global weight.
	Endpoints []EndpointLoad
	// Nodes are the clients to solve for; they are swept in this order.
	Nodes []NodeLoad
}

// EndpointLoad is what the solver knows of one endpoint.
type EndpointLoad struct {
	ID string
	// Capacity is requests/s at utilization 1 (qps/utilization, Row.
	// Capacity), >= 0; 0 = unknown: the mean of the known, or 1.
	Capacity float64
	// Background is requests/s (>= 0) the endpoint serves for clients not
	// in Nodes or whose rates are unknown; the solver cannot move it.
	Background float64
	// Global is the endpoint's global weight (Row.Float, any unit), the
	// fallback of nodes without rates, >= 0; 0 = unknown: the mean of
	// the known, or 1.
	Global float64
}

// NodeLoad is one client of the service.
type NodeLoad struct {
	Node string
	// Subset is the endpoint IDs the node uses (no duplicates); the node
	// is weighted over these only.
	Subset []string
	// Rates is the node's measured requests/s to each endpoint (LRS),
	// >= 0. Only their sum, the node's rate, matters (rates to endpoints
	// outside the subset count: the node will send them to its subset).
	// nil or a zero sum means unknown: the node gets the global weights.
	Rates map[string]float64
	// Previous is the weights last sent to the node, aligned with Subset,
	// any scale; nil (or all zero) if none. Solve damps toward them.
	Previous []float64
}

// Solution is the per-node solver's output.
type Solution struct {
	Nodes     []NodeWeights    // aligned with Problem.Nodes
	Endpoints []EndpointResult // Problem.Endpoints, then subset members missing there
	Sweeps    int              // Gauss-Seidel sweeps done
	Converged bool             // the last sweep moved less than the tolerance
	// Spread is the predicted max/mean utilization over Endpoints when
	// every node sends by its integer Weights; 0 when nothing is loaded.
	Spread float64
}

// NodeWeights is the split of one node over its subset.
type NodeWeights struct {
	Node    string
	Subset  []string  // the problem's subset
	Weights []uint32  // EDS weights aligned with Subset, >= 1
	Share   []float64 // the damped split, fractions of the node's rate summing to 1
	Rate    float64   // the node's measured requests/s; 0 if unknown
	Global  bool      // the node's rate is unknown: global weights
}

// EndpointResult is the predicted load of one endpoint.
type EndpointResult struct {
	ID          string
	Capacity    float64 // requests/s at utilization 1, unknowns filled in
	Load        float64 // predicted requests/s, background included
	Utilization float64 // Load / Capacity
}

// Validate reports the problem's invalid entries, wrapping
// ErrInvalidProblem (at most 20 are listed).
func (p Problem) Validate() error {
	var errs []error
	add := func(err error) {
		if len(errs) < 20 {
			errs = append(errs, err)
		}
	}
	seen := make(map[string]bool, len(p.Endpoints))
	for _, e := range p.Endpoints {
		if e.ID == "" || seen[e.ID] {
			add(fmt.Errorf("endpoint ID %q empty or duplicate", e.ID))
		}
		seen[e.ID] = true
		if !nonNegative(e.Capacity) || !nonNegative(e.Background) || !nonNegative(e.Global) {
			add(fmt.Errorf("endpoint %q: capacity %v, background %v, global %v: want finite numbers >= 0",
				e.ID, e.Capacity, e.Background, e.Global))
		}
	}
	nodes := make(map[string]bool, len(p.Nodes))
	for _, n := range p.Nodes {
		if n.Node == "" || nodes[n.Node] {
			add(fmt.Errorf("node ID %q empty or duplicate", n.Node))
		}
		nodes[n.Node] = true
		if err := n.validate(); err != nil {
			add(fmt.Errorf("node %q: %w", n.Node, err))
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrInvalidProblem, errors.Join(errs...))
}

func (n NodeLoad) validate() error {
	if len(n.Subset) > MaxEndpoints {
		return fmt.Errorf("subset of %d endpoints (at most %d)", len(n.Subset), MaxEndpoints)
	}
	in := make(map[string]bool, len(n.Subset))
	for _, id := range n.Subset {
		if id == "" || in[id] {
			return fmt.Errorf("subset member %q empty or duplicate", id)
		}
		in[id] = true
	}
	for id, r := range n.Rates {
		if !nonNegative(r) || r > MaxRate {
			return fmt.Errorf("rate to %q is %v (want [0, %v])", id, r, MaxRate)
		}
	}
	if n.Previous != nil && len(n.Previous) != len(n.Subset) {
		return fmt.Errorf("%d previous weights for %d subset members", len(n.Previous), len(n.Subset))
	}
	for _, w := range n.Previous {
		if !nonNegative(w) {
			return fmt.Errorf("previous weight %v (want a finite number >= 0)", w)
		}
	}
	return nil
}

func nonNegative(v float64) bool { return v >= 0 && !math.IsInf(v, 0) }

// Solve computes, for every node, the split of its rate over its subset
// that drives all endpoints toward equal utilization (see the package
// documentation for the method), damped toward each node's Previous split
// and scaled to EDS weights >= 1. Nodes with unknown rates get the global
// weights of their subset. Errors are those of the Validate methods.
func Solve(p Problem, cfg SolveConfig) (Solution, error) {
	if err := cfg.Validate(); err != nil {
		return Solution{}, err
	}
	if err := p.Validate(); err != nil {
		return Solution{}, err
	}
	s := newSolver(p, cfg.MaxRatio)
	sol := Solution{Nodes: make([]NodeWeights, len(p.Nodes))}
	sol.Sweeps, sol.Converged = s.run(cfg.MaxSweeps, cfg.Tolerance)
	s.output(p, cfg, &sol)
	return sol, nil
}
