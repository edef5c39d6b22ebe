package xds

import (
	"maps"
	"strconv"

	"github.com/xds-server/xds-server/envoy"
	"github.com/xds-server/xds-server/translate"
	"github.com/xds-server/xds-server/xdscache"
)

// NodeWeights are per-node EDS weights: service -> node id -> endpoint id
// -> weight (>= 1). A node listed under a service gets its own load
// assignment of that service, its subset (or every endpoint, without
// subsetting) with these weights; endpoints it does not list keep their
// global weight. Nodes and services absent get the global weights.
// It is an alias so that *Server satisfies interfaces that name the map
// type (weights.Publisher).
type NodeWeights = map[string]map[string]map[string]uint32

// weightedEDS is one node's load assignment of one service, kept while its
// members and weights are unchanged.
type weightedEDS struct {
	src  string            // what it weights: the choice's id, or the shared load assignment's hash
	w    map[string]uint32 // the weights it was built with
	id   uint64            // unique across passes: names the variants that use it
	eds  xdscache.Item
	used bool // by a node this pass
}

// nodeServices lists, in item order, the positions of the services that
// have weights of their own for node.
func (v *subsets) nodeServices(node string) []int {
	var out []int
	for pos, it := range v.items {
		if v.nodeW[it[xdscache.EDS].Name][node] != nil {
			out = append(out, pos)
		}
	}
	return out
}

// weighted returns node's load assignment of service pos: the endpoints eps
// (the members of a choice, or every endpoint of a service without
// subsets), identified by src, with node's weights w. It is translated
// again only when src or the weights changed.
func (v *subsets) weighted(pos int, node, src string, eps []envoy.Endpoint, w map[string]uint32) (*weightedEDS, error) {
	name := v.items[pos][xdscache.EDS].Name
	byNode := v.perNode[name]
	if byNode == nil {
		byNode = map[string]*weightedEDS{}
		v.perNode[name] = byNode
	}
	if we := byNode[node]; we != nil && we.src == src && maps.Equal(we.w, w) {
		we.used = true
		return we, nil
	}
	eds, err := encodeEDS(translate.WithWeights(v.inputs[name], eps, w))
	if err != nil {
		return nil, err
	}
	v.choiceIDs++
	we := &weightedEDS{src: src, w: w, id: v.choiceIDs, eds: eds, used: true}
	byNode[node] = we
	return we, nil
}

// weightedKey is a variant key's part for a weighted load assignment.
func weightedKey(we *weightedEDS) string { return "/n" + strconv.FormatUint(we.id, 10) }

// settleWeighted drops the weighted load assignments no node used this
// pass and clears the marks of the others.
func (v *subsets) settleWeighted() {
	for name, byNode := range v.perNode {
		for node, we := range byNode {
			if !we.used {
				delete(byNode, node)
			}
			we.used = false
		}
		if len(byNode) == 0 {
			delete(v.perNode, name)
		}
	}
}

// members returns the endpoints of a choice, in plan order.
func (sp *servicePlan) members(c *choice) []envoy.Endpoint {
	return translate.SubsetOf(sp.svc, c.members).Endpoints
}
