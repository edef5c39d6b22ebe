package weights

import "math"

// solver is Solve's working state, with endpoints and subsets as indices.
type solver struct {
	ids   []string  // endpoint IDs by index
	cap   []float64 // capacity by endpoint, > 0 (unknowns filled in)
	bg    []float64 // background load by endpoint, requests/s
	glob  []float64 // global weight by endpoint, > 0 (unknowns filled in)
	load  []float64 // bg + the nodes' split, requests/s
	nodes []span    // by node
	idx   []int32   // the subsets, flattened: endpoint indices
	x     []float64 // the split, flattened: requests/s (known nodes only)
	// maxRatio bounds the ratio of a node's largest to smallest share.
	maxRatio float64
	// scratch for one node
	level []float64
	order []int
}

// span is one node's slice of idx and x.
type span struct {
	off, k int
	rate   float64 // requests/s; 0 = unknown
	floor  float64 // each member's least share of rate, in (0, 1/k]; only falls
}

func newSolver(p Problem, maxRatio float64) *solver {
	s := &solver{maxRatio: maxRatio}
	index := make(map[string]int32, len(p.Endpoints))
	add := func(e EndpointLoad) int32 {
		i := int32(len(s.ids))
		index[e.ID] = i
		s.ids = append(s.ids, e.ID)
		s.cap = append(s.cap, e.Capacity)
		s.bg = append(s.bg, e.Background)
		s.glob = append(s.glob, e.Global)
		return i
	}
	for _, e := range p.Endpoints {
		add(e)
	}
	kmax := 0
	for _, n := range p.Nodes {
		sp := span{off: len(s.idx), k: len(n.Subset)}
		kmax = max(kmax, sp.k)
		for _, id := range n.Subset {
			i, ok := index[id]
			if !ok {
				i = add(EndpointLoad{ID: id})
			}
			s.idx = append(s.idx, i)
		}
		for _, r := range n.Rates {
			sp.rate += r
		}
		if sp.k == 0 || !(sp.rate > 0) || math.IsInf(sp.rate, 0) {
			sp.rate = 0
		}
		sp.floor = 1 / (maxRatio + float64(sp.k) - 1)
		s.nodes = append(s.nodes, sp)
	}
	fillUnknown(s.cap)
	fillUnknown(s.glob)
	s.load = make([]float64, len(s.ids))
	s.x = make([]float64, len(s.idx))
	s.level = make([]float64, kmax)
	s.order = make([]int, kmax)
	return s
}

// fillUnknown replaces the zeros of v with the mean of its positive
// entries, or 1 when there are none.
func fillUnknown(v []float64) {
	sum, n := 0.0, 0
	for _, x := range v {
		if x > 0 {
			sum, n = sum+x, n+1
		}
	}
	mean := 1.0
	if n > 0 {
		mean = sum / float64(n)
	}
	for i, x := range v {
		if !(x > 0) {
			v[i] = mean
		}
	}
}

// run starts every known node with a split proportional to capacity and
// sweeps the nodes in order, each taking its exact best response (water
// filling), until a sweep moves no node by more than tol of its rate.
func (s *solver) run(maxSweeps int, tol float64) (sweeps int, converged bool) {
	for _, n := range s.nodes {
		if n.rate == 0 {
			continue
		}
		total := 0.0
		for _, j := range s.idx[n.off : n.off+n.k] {
			total += s.cap[j]
		}
		for t, j := range s.idx[n.off : n.off+n.k] {
			s.x[n.off+t] = n.rate * s.cap[j] / total
		}
	}
	for sweeps < maxSweeps {
		s.recomputeLoad() // no drift from the incremental updates
		sweeps++
		worst := 0.0
		for i := range s.nodes {
			if s.nodes[i].rate > 0 {
				worst = max(worst, s.respond(&s.nodes[i]))
			}
		}
		if worst <= tol {
			return sweeps, true
		}
	}
	return sweeps, false
}

func (s *solver) recomputeLoad() {
	copy(s.load, s.bg)
	for _, n := range s.nodes {
		for t, j := range s.idx[n.off : n.off+n.k] {
			s.load[j] += s.x[n.off+t]
		}
	}
}

// respond replaces node n's split with its best response to the others'
// loads above its floor: every member gets at least floor = n.floor *
// rate, and the rest is water-filled: with a_j endpoint j's utilization
// without n's load but with its floor, the level lambda solves sum_j cap_j
// * max(0, lambda - a_j) = rate - k*floor, and x_j = floor + cap_j *
// max(0, lambda - a_j). Then n.floor falls to the largest share over
// maxRatio if that is lower: the floors never rise, so each response
// minimizes the potential over a set holding the current split, which
// therefore never rises. It returns the moved fraction of the rate.
func (s *solver) respond(n *span) float64 {
	idx, x := s.idx[n.off:n.off+n.k], s.x[n.off:n.off+n.k]
	level, order := s.level[:n.k], s.order[:n.k]
	floor := n.floor * n.rate
	rest := max(0, n.rate-float64(n.k)*floor)
	for t, j := range idx {
		level[t] = max(0, (s.load[j]-x[t]+floor)/s.cap[j])
		order[t] = t
		for u := t; u > 0 && level[order[u]] < level[order[u-1]]; u-- { // insertion sort
			order[u], order[u-1] = order[u-1], order[u]
		}
	}
	var sumC, sumCA, lambda float64
	for m, t := range order {
		c := s.cap[idx[t]]
		sumC, sumCA = sumC+c, sumCA+c*level[t]
		lambda = (rest + sumCA) / sumC
		if m+1 == len(order) || lambda <= level[order[m+1]] {
			break
		}
	}
	moved, top := 0.0, 0.0
	for t, j := range idx {
		nx := floor + s.cap[j]*max(0, lambda-level[t])
		moved += math.Abs(nx - x[t])
		s.load[j] += nx - x[t]
		x[t] = nx
		top = max(top, nx)
	}
	n.floor = min(n.floor, top/n.rate/s.maxRatio)
	return moved / n.rate
}

// output fills sol's nodes (damped shares and integer weights) and the
// predicted endpoint loads under those weights.
func (s *solver) output(p Problem, cfg SolveConfig, sol *Solution) {
	pred := make([]float64, len(s.ids))
	copy(pred, s.bg)
	for i, n := range s.nodes {
		pn := p.Nodes[i]
		nw := NodeWeights{
			Node: pn.Node, Subset: pn.Subset, Rate: n.rate, Global: n.rate == 0,
			Weights: make([]uint32, n.k), Share: make([]float64, n.k),
		}
		idx := s.idx[n.off : n.off+n.k]
		for t, j := range idx {
			if nw.Global {
				nw.Share[t] = s.glob[j]
			} else {
				nw.Share[t] = s.x[n.off+t]
			}
		}
		normalize(nw.Share)
		if prev := normalized(pn.Previous); prev != nil {
			for t := range nw.Share {
				nw.Share[t] = prev[t] + cfg.Damping*(nw.Share[t]-prev[t])
			}
		}
		scaleInto(nw.Weights, nw.Share, cfg.MaxRatio)
		sum := 0.0
		for _, w := range nw.Weights {
			sum += float64(w)
		}
		for t, j := range idx {
			pred[j] += n.rate * float64(nw.Weights[t]) / sum
		}
		sol.Nodes[i] = nw
	}
	sol.Endpoints = make([]EndpointResult, len(s.ids))
	maxU, sumU := 0.0, 0.0
	for j, id := range s.ids {
		u := pred[j] / s.cap[j]
		sol.Endpoints[j] = EndpointResult{ID: id, Capacity: s.cap[j], Load: pred[j], Utilization: u}
		maxU, sumU = max(maxU, u), sumU+u
	}
	if sumU > 0 {
		sol.Spread = maxU / (sumU / float64(len(s.ids)))
	}
}

// normalize scales v to sum 1 (all equal if its sum is not positive).
func normalize(v []float64) {
	sum := 0.0
	for _, x := range v {
		sum += x
	}
	for i := range v {
		if sum > 0 {
			v[i] /= sum
		} else {
			v[i] = 1 / float64(len(v))
		}
	}
}

// normalized returns a normalized copy of v, or nil if v sums to 0.
func normalized(v []float64) []float64 {
	sum := 0.0
	for _, x := range v {
		sum += x
	}
	if !(sum > 0) || math.IsInf(sum, 0) {
		return nil
	}
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = x / sum
	}
	return out
}
