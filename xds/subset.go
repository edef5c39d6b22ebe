package xds

import (
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/xds-server/xds-server/envoy"
	"github.com/xds-server/xds-server/subsetting"
	"github.com/xds-server/xds-server/translate"
	"github.com/xds-server/xds-server/xdscache"
)

// servicePlan is the subsetting of one service as of one discovery
// snapshot: the plan over its registered endpoints (health flaps do not
// change it) and, per client index, the endpoints that index's nodes get.
// It is owned by the reconciler and used under its lock.
type servicePlan struct {
	name    string
	alg     subsetting.Algorithm
	plan    subsetting.Plan
	svc     envoy.Service // translation input; svc.Endpoints are in plan order
	serving []bool        // by plan index: healthy, degraded or unknown
	byIndex picks
	byOrder map[string]*pick // picks by their order (orderKey): indices with equal orders share one
	byKey   map[string]*choice
	scratch []byte         // orderKey's buffer
	ids     *uint64        // the reconciler's choice id counter: ids stay unique across plans
	slots   map[string]int // endpoint id -> stable slot (steady); nil otherwise

	// prev is the plan this one replaced, while picks may still be carried
	// over from it (see choose); changed marks, by plan index, endpoints
	// whose translation input differs from prev's. Both are dropped by
	// forgetPrev once every node has been served, so plans never chain.
	prev    *servicePlan
	changed []bool
}

// pick is what nodes with one client index get of one service: their
// subset plus, for members that are not serving, the next candidates in
// their own order.
type pick struct {
	order    []int // plan indices: the node's subset, then replacements
	subset   []int // order[:size]: the subset proper
	replaced int   // len(order) - size
	*choice
}

// choice is a set of endpoints and its load assignment, shared by every
// pick with the same members.
type choice struct {
	id      uint64 // unique across plans, so variants keyed by ids outlive a plan
	key     string // members, comma separated
	members []int  // plan indices, ascending
	eds     xdscache.Item
	in      *servicePlan // the latest plan whose byKey has it
}

// picks are a plan's picks by client index: in a slice for the dense
// indices the index tables hand out (a lookup per node and service of
// every pass: 500,000 at 10,000 nodes x 50 services, which cost 100 ms
// a pass in maps), in a map past maxDenseIndex.
type picks struct {
	dense  []*pick
	sparse map[int]*pick
}

// maxDenseIndex bounds the slice of picks (8 MiB a plan at most).
const maxDenseIndex = 1 << 20

func (t *picks) get(i int) (*pick, bool) {
	if i >= 0 && i < len(t.dense) {
		p := t.dense[i]
		return p, p != nil
	}
	p, ok := t.sparse[i]
	return p, ok
}

func (t *picks) set(i int, p *pick) {
	if i < 0 || i >= maxDenseIndex {
		if t.sparse == nil {
			t.sparse = map[int]*pick{}
		}
		t.sparse[i] = p
		return
	}
	if i >= len(t.dense) {
		t.dense = slices.Grow(t.dense, i+1-len(t.dense))[:i+1]
	}
	t.dense[i] = p
}

// newServicePlan plans a service with subsetting on, or returns nil when
// every node would get every endpoint anyway (subset size 0 or at least the
// endpoint count). prev, the plan of the previous snapshot, is reused when
// the registered endpoints, size and algorithm are unchanged, and so are
// its picks that no change touches. ids numbers choices.
//
// slots, for steady, are the endpoints' stable slots (see endpointSlots):
// the plan is then Ringsteady over them; without slots, or if they collide
// (tables mixed during an outage), steady falls back to hash rings.
func newServicePlan(s envoy.Service, size int, alg subsetting.Algorithm, prev *servicePlan, ids *uint64, slots map[string]int) (*servicePlan, error) {
	if !translate.Subsetted(size, len(s.Endpoints)) {
		return nil, nil
	}
	if alg == "" {
		alg = subsetting.Steady
	}
	backends := make([]string, len(s.Endpoints))
	for i, ep := range s.Endpoints {
		backends[i] = ep.ID
	}
	var plan subsetting.Plan
	reuse := prev != nil && prev.alg == alg && prev.plan.Size() == size &&
		slices.Equal(prev.plan.Backends(), sortedCopy(backends)) && maps.Equal(prev.slots, slots)
	if reuse {
		plan = prev.plan
	} else {
		p, err := translate.NewPlan(alg, backends, size, slots)
		if err != nil {
			return nil, fmt.Errorf("xds: subset plan of %s: %w", s.Name, err)
		}
		plan = p
	}
	arranged, serving, err := translate.Arrange(s, plan)
	if err != nil {
		return nil, err
	}
	sp := &servicePlan{name: s.Name, alg: alg, plan: plan, svc: arranged, ids: ids, slots: slots,
		serving: serving, byOrder: map[string]*pick{}, byKey: map[string]*choice{}}
	if reuse {
		sp.prev, sp.changed = prev, make([]bool, len(serving))
		for i, ep := range sp.svc.Endpoints {
			sp.changed[i] = !sameEndpoint(ep, prev.svc.Endpoints[i])
		}
	}
	return sp, nil
}

// forgetPrev ends the carry-over from the previous plan.
func (sp *servicePlan) forgetPrev() { sp.prev, sp.changed = nil, nil }

// carried returns the previous plan's pick of client index i if none of
// its endpoints changed: then its order, members and load assignment are
// what choose would compute again.
func (sp *servicePlan) carried(i int) (*pick, bool) {
	if sp.prev == nil {
		return nil, false
	}
	p, ok := sp.prev.byIndex.get(i)
	if !ok || slices.ContainsFunc(p.order, func(m int) bool { return sp.changed[m] }) {
		return nil, false
	}
	if p.choice.in != sp {
		if _, ok := sp.byKey[p.key]; !ok {
			sp.byKey[p.key] = p.choice
		}
		p.choice.in = sp
	}
	return p, true
}

// sameEndpoint reports whether two endpoints translate alike.
func sameEndpoint(a, b envoy.Endpoint) bool {
	return a.ID == b.ID && a.Address == b.Address && a.Port == b.Port && a.Health == b.Health &&
		a.Weight == b.Weight && a.Locality == b.Locality && a.Datacenter == b.Datacenter && a.Priority == b.Priority &&
		maps.Equal(a.Meta, b.Meta)
}

// choose returns the pick of client index i, computing it (and
// translating its load assignment, unless an equal one exists) on first use.
func (sp *servicePlan) choose(i int) (*pick, error) {
	if p, ok := sp.byIndex.get(i); ok {
		return p, nil
	}
	if p, ok := sp.carried(i); ok {
		sp.byIndex.set(i, p)
		return p, nil
	}
	order := translate.Pick(sp.plan, sp.serving, i)
	sp.scratch = orderKey(sp.scratch[:0], order)
	if p, ok := sp.byOrder[string(sp.scratch)]; ok { // no string made for a lookup
		sp.byIndex.set(i, p)
		return p, nil
	}
	c, err := sp.choice(order)
	if err != nil {
		return nil, err
	}
	k := min(sp.plan.Size(), len(order))
	p := &pick{order: order, subset: order[:k], replaced: len(order) - k, choice: c}
	sp.byIndex.set(i, p)
	sp.byOrder[string(sp.scratch)] = p
	return p, nil
}

// orderKey appends order's plan indices to b, comma separated (also the
// form of a choice's key, over its members). Picks are
// kept for every client index (500,000 at 10,000 nodes x 50 services)
// while there are few distinct orders (a few per endpoint): sharing them
// by order took the subset variant's picks from 85 MB to a few.
func orderKey(b []byte, order []int) []byte {
	for k, m := range order {
		if k > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(m), 10)
	}
	return b
}

// choice returns the shared choice of the endpoints in order.
func (sp *servicePlan) choice(order []int) (*choice, error) {
	members := translate.Members(order)
	key := string(orderKey(nil, members))
	if c, ok := sp.byKey[key]; ok {
		return c, nil
	}
	eds, err := encodeEDS(translate.SubsetOf(sp.svc, members))
	if err != nil {
		return nil, err
	}
	*sp.ids++
	c := &choice{id: *sp.ids, key: key, members: members, eds: eds, in: sp}
	sp.byKey[key] = c
	return c, nil
}

// serving reports whether an endpoint takes new requests.
func serving(h envoy.HealthStatus) bool { return translate.Serving(h) }

func sortedCopy(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return slices.Compact(c)
}

// members returns the endpoints of a choice, in plan order.
func (sp *servicePlan) members(c *choice) []envoy.Endpoint {
	return translate.SubsetOf(sp.svc, c.members).Endpoints
}
