package weights

import (
	"errors"
	"maps"
	"math"
	"slices"
	"sync"
)

// PerNode plans the per-node weights of services in per-node mode: it
// builds each service's Problem from the table, the nodes' subsets and
// their rates, solves it damped toward what each node was last sent, and
// keeps a node's previous weights unless its new split moved some
// endpoint's share by more than MinChange (so nodes are not pushed for
// noise). It remembers the last solution per service for the debug page.
// Safe for concurrent use; no I/O, no clock.
type PerNode struct {
	solve     SolveConfig
	minChange float64

	mu   sync.Mutex
	sent map[string]map[string]map[string]uint32 // service -> node -> weights last sent
	last map[string]Solution                     // service -> last solution
}

// NewPerNode returns a planner, or the error of cfg.Validate. minChange is
// a relative share change in [0, 1); 0 means any change.
func NewPerNode(cfg SolveConfig, minChange float64) (*PerNode, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if !(minChange >= 0 && minChange < 1) {
		return nil, errors.Join(ErrInvalidConfig, errors.New("per-node min change not in [0, 1)"))
	}
	return &PerNode{solve: cfg, minChange: minChange,
		sent: map[string]map[string]map[string]uint32{}, last: map[string]Solution{}}, nil
}

// Plan solves one service: svc is its row of the table, subsets its nodes'
// serving endpoints (node -> endpoint ids), rates their fresh client rates
// (Tracker.NodeRates). It returns the weights every node should have now
// (node -> endpoint id -> weight), leaving out nodes whose rate is unknown
// (they get the global weights), and whether any node's weights differ
// from what Plan returned last time.
//
// While endpoints of svc are in blackout and none has its own weight yet,
// the capacities are coming but not yet trusted: every node keeps the
// global weights. (Without any utilization source, capacities stay
// unknown, hence equal, and the nodes are planned.)
func (p *PerNode) Plan(svc ServiceTable, subsets map[string][]string, rates map[string]map[string]float64) (map[string]map[string]uint32, bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	prev := p.sent[svc.Name]
	warming := slices.ContainsFunc(svc.Rows, func(r Row) bool { return r.Reason == ReasonBlackout }) &&
		!slices.ContainsFunc(svc.Rows, func(r Row) bool { return r.Reason.Own() })
	nodes := make([]NodeLoad, 0, len(subsets))
	for _, node := range slices.Sorted(maps.Keys(subsets)) {
		sub := subsets[node]
		if len(sub) == 0 {
			continue
		}
		n := NodeLoad{Node: node, Subset: sub}
		if !warming {
			n.Rates = rates[node]
		}
		if old := prev[node]; old != nil {
			n.Previous = make([]float64, len(sub))
			for k, id := range sub {
				n.Previous[k] = float64(old[id])
			}
		}
		nodes = append(nodes, n)
	}
	sol, err := Solve(NewProblem(svc, nodes), p.solve)
	if err != nil {
		return nil, false, err
	}
	out := make(map[string]map[string]uint32, len(sol.Nodes))
	changed := len(prev) != 0 && len(nodes) == 0
	for _, nw := range sol.Nodes {
		if nw.Global {
			changed = changed || prev[nw.Node] != nil
			continue
		}
		w := make(map[string]uint32, len(nw.Subset))
		for k, id := range nw.Subset {
			w[id] = nw.Weights[k]
		}
		if old := prev[nw.Node]; old != nil && !sharesMoved(old, w, p.minChange) {
			w = old
		} else {
			changed = true
		}
		out[nw.Node] = w
	}
	for node := range prev {
		if _, ok := out[node]; !ok {
			changed = true // left, or fell back to global weights
		}
	}
	p.sent[svc.Name], p.last[svc.Name] = out, sol
	return out, changed, nil
}

// Forget drops what the planner knows of services not in keep.
func (p *PerNode) Forget(keep map[string]bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for name := range p.sent {
		if !keep[name] {
			delete(p.sent, name)
			delete(p.last, name)
		}
	}
}

// Node returns the last solution's entry of node in service, and the
// predicted loads of the endpoints in its subset.
func (p *PerNode) Node(service, node string) (NodeWeights, []EndpointResult, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	sol, ok := p.last[service]
	if !ok {
		return NodeWeights{}, nil, false
	}
	for _, nw := range sol.Nodes {
		if nw.Node != node {
			continue
		}
		var eps []EndpointResult
		for _, e := range sol.Endpoints {
			if slices.Contains(nw.Subset, e.ID) {
				eps = append(eps, e)
			}
		}
		return nw, eps, true
	}
	return NodeWeights{}, nil, false
}

// sharesMoved reports whether some endpoint's share of the total moved by
// more than minChange relative to its old share, or the members differ.
func sharesMoved(old, new map[string]uint32, minChange float64) bool {
	if len(old) != len(new) {
		return true
	}
	var so, sn float64
	for id, w := range new {
		if _, ok := old[id]; !ok {
			return true
		}
		sn += float64(w)
		so += float64(old[id])
	}
	for id, w := range new {
		o, n := float64(old[id])/so, float64(w)/sn
		if d := math.Abs(n - o); d > minChange*o || (minChange == 0 && w != old[id]) {
			return true
		}
	}
	return false
}

// NodeDebug is what /debug/weights?service=S&node=ID shows of one node.
type NodeDebug struct {
	Service string `json:"service"`
	Node    string `json:"node"`
	// Global is true when the node's rate is unknown (no fresh LRS
	// reports): it gets the service's global weights.
	Global bool `json:"global_fallback"`
	// Rate is the node's measured requests/s (LRS); 0 if unknown.
	Rate      float64             `json:"rate"`
	Endpoints []NodeEndpointDebug `json:"endpoints"` // the node's subset, in the solver's order
}

// NodeEndpointDebug is one member of a node's subset.
type NodeEndpointDebug struct {
	Endpoint string  `json:"endpoint"`
	Weight   uint32  `json:"weight"`         // the EDS weight sent to the node (the solver's, or the one kept)
	Share    float64 `json:"share"`          // the solver's split: fraction of the node's rate
	Capacity float64 `json:"capacity"`       // requests/s at utilization 1
	Load     float64 `json:"predicted_load"` // requests/s from every node once all follow their weights
	Util     float64 `json:"predicted_utilization"`
}

// Debug returns what node was last planned in service.
func (p *PerNode) Debug(service, node string) (NodeDebug, bool) {
	nw, eps, ok := p.Node(service, node)
	if !ok {
		return NodeDebug{}, false
	}
	p.mu.Lock()
	sent := p.sent[service][node]
	p.mu.Unlock()
	d := NodeDebug{Service: service, Node: node, Global: nw.Global, Rate: nw.Rate,
		Endpoints: make([]NodeEndpointDebug, len(nw.Subset))}
	for k, id := range nw.Subset {
		e := NodeEndpointDebug{Endpoint: id, Weight: nw.Weights[k], Share: nw.Share[k]}
		if w, ok := sent[id]; ok {
			e.Weight = w
		}
		if i := slices.IndexFunc(eps, func(r EndpointResult) bool { return r.ID == id }); i >= 0 {
			e.Capacity, e.Load, e.Util = eps[i].Capacity, eps[i].Load, eps[i].Utilization
		}
		d.Endpoints[k] = e
	}
	return d, true
}
