package xds

import (
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/xds-server/xds-server/envoy"
	"github.com/xds-server/xds-server/translate"
	"github.com/xds-server/xds-server/xdscache"
)

// Spill is the zone spill states of services with locality.spill:
// service -> zone -> state (see translate.ZoneSpill).
type Spill = map[string]map[translate.Zone]translate.ZoneSpill

// localService is a service whose load assignment depends on the node's
// place (its settings have a locality policy): translated per place and
// client index by translate.Localize.
type localService struct {
	pos   int // in the pass's items
	in    envoy.Service
	set   translate.ServiceSettings
	slots map[string]int // steady slots; nil: none
}

// localKey identifies one localized load assignment: nodes of one place
// (and client index, for subset services) share it while the service's
// translation (src: its shared load assignment's hash) and spill states
// are unchanged.
type localKey struct {
	service, src, place string
	spill               uint64 // version of the spill states it was built with
	index               int    // -1 when the service is not subset
}

type localEDS struct {
	id   uint64
	view envoy.Service // the localized input (for a node's own weights)
	eds  xdscache.Item
	used bool // by a node this pass
}

// localized holds the localized load assignments across passes; used
// under the reconciler's lock.
type localized struct {
	defaultDC   string   // a node's datacenter when its metadata has none
	datacenters []string // failover order
	spill       Spill
	spillVer    uint64

	services []localService // this pass's, in item order
	byKey    map[localKey]*localEDS
}

// place is where node runs: its metadata "datacenter" (else the local
// one) and its locality's region and zone.
func (l *localized) place(node Node) translate.Place {
	dc, _ := node.Metadata["datacenter"].(string)
	if dc == "" {
		dc = l.defaultDC
	}
	return translate.Place{Datacenter: dc, Region: node.Locality["region"], Zone: node.Locality["zone"]}
}

// get returns the load assignment of ls for nodes at place with client
// index (reusing this or an earlier pass's).
func (l *localized) get(ls localService, src string, at translate.Place, index int, ids *uint64) (*localEDS, error) {
	if !translate.Subsetted(ls.set.SubsetSize, len(ls.in.Endpoints)) {
		index = -1
	}
	k := localKey{service: ls.in.Name, src: src, place: at.Key(), spill: l.spillVer, index: index}
	if e, ok := l.byKey[k]; ok {
		e.used = true
		return e, nil
	}
	view, err := translate.Localize(ls.in, ls.set, translate.LocalizeInput{At: at, Datacenters: l.datacenters,
		Spill: l.spill[ls.in.Name], Slots: ls.slots, Index: index})
	if err != nil {
		return nil, err
	}
	eds, err := encodeEDS(view)
	if err != nil {
		return nil, err
	}
	*ids++
	e := &localEDS{id: *ids, view: view, eds: eds, used: true}
	if l.byKey == nil {
		l.byKey = map[localKey]*localEDS{}
	}
	l.byKey[k] = e
	return e, nil
}

// observe sets the locality metrics from the load assignments used this
// pass.
func (l *localized) observe(m *metrics) {
	m.localAssigns.Reset()
	m.localEPs.Reset()
	for k, e := range l.byKey {
		if !e.used {
			continue
		}
		m.localAssigns.WithLabelValues(k.service).Inc()
		for _, ep := range e.view.Endpoints {
			m.localEPs.WithLabelValues(k.service, strconv.FormatUint(uint64(ep.Priority), 10)).Inc()
		}
	}
}

// settle drops what no node used this pass.
func (l *localized) settle() {
	for k, e := range l.byKey {
		if !e.used {
			delete(l.byKey, k)
		}
		e.used = false
	}
}

// replaceLocal puts node's localized load assignment of every local
// service into repl (with the node's own weights where it has them), and
// their ids into key.
func (v *subsets) replaceLocal(node Node, repl map[int]xdscache.Item, key *strings.Builder) {
	at := v.local.place(node)
	for _, ls := range v.local.services {
		name := ls.in.Name
		src := v.items[ls.pos][xdscache.EDS].Hash
		e, err := v.local.get(ls, src, at, node.Index, &v.choiceIDs)
		if err != nil {
			v.translateFailed(name, node.ID, err)
			continue
		}
		if w := v.nodeW[name][node.ID]; w != nil {
			we, err := v.perNode.get(name, e.view, node.ID, "l"+strconv.FormatUint(e.id, 10), e.view.Endpoints, w, &v.choiceIDs)
			if err != nil {
				v.translateFailed(name, node.ID, err)
				continue
			}
			repl[ls.pos] = we.eds
			key.WriteString(weightedKey(we))
			continue
		}
		repl[ls.pos] = e.eds
		key.WriteString("/l")
		key.WriteString(strconv.FormatUint(e.id, 10))
	}
}

// localView is what subsets views need of a service with a locality
// policy: each node is given the serving endpoints of priority 0 of its
// load assignment (where its requests go while that level can take them),
// so per-node and balanced weights stay within a level. Computed per
// place and client index on first use; safe for concurrent use.
type localView struct {
	svc         localService
	datacenters []string
	spill       map[translate.Zone]translate.ZoneSpill

	mu    sync.Mutex
	picks map[localKey][]string
}

// view captures ls with the pass's datacenters and spill states.
func (l *localized) view(ls localService) *localView {
	return &localView{svc: ls, datacenters: l.datacenters, spill: l.spill[ls.in.Name], picks: map[localKey][]string{}}
}

func (lv *localView) nodeSubsets(nodes []viewNode) map[string][]string {
	lv.mu.Lock()
	defer lv.mu.Unlock()
	subset := translate.Subsetted(lv.svc.set.SubsetSize, len(lv.svc.in.Endpoints))
	out := make(map[string][]string, len(nodes))
	for _, n := range nodes {
		if subset && n.index < 0 {
			continue
		}
		k := localKey{place: n.place.Key(), index: n.index}
		if !subset {
			k.index = -1
		}
		ids, ok := lv.picks[k]
		if !ok {
			ids = lv.first(n.place, k.index)
			lv.picks[k] = ids
		}
		out[n.id] = ids
	}
	return out
}

// first returns the serving endpoint ids at priority 0 of what nodes at
// place with client index are sent, sorted (none if it fails to translate).
func (lv *localView) first(at translate.Place, index int) []string {
	v, err := translate.Localize(lv.svc.in, lv.svc.set, translate.LocalizeInput{At: at, Datacenters: lv.datacenters,
		Spill: lv.spill, Slots: lv.svc.slots, Index: index})
	if err != nil {
		return nil
	}
	var ids []string
	for _, e := range v.Endpoints {
		if e.Priority == 0 && serving(e.Health) {
			ids = append(ids, e.ID)
		}
	}
	slices.Sort(ids)
	return ids
}
