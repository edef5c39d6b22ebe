package xds

import (
	"encoding/binary"
	"hash/fnv"
	"maps"
	"slices"
	"strconv"
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

// planKey identifies the plan of a service for the nodes of one place:
// valid while the service's translation (src: its shared load
// assignment's hash) and spill states are unchanged.
type planKey struct {
	service, src, place string
	spill               uint64 // version of the spill states
}

// localPlan is a service's plan for one place, with a content hash of
// every endpoint of every level (so that a pick's load assignment is
// found again in a later pass when none of its endpoints changed).
type localPlan struct {
	plan    *translate.LocalPlan
	hashes  [][]uint64        // by level, by endpoint index
	byIndex map[int]*localEDS // this pass's answers, by client index (-1: not subset)
}

// itemKey identifies one localized load assignment by what it is made
// of: nodes of one place whose picks have equal members (and equal
// endpoints) share it, across passes.
type itemKey struct {
	service, place string
	spill          uint64
	members        string // content hashes of the members, level by level
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
	plans    map[planKey]*localPlan
	items    map[itemKey]*localEDS
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
func (l *localized) get(ls localService, src string, at translate.Place, placeKey string, index int, ids *uint64) (*localEDS, error) {
	if !translate.Subsetted(ls.set.SubsetSize, len(ls.in.Endpoints)) {
		index = -1
	}
	pk := planKey{service: ls.in.Name, src: src, place: placeKey, spill: l.spillVer}
	lp, err := l.planOf(pk, ls, at)
	if err != nil {
		return nil, err
	}
	if e, ok := lp.byIndex[index]; ok {
		return e, nil
	}
	members := lp.plan.Pick(index)
	k := itemKey{service: pk.service, place: pk.place, spill: pk.spill, members: lp.key(members)}
	if e, ok := l.items[k]; ok {
		e.used = true
		lp.byIndex[index] = e
		return e, nil
	}
	view := lp.plan.Service(members)
	eds, err := encodeEDS(view)
	if err != nil {
		return nil, err
	}
	*ids++
	e := &localEDS{id: *ids, view: view, eds: eds, used: true}
	if l.items == nil {
		l.items = map[itemKey]*localEDS{}
	}
	l.items[k] = e
	lp.byIndex[index] = e
	return e, nil
}

// planOf returns the plan of pk, made on first use in a pass.
func (l *localized) planOf(pk planKey, ls localService, at translate.Place) (*localPlan, error) {
	if lp, ok := l.plans[pk]; ok {
		return lp, nil
	}
	p, err := translate.NewLocalPlan(ls.in, ls.set, translate.LocalizeInput{At: at, Datacenters: l.datacenters,
		Spill: l.spill[ls.in.Name], Slots: ls.slots})
	if err != nil {
		return nil, err
	}
	lp := &localPlan{plan: p, hashes: make([][]uint64, p.Levels()), byIndex: map[int]*localEDS{}}
	for k := range lp.hashes {
		eps := p.Level(k)
		lp.hashes[k] = make([]uint64, len(eps))
		for j, e := range eps {
			lp.hashes[k][j] = endpointHash(e)
		}
	}
	if l.plans == nil {
		l.plans = map[planKey]*localPlan{}
	}
	l.plans[pk] = lp
	return lp, nil
}

// key is the content key of a pick's members.
func (lp *localPlan) key(members [][]int) string {
	n := 0
	for _, m := range members {
		n += 8*len(m) + 1
	}
	b := make([]byte, 0, n)
	for k, m := range members {
		for _, j := range m {
			b = binary.LittleEndian.AppendUint64(b, lp.hashes[k][j])
		}
		b = append(b, '/')
	}
	return string(b)
}

// endpointHash is a hash of everything of e a load assignment carries.
func endpointHash(e envoy.Endpoint) uint64 {
	h := fnv.New64a()
	b := make([]byte, 0, 128)
	for _, f := range []string{e.ID, e.Address, e.Locality.Region, e.Locality.Zone, e.Locality.SubZone, e.Datacenter} {
		b = append(append(b, f...), 0)
	}
	b = binary.LittleEndian.AppendUint32(b, e.Port)
	b = binary.LittleEndian.AppendUint32(b, uint32(e.Health))
	b = binary.LittleEndian.AppendUint32(b, e.Weight)
	b = binary.LittleEndian.AppendUint32(b, e.Priority)
	for _, k := range slices.Sorted(maps.Keys(e.Meta)) {
		b = append(append(append(append(b, k...), '='), e.Meta[k]...), 0)
	}
	_, _ = h.Write(b)
	return h.Sum64()
}

// observe sets the locality metrics from the load assignments used this
// pass.
func (l *localized) observe(m *metrics) {
	type prio struct {
		service  string
		priority uint32
	}
	assigns, eps := map[string]int{}, map[prio]int{}
	for k, e := range l.items {
		if !e.used {
			continue
		}
		assigns[k.service]++
		for _, ep := range e.view.Endpoints {
			eps[prio{k.service, ep.Priority}]++
		}
	}
	m.localAssigns.Reset()
	m.localEPs.Reset()
	for svc, n := range assigns {
		m.localAssigns.WithLabelValues(svc).Set(float64(n))
	}
	for p, n := range eps {
		m.localEPs.WithLabelValues(p.service, strconv.FormatUint(uint64(p.priority), 10)).Set(float64(n))
	}
}

// settle drops what no node used this pass, and the pass's plans.
func (l *localized) settle() {
	for k, e := range l.items {
		if !e.used {
			delete(l.items, k)
		}
		e.used = false
	}
	clear(l.plans)
}

// replaceLocal puts node's localized load assignment of every local
// service into repl (with the node's own weights where it has them), and
// their ids into key.
func (v *subsets) replaceLocal(node Node, at translate.Place, placeKey string, repl map[int]xdscache.Item, key *keyBuf) {
	for _, ls := range v.local.services {
		name := ls.in.Name
		src := v.items[ls.pos][xdscache.EDS].Hash
		e, err := v.local.get(ls, src, at, placeKey, node.Index, &v.choiceIDs)
		if err != nil {
			v.translateFailed(name, node.ID, err)
			continue
		}
		v.put(ls.pos, node.ID, shared{eds: e.eds, id: e.id, tag: "l", in: e.view, eps: e.view.Endpoints}, repl, key)
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
	plans map[string]*translate.LocalPlan // by place key; nil when it failed
	picks map[viewPick][]string
}

// viewPick identifies what nodes of one place and client index get.
type viewPick struct {
	place string
	index int // -1 when the service is not subset
}

// view captures ls with the pass's datacenters and spill states.
func (l *localized) view(ls localService) *localView {
	return &localView{svc: ls, datacenters: l.datacenters, spill: l.spill[ls.in.Name],
		plans: map[string]*translate.LocalPlan{}, picks: map[viewPick][]string{}}
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
		k := viewPick{place: n.place.Key(), index: n.index}
		if !subset {
			k.index = -1
		}
		ids, ok := lv.picks[k]
		if !ok {
			ids = lv.first(n.place, k)
			lv.picks[k] = ids
		}
		out[n.id] = ids
	}
	return out
}

// first returns the serving endpoint ids at priority 0 of what nodes of
// k are sent, sorted (none if the service fails to translate).
func (lv *localView) first(at translate.Place, k viewPick) []string {
	p, ok := lv.plans[k.place]
	if !ok {
		p, _ = translate.NewLocalPlan(lv.svc.in, lv.svc.set, translate.LocalizeInput{At: at, Datacenters: lv.datacenters,
			Spill: lv.spill, Slots: lv.svc.slots})
		lv.plans[k.place] = p
	}
	if p == nil {
		return nil
	}
	var ids []string
	for _, e := range p.Service(p.Pick(k.index)).Endpoints {
		if e.Priority == 0 && serving(e.Health) {
			ids = append(ids, e.ID)
		}
	}
	slices.Sort(ids)
	return ids
}
