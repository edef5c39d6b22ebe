package xds

import (
	"slices"

	"github.com/xds-server/xds-server/translate"
)

// MaxSummaryNodes bounds SubsetSummary.Nodes.
const MaxSummaryNodes = 1000

// SubsetSummary is a service's subsets in brief, for a page that polls
// it: connections per endpoint and their balance, and the ids of a
// bounded number of nodes, without the per-node lists of SubsetReport.
// Its cost follows the distinct client indices of the connected nodes
// (one subset choice each, memoized by the reconciler), not the nodes.
type SubsetSummary struct {
	Service    string  `json:"service"`
	Subsetting bool    `json:"subsetting"`
	Algorithm  string  `json:"algorithm,omitempty"`
	SubsetSize int     `json:"subset_size"`
	Balance    Balance `json:"balance"`
	// Connections counts, per endpoint id, the connected nodes that have
	// the endpoint in their EDS.
	Connections map[string]int `json:"connections"`
	// Nodes are the ids of the first (by id) known nodes, at most the
	// maxNodes asked (and MaxSummaryNodes); KnownNodes counts them all.
	Nodes      []string `json:"nodes"`
	KnownNodes int      `json:"known_nodes"`
}

// SubsetSummary summarizes the subsets of a service with at most maxNodes
// node ids (<= 0 or above MaxSummaryNodes: MaxSummaryNodes), or false if
// the service is unknown.
func (s *Server) SubsetSummary(service string, maxNodes int) (SubsetSummary, bool) {
	if maxNodes <= 0 || maxNodes > MaxSummaryNodes {
		maxNodes = MaxSummaryNodes
	}
	idx := s.reg.indexCounts(maxNodes)
	return s.rec.subsetSummary(service, idx)
}

// SubsetOf is one node's share of a service, or false if the service or
// the node is unknown.
func (s *Server) SubsetOf(service, node string) (SubsetNode, bool) {
	n, ok := s.reg.get(node)
	if !ok {
		return SubsetNode{}, false
	}
	return s.rec.subsetOf(service, n)
}

// indexed is what a summary needs of the registry: connected nodes per
// client index (-1: not indexed yet), and the first ids.
type indexed struct {
	connected map[int]int
	ids       []string // sorted, at most the max asked
	known     int
}

// indexCounts counts connected nodes per index and keeps the smallest
// limit ids (none when limit <= 0), without copying the nodes.
func (r *registry) indexCounts(limit int) indexed {
	r.mu.Lock()
	defer r.mu.Unlock()
	limit = max(limit, 0)
	// A few ids of many: insert each into the sorted few. Else sort them all.
	few := limit*8 < len(r.nodes)
	out := indexed{connected: map[int]int{}, known: len(r.nodes), ids: make([]string, 0, min(len(r.nodes), limit))}
	if !few {
		out.ids = make([]string, 0, len(r.nodes))
	}
	for id, n := range r.nodes {
		if n.Streams > 0 {
			out.connected[max(n.Index, -1)]++
		}
		switch {
		case !few:
			out.ids = append(out.ids, id)
		case limit > 0:
			out.ids = keepSmallest(out.ids, id, limit)
		}
	}
	if !few {
		slices.Sort(out.ids)
		out.ids = out.ids[:min(len(out.ids), limit)]
	}
	return out
}

// keepSmallest inserts id into sorted ids, keeping at most limit of the
// smallest.
func keepSmallest(ids []string, id string, limit int) []string {
	if len(ids) == limit && id >= ids[len(ids)-1] {
		return ids
	}
	i, _ := slices.BinarySearch(ids, id)
	if len(ids) == limit {
		ids = ids[:len(ids)-1]
	}
	return slices.Insert(ids, i, id)
}

func (r *reconciler) subsetSummary(service string, idx indexed) (SubsetSummary, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.memo[service]
	if !ok {
		return SubsetSummary{}, false
	}
	sum := SubsetSummary{Service: service, SubsetSize: e.set.SubsetSize, Nodes: idx.ids, KnownNodes: idx.known}
	ids, srv := memoEndpoints(e)
	conns := connections(e, len(ids), idx.connected)
	if e.plan != nil {
		sum.Subsetting, sum.Algorithm = true, string(e.plan.alg)
	}
	sum.Connections = make(map[string]int, len(ids))
	counts := make([]int, 0, len(ids))
	for i, id := range ids {
		sum.Connections[id] = conns[i]
		if srv[i] {
			counts = append(counts, conns[i])
		}
	}
	sum.Balance = balance(counts)
	return sum, true
}

// connections counts, per endpoint (memoEndpoints order, n of them), the
// connected nodes that have it in their EDS, from the connected nodes per
// client index (-1: not indexed, which get every endpoint); one subset
// choice per index. r.mu is held.
func connections(e memoEntry, n int, connected map[int]int) []int {
	conns := make([]int, n)
	for index, k := range connected {
		if e.plan == nil || index < 0 {
			for i := range conns {
				conns[i] += k
			}
			continue
		}
		c, err := e.plan.choose(index)
		if err != nil {
			continue // such a node gets nothing of the service (nodeShare)
		}
		for _, m := range c.members {
			conns[m] += k
		}
	}
	return conns
}

func (r *reconciler) subsetOf(service string, n Node) (SubsetNode, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.memo[service]
	if !ok {
		return SubsetNode{}, false
	}
	ids, _ := memoEndpoints(e)
	sn, _, ok := nodeShare(e, ids, n)
	return sn, ok
}

// nodeShare is node n's share of the service of e, whose endpoint ids are
// ids (memoEndpoints), and the positions in ids of the endpoints in its
// EDS; false when the plan cannot choose for its index. r.mu is held.
func nodeShare(e memoEntry, ids []string, n Node) (SubsetNode, []int, bool) {
	sn := SubsetNode{ID: n.ID, Group: n.Group, Index: n.Index, Connected: n.Streams > 0}
	members, subset, repl := everyone(len(ids)), everyone(len(ids)), []int(nil)
	if e.plan != nil && n.Index >= 0 {
		c, err := e.plan.choose(n.Index)
		if err != nil {
			return SubsetNode{}, nil, false
		}
		members, subset, repl = c.members, c.subset, c.order[len(c.subset):]
	}
	sn.Subset, sn.Replacements, sn.Endpoints = names(ids, subset), names(ids, repl), names(ids, members)
	return sn, members, true
}

// memoEndpoints are a service's endpoint ids and whether each serves, in
// plan order with subsetting, else in discovery order.
func memoEndpoints(e memoEntry) ([]string, []bool) {
	if sp := e.plan; sp != nil {
		return sp.plan.Backends(), sp.serving
	}
	ids := make([]string, 0, len(e.src.Endpoints))
	srv := make([]bool, 0, len(e.src.Endpoints))
	for _, ep := range e.src.Endpoints {
		ids = append(ids, ep.ID)
		srv = append(srv, serving(translate.HealthStatus(ep.Health)))
	}
	return ids, srv
}
