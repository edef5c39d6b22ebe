package xds

import ()

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
