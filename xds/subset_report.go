package xds

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"
)

// SubsetReport is /debug/subsets?service=S: which nodes have which
// endpoints of a service, and how many connections each endpoint gets.
// Connections and Balance count every connected node; Nodes holds a
// bounded selection of the nodes (SubsetQuery), by id.
type SubsetReport struct {
	Service string `json:"service"`
	// Subsetting is false when every node gets every endpoint (subset_size
	// 0, or at least the endpoint count).
	Subsetting bool             `json:"subsetting"`
	Algorithm  string           `json:"algorithm,omitempty"`
	SubsetSize int              `json:"subset_size"`
	Balance    Balance          `json:"balance"`
	Endpoints  []SubsetEndpoint `json:"endpoints"`
	Nodes      []SubsetNode     `json:"nodes"`
	// KnownNodes counts every known node; Truncated is true when Nodes
	// holds fewer than that.
	KnownNodes int  `json:"known_nodes"`
	Truncated  bool `json:"truncated"`
}

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

// DefaultReportNodes and MaxReportNodes bound SubsetReport.Nodes: the
// /debug/subsets default and the most a query gets.
const (
	DefaultReportNodes = 100
	MaxReportNodes     = 10000
)

// SubsetQuery selects the nodes of a SubsetReport.
type SubsetQuery struct {
	// Node, when set, selects that node alone (none when it is unknown).
	Node string
	// Limit is how many nodes, the first by id: at most MaxReportNodes,
	// and none when <= 0 (Connections and Balance still count them all).
	Limit int
}

// Subsets reports the subsets of a service with the nodes q selects, or
// false if the service is unknown. Its cost follows the distinct client
// indices of the connected nodes and the nodes selected, not every node.
func (s *Server) Subsets(service string, q SubsetQuery) (SubsetReport, bool) {
	limit := min(q.Limit, MaxReportNodes)
	if q.Node != "" {
		limit = 0
	}
	idx := s.reg.indexCounts(limit)
	nodes := make([]Node, 0, len(idx.ids)+1)
	if q.Node != "" {
		idx.ids = []string{q.Node}
	}
	for _, id := range idx.ids {
		if n, ok := s.reg.get(id); ok { // gone since: left out
			nodes = append(nodes, n)
		}
	}
	return s.rec.subsetReport(service, idx, nodes)
}

func (r *reconciler) subsetReport(service string, idx indexed, nodes []Node) (SubsetReport, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.memo[service]
	if !ok {
		return SubsetReport{}, false
	}
	rep := SubsetReport{Service: service, SubsetSize: e.set.SubsetSize, Endpoints: []SubsetEndpoint{}, Nodes: []SubsetNode{},
		KnownNodes: idx.known}
	if e.plan != nil {
		rep.Subsetting, rep.Algorithm = true, string(e.plan.alg)
	}
	ids, srv := memoEndpoints(e)
	conns := connections(e, len(ids), idx.connected)
	pos := make(map[string]int, len(ids))
	counts := make([]int, 0, len(ids))
	for i, id := range ids {
		pos[id] = i
		rep.Endpoints = append(rep.Endpoints, SubsetEndpoint{ID: id, Serving: srv[i], Connections: conns[i], Nodes: []string{}})
		if srv[i] {
			counts = append(counts, conns[i])
		}
	}
	rep.Balance = balance(counts)
	for _, ep := range e.src.Endpoints {
		rep.Endpoints[pos[ep.ID]].Health = ep.Health.String()
		if e.plan != nil {
			if slot, ok := e.plan.slots[ep.ID]; ok {
				rep.Endpoints[pos[ep.ID]].Slot = &slot
			}
		}
	}
	for _, n := range nodes {
		sn, members, ok := nodeShare(e, ids, n)
		if !ok {
			continue
		}
		rep.Nodes = append(rep.Nodes, sn)
		if sn.Connected {
			for _, m := range members {
				rep.Endpoints[m].Nodes = append(rep.Endpoints[m].Nodes, n.ID)
			}
		}
	}
	rep.Truncated = len(rep.Nodes) < rep.KnownNodes
	return rep, true
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

// subsetCollector exports the balance of every subset service at scrape time.
type subsetCollector struct {
	s                           *Server
	conns, ratio, replacedNodes *prometheus.Desc
}

func newSubsetCollector(s *Server) *subsetCollector {
	return &subsetCollector{s: s,
		conns: prometheus.NewDesc("xds_subset_connections",
			"Connections per serving endpoint of a subset service over connected nodes: min, mean and max.",
			[]string{"service", "stat"}, nil),
		ratio: prometheus.NewDesc("xds_subset_balance_ratio",
			"Max over mean connections per serving endpoint of a subset service (1 is perfect balance).",
			[]string{"service"}, nil),
		replacedNodes: prometheus.NewDesc("xds_subset_replacement_nodes",
			"Connected nodes that get replacement endpoints of a service because members of their subset are not serving.",
			[]string{"service"}, nil),
	}
}

func (c *subsetCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.conns
	ch <- c.ratio
	ch <- c.replacedNodes
}

func (c *subsetCollector) Collect(ch chan<- prometheus.Metric) {
	for _, st := range c.s.rec.subsetStats(c.s.reg.indexCounts(0).connected) {
		ch <- prometheus.MustNewConstMetric(c.conns, prometheus.GaugeValue, float64(st.bal.Min), st.service, "min")
		ch <- prometheus.MustNewConstMetric(c.conns, prometheus.GaugeValue, st.bal.Mean, st.service, "mean")
		ch <- prometheus.MustNewConstMetric(c.conns, prometheus.GaugeValue, float64(st.bal.Max), st.service, "max")
		ch <- prometheus.MustNewConstMetric(c.ratio, prometheus.GaugeValue, st.bal.MaxOverMean, st.service)
		ch <- prometheus.MustNewConstMetric(c.replacedNodes, prometheus.GaugeValue, float64(st.replaced), st.service)
	}
}

type subsetStat struct {
	service  string
	bal      Balance
	replaced int
}

// subsetStats computes the balance of every subset service from the
// connected nodes per client index (indexed.connected; the nodes not
// indexed yet, -1, are left out). Nodes with equal indices share choices,
// so the work is per distinct index.
func (r *reconciler) subsetStats(perIndex map[int]int) []subsetStat {
	delete(perIndex, -1)
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]subsetStat, 0, len(r.sub.planned))
	for _, p := range r.sub.planned {
		st := subsetStat{service: p.sp.name}
		conns := make([]int, len(p.sp.serving))
		for idx, n := range perIndex {
			c, err := p.sp.choose(idx)
			if err != nil {
				continue
			}
			for _, m := range c.members {
				conns[m] += n
			}
			if c.replaced > 0 {
				st.replaced += n
			}
		}
		counts := conns[:0]
		for i, k := range conns {
			if p.sp.serving[i] {
				counts = append(counts, k)
			}
		}
		st.bal = balance(counts)
		out = append(out, st)
	}
	return out
}
