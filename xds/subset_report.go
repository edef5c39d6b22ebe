package xds

import (
	"github.com/prometheus/client_golang/prometheus"
	"slices"
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

type subsetStat struct {
	service  string
	bal      Balance
	replaced int
}

// subsetStats computes the balance of every subset service from the
// connected nodes per client index (indexed.connected; the nodes not
// indexed yet, -1, are left out). Nodes with equal indices share choices,
// so the work is per distinct index.
//
// It runs at every scrape, with the reconciler's lock held, over every
// subset service and index (500,000 picks at 10,000 nodes x 50
// services, 28 ms): the indices are sorted into a slice first, outside
// the lock, so that the loop reads memory in order, and a scrape after
// no pass and no change in the connected nodes per index gets the last
// scrape's figures (statsMemo) at the cost of comparing the counts.
func (r *reconciler) subsetStats(perIndex map[int]int) []subsetStat {
	counts := make([]indexCount, 0, len(perIndex))
	for idx, n := range perIndex {
		if idx >= 0 {
			counts = append(counts, indexCount{idx, n})
		}
	}
	slices.SortFunc(counts, func(a, b indexCount) int { return a.idx - b.idx })
	r.mu.Lock()
	defer r.mu.Unlock()
	if m := &r.sub.stats; m.out != nil && m.rebase == r.sub.rebases && slices.Equal(m.counts, counts) {
		return m.out
	}
	out := make([]subsetStat, 0, len(r.sub.planned))
	for _, p := range r.sub.planned {
		st := subsetStat{service: p.sp.name}
		conns := make([]int, len(p.sp.serving))
		for _, ic := range counts {
			idx, n := ic.idx, ic.n
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
	r.sub.stats = statsMemo{rebase: r.sub.rebases, counts: counts, out: out}
	return out
}

// indexCount is the connected nodes with one client index.
type indexCount struct{ idx, n int }

// statsMemo is subsetStats' last answer (read only once made), for the
// pass (subsets.rebases) and the connected nodes per index it was
// computed on.
type statsMemo struct {
	rebase uint64
	counts []indexCount
	out    []subsetStat
}

// subsetCollector exports the balance of every subset service at scrape time.
type subsetCollector struct {
	rec                         *reconciler
	reg                         *registry
	conns, ratio, replacedNodes *prometheus.Desc
}

func newSubsetCollector(rec *reconciler, reg *registry) *subsetCollector {
	return &subsetCollector{rec: rec, reg: reg,
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
	for _, st := range c.rec.subsetStats(c.reg.indexCounts(0).connected) {
		ch <- prometheus.MustNewConstMetric(c.conns, prometheus.GaugeValue, float64(st.bal.Min), st.service, "min")
		ch <- prometheus.MustNewConstMetric(c.conns, prometheus.GaugeValue, st.bal.Mean, st.service, "mean")
		ch <- prometheus.MustNewConstMetric(c.conns, prometheus.GaugeValue, float64(st.bal.Max), st.service, "max")
		ch <- prometheus.MustNewConstMetric(c.ratio, prometheus.GaugeValue, st.bal.MaxOverMean, st.service)
		ch <- prometheus.MustNewConstMetric(c.replacedNodes, prometheus.GaugeValue, float64(st.replaced), st.service)
	}
}
