package weights

// split is how node spreads its requests to cluster (a service's, or a
// traffic policy target's, "<service>~<subset>") over its subset, for
// the LRS server (LRSConfig.Split): the endpoints it is given, in shares of
// the EDS weights it was last sent (its own in per_node mode, else the
// published table's; equal shares before any). This is what a client that
// honours endpoint weights does (grpc-go's ring_hash with a random hash
// per request, Envoy's policies); grpc-go's round_robin ignores weights,
// and weights then move nothing anyway.
func (p *Pipeline) split(node, cluster string) ([]string, []float64, bool) {
	ids := p.subsets.get().NodeSubsets(cluster)[node]
	if len(ids) == 0 {
		return nil, nil, false
	}
	service := ClusterService(cluster)
	w := make([]float64, len(ids))
	if nw, _, ok := p.perNode.Node(service, node); ok && !nw.Global && service == cluster {
		own := make(map[string]uint32, len(nw.Subset))
		for k, id := range nw.Subset {
			own[id] = nw.Weights[k]
		}
		for k, id := range ids {
			w[k] = float64(own[id])
		}
	} else if st, ok := p.runner.Published().Service(service); ok {
		for k, id := range ids {
			if row, ok := st.Row(id); ok {
				w[k] = float64(row.Weight)
			}
		}
	}
	normalize(w)
	return ids, w, true
}
