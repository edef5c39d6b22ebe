package weights

import (
	"sync"
	"time"
)

// lrsSubsets caches the publisher's node subsets of each service for the
// LRS split: a node reports every second, and asking the publisher for
// every node's subsets on each report would cost O(nodes) per report.
type lrsSubsets struct {
	mu    sync.Mutex
	ttl   time.Duration                  // > 0: an entry is refreshed once older than this
	at    map[string]time.Time           // service -> when its entry was taken
	nodes map[string]map[string][]string // service -> node -> endpoint ids
}

// get returns node's subset of service, asking fetch at most once per ttl
// per service.
func (c *lrsSubsets) get(service, node string, now time.Time, fetch func(string) map[string][]string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.at == nil {
		c.at, c.nodes = map[string]time.Time{}, map[string]map[string][]string{}
	}
	if at, ok := c.at[service]; !ok || now.Sub(at) >= c.ttl {
		c.nodes[service], c.at[service] = fetch(service), now
	}
	return c.nodes[service][node]
}

// split is how node spreads its requests to service over its subset, for
// the LRS server (LRSConfig.Split): the endpoints it is given, in shares of
// the EDS weights it was last sent (its own in per_node mode, else the
// published table's; equal shares before any). This is what a client that
// honours endpoint weights does (grpc-go's ring_hash with a random hash
// per request, Envoy's policies); grpc-go's round_robin ignores weights,
// and weights then move nothing anyway.
func (p *Pipeline) split(node, service string) ([]string, []float64, bool) {
	ids := p.lrsSubsets.get(service, node, time.Now(), p.cfg.Publisher.NodeSubsets)
	if len(ids) == 0 {
		return nil, nil, false
	}
	w := make([]float64, len(ids))
	if nw, _, ok := p.perNode.Node(service, node); ok && !nw.Global {
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
