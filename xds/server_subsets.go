package xds

import (
	"github.com/prometheus/client_golang/prometheus"
)

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
