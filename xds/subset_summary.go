package xds

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
