package xds

import (
	"maps"

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

// weightedSet holds the weighted load assignments of a pass: service ->
// node id -> its load assignment.
type weightedSet map[string]map[string]*weightedEDS

// get returns node's load assignment of service name, whose translation
// input is svc: the endpoints eps returns (the members of a choice, or every endpoint of
// a service without subsets), identified by src, with node's weights w.
// It is translated again only when src or the weights changed; ids
// numbers new ones.
func (ws weightedSet) get(name string, svc envoy.Service, node, src string, eps func() []envoy.Endpoint, w map[string]uint32, ids *uint64) (*weightedEDS, error) {
	byNode := ws[name]
	if byNode == nil {
		byNode = map[string]*weightedEDS{}
		ws[name] = byNode
	}
	if we := byNode[node]; we != nil && we.src == src && maps.Equal(we.w, w) {
		we.used = true
		return we, nil
	}
	eds, err := encodeEDS(translate.WithWeights(svc, eps(), w))
	if err != nil {
		return nil, err
	}
	*ids++
	we := &weightedEDS{src: src, w: w, id: *ids, eds: eds, used: true}
	byNode[node] = we
	return we, nil
}

// settle drops the weighted load assignments no node used this pass and
// clears the marks of the others.
func (ws weightedSet) settle() {
	for name, byNode := range ws {
		for node, we := range byNode {
			if !we.used {
				delete(byNode, node)
			}
			we.used = false
		}
		if len(byNode) == 0 {
			delete(ws, name)
		}
	}
}
