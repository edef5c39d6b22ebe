package xds

import (
	"slices"

	"github.com/xds-server/xds-server/translate"
)

// Balance summarizes connections per serving endpoint over connected nodes.
type Balance struct {
	Min         int     `json:"min"`
	Mean        float64 `json:"mean"`
	Max         int     `json:"max"`
	MaxOverMean float64 `json:"max_over_mean"` // 1 is perfect; 0 when nothing is connected
}

// SubsetEndpoint is one endpoint of the service.
type SubsetEndpoint struct {
	ID      string `json:"id"`
	Health  string `json:"health"`
	Serving bool   `json:"serving"`
	// Connections counts connected nodes that have the endpoint in their
	// EDS; they connect to it when it is serving.
	Connections int `json:"connections"`
	// Nodes are the connected nodes of the report's Nodes that have the
	// endpoint in their EDS.
	Nodes []string `json:"nodes"`
	// Slot is the endpoint's stable slot (steady), its place on the ring.
	Slot *int `json:"slot,omitempty"`
}

// SubsetNode is one node's share of the service.
type SubsetNode struct {
	ID        string `json:"id"`
	Group     string `json:"group"`
	Index     int    `json:"index"`
	Connected bool   `json:"connected"`
	// Subset is the node's subset proper, in its own order; Replacements
	// are the next candidates it also gets while subset members are not
	// serving; Endpoints is everything in its EDS (ids, sorted).
	Subset       []string `json:"subset"`
	Replacements []string `json:"replacements"`
	Endpoints    []string `json:"endpoints"`
}

// balance summarizes connection counts.
func balance(counts []int) Balance {
	if len(counts) == 0 {
		return Balance{}
	}
	b := Balance{Min: slices.Min(counts), Max: slices.Max(counts)}
	sum := 0
	for _, c := range counts {
		sum += c
	}
	b.Mean = float64(sum) / float64(len(counts))
	if b.Mean > 0 {
		b.MaxOverMean = float64(b.Max) / b.Mean
	}
	return b
}

func everyone(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

func names(ids []string, idx []int) []string {
	out := make([]string, len(idx))
	for k, i := range idx {
		out[k] = ids[i]
	}
	return out
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
