package translate

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/xds-server/xds-server/envoy"
	"github.com/xds-server/xds-server/subsetting"
)

// shareScale is the sum of the locality weights that carry a share (a
// distribute or spill split): fine enough for a share of 1e-6.
const shareScale = 1_000_000

// LocalizeInput is what a node's view of a service with a locality policy
// depends on besides the service: the node's place and client index, and
// the fleet-wide datacenter order, spill states and slots.
type LocalizeInput struct {
	At          Place
	Datacenters []string           // failover order of datacenters (the local one first)
	Spill       map[Zone]ZoneSpill // the service's zone states; nil: no spill
	Slots       map[string]int     // steady slots of the service's endpoints; nil: FreshSlots
	Index       int                // client index; -1: none (every endpoint of each level)
}

// Localize returns s as a node at in.At gets it under set.Locality: its
// endpoints in priority levels (see Failover), each level subset on its
// own for a node with a client index (so a failover level is never empty
// when it has endpoints), and, with a distribute share or a spill state
// below 1, the node's zone and the next level's zones sharing priority 0
// by locality weights. Pure; s is not modified. It is NewLocalPlan's
// Service of its Pick of in.Index.
func Localize(s envoy.Service, set ServiceSettings, in LocalizeInput) (envoy.Service, error) {
	p, err := NewLocalPlan(s, set, in)
	if err != nil {
		return s, err
	}
	return p.Service(p.Pick(in.Index)), nil
}

// LocalPlan is what the nodes of one place get of a service with a
// locality policy, before their client index picks each level's subset:
// the levels, each level's subsetting plan, and the zone's share. Pure
// and immutable once made; safe for concurrent use.
type LocalPlan struct {
	s       envoy.Service
	keep    float64 // share kept in the node's zone; 1: strict priorities
	bySpare bool    // the rest by spare capacity (spill), else by capacity
	share   bool    // the first level is the node's zone, a share can apply
	spill   map[Zone]ZoneSpill
	levels  []levelPlan
}

// levelPlan is one priority level: its endpoints (in plan order when
// subset) and, when the level is larger than the subset size, its plan.
type levelPlan struct {
	eps     []envoy.Endpoint
	plan    subsetting.Plan // nil: every node gets every endpoint of the level
	serving []bool          // by plan index
}

// NewLocalPlan plans s for nodes at in.At (in.Index is not used).
func NewLocalPlan(s envoy.Service, set ServiceSettings, in LocalizeInput) (*LocalPlan, error) {
	pol := set.Locality
	keep, bySpare := pol.share(in.Spill, in.At)
	f := pol.Failover
	if pol.Distribute > 0 || pol.Spill {
		f = zoneFirst(f)
	}
	if in.Slots == nil && UsesSlots(set, len(s.Endpoints)) { // a fresh table's, over the whole service
		ids := make([]string, len(s.Endpoints))
		for k, e := range s.Endpoints {
			ids[k] = e.ID
		}
		in.Slots = FreshSlots(ids)
	}
	p := &LocalPlan{s: s, keep: keep, bySpare: bySpare, share: hasZone(f, in.At), spill: in.Spill}
	for _, lvl := range levelsOf(s.Endpoints, f, in.At, in.Datacenters) {
		lp, err := newLevelPlan(s, set, lvl, in.Slots)
		if err != nil {
			return nil, err
		}
		p.levels = append(p.levels, lp)
	}
	return p, nil
}

// newLevelPlan plans one level (lvl: indices into s.Endpoints).
func newLevelPlan(s envoy.Service, set ServiceSettings, lvl []int, slots map[string]int) (levelPlan, error) {
	eps := make([]envoy.Endpoint, len(lvl))
	for k, i := range lvl {
		eps[k] = s.Endpoints[i]
	}
	if !Subsetted(set.SubsetSize, len(eps)) {
		return levelPlan{eps: eps}, nil
	}
	names := make([]string, len(eps))
	for k, e := range eps {
		names[k] = e.ID
	}
	var own map[string]int
	if slots != nil && UsesSlots(set, len(eps)) {
		own = make(map[string]int, len(eps))
		for _, e := range eps {
			if x, ok := slots[e.ID]; ok {
				own[e.ID] = x
			}
		}
	}
	plan, err := NewPlan(cmp.Or(set.Subsetting, subsetting.Steady), names, set.SubsetSize, own)
	if err != nil {
		return levelPlan{}, fmt.Errorf("translate: subsets of %s: %w", s.Name, err)
	}
	sub := s
	sub.Endpoints = eps
	arranged, serving, err := Arrange(sub, plan)
	if err != nil {
		return levelPlan{}, err
	}
	return levelPlan{eps: arranged.Endpoints, plan: plan, serving: serving}, nil
}

// Levels is the number of priority levels before a share merges any.
func (p *LocalPlan) Levels() int { return len(p.levels) }

// Level returns the endpoints of level k, in the order Pick indexes
// them; shared: read only.
func (p *LocalPlan) Level(k int) []envoy.Endpoint { return p.levels[k].eps }

// Pick returns, per level, the indices (ascending) of the endpoints nodes
// with client index i get: every one of a level without a plan, else the
// pick of i (see Pick); a negative i gets every endpoint.
func (p *LocalPlan) Pick(i int) [][]int {
	out := make([][]int, len(p.levels))
	for k, lvl := range p.levels {
		if lvl.plan == nil || i < 0 {
			out[k] = everyIndex(len(lvl.eps))
			continue
		}
		out[k] = Members(Pick(lvl.plan, lvl.serving, i))
	}
	return out
}

func everyIndex(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// Service returns the service nodes get for the members of each level
// (a Pick): the levels at contiguous priorities, empty ones left out, the
// first two sharing priority 0 when a share applies.
func (p *LocalPlan) Service(members [][]int) envoy.Service {
	picked := make([][]envoy.Endpoint, len(p.levels))
	for k, lvl := range p.levels {
		picked[k] = make([]envoy.Endpoint, len(members[k]))
		for j, m := range members[k] {
			picked[k][j] = lvl.eps[m]
		}
	}
	out := p.s
	out.Endpoints, out.LocalityWeights = nil, nil
	first := 0
	if p.keep < 1 && len(picked) >= 2 && p.share {
		merged, rest, weights := shareFirst(picked[0], picked[1], p.keep, p.bySpare, p.spill)
		if weights != nil {
			out.Endpoints, out.LocalityWeights = merged, weights
			picked[1], first = rest, 1
		}
	}
	prio := uint32(0)
	if out.Endpoints != nil {
		prio = 1
	}
	for _, eps := range picked[first:] {
		if len(eps) == 0 {
			continue
		}
		for _, e := range eps {
			e.Priority = prio
			out.Endpoints = append(out.Endpoints, e)
		}
		prio++
	}
	return out
}

// share is the share a node at place keeps in its zone: the distribute
// share, or the zone's spill state where it keeps less (then the rest
// goes by spare capacity: bySpare).
func (p LocalityPolicy) share(spill map[Zone]ZoneSpill, at Place) (keep float64, bySpare bool) {
	keep = 1
	if p.Distribute > 0 {
		keep = p.Distribute
	}
	if z, ok := zoneState(spill, at); p.Spill && ok && z.Keep > 0 && z.Keep < keep {
		keep, bySpare = z.Keep, true
	}
	return keep, bySpare
}

// zoneState is the spill state of the node's zone: that of its region and
// zone or, for a node that names no region (its zone level then matches
// the zone name alone), that of the zone of that name keeping least.
func zoneState(spill map[Zone]ZoneSpill, at Place) (ZoneSpill, bool) {
	if at.Region != "" || at.Zone == "" {
		z, ok := spill[Zone{at.Region, at.Zone}]
		return z, ok
	}
	var out ZoneSpill
	found := false
	for k, z := range spill {
		if k.Zone == at.Zone && z.Keep > 0 && (!found || z.Keep < out.Keep) {
			out, found = z, true
		}
	}
	return out, found
}

// zoneFirst returns f with the zone level first.
func zoneFirst(f Failover) Failover {
	out := Failover{LevelZone}
	n := 1
	for _, l := range f.Levels() {
		if l != LevelZone {
			out[n] = l
			n++
		}
	}
	return out
}

// hasZone reports whether the first level is the node's zone (a node
// whose zone is unknown has none: nothing to keep a share in).
func hasZone(f Failover, at Place) bool {
	lv := placeable(f.Levels(), at)
	return len(lv) > 0 && lv[0] == LevelZone
}

// shareFirst merges the node's zone (first) with the next level (next)
// at priority 0: first's localities take keep of the weight, next's the
// rest in proportion to their capacity, or with bySpare to their zone's
// spare capacity (a zone without spare capacity stays in the next
// level: rest). weights is nil when no locality of next can take a share.
func shareFirst(first, next []envoy.Endpoint, keep float64, bySpare bool, spill map[Zone]ZoneSpill) (merged, rest []envoy.Endpoint, weights map[envoy.PriorityLocality]uint32) {
	var taking []envoy.Endpoint
	for _, e := range next {
		if bySpare && spill[Zone{e.Locality.Region, e.Locality.Zone}].Spare <= 0 {
			rest = append(rest, e)
			continue
		}
		taking = append(taking, e)
	}
	if len(taking) == 0 {
		return nil, next, nil
	}
	weights = map[envoy.PriorityLocality]uint32{}
	spread(weights, first, keep, func(l envoy.Locality, c float64) float64 { return c })
	spread(weights, taking, 1-keep, func(l envoy.Locality, c float64) float64 {
		if bySpare {
			return spill[Zone{l.Region, l.Zone}].Spare
		}
		return c
	})
	merged = append(slices.Clone(first), taking...)
	for k := range merged {
		merged[k].Priority = 0
	}
	return merged, rest, weights
}

// spread sets the priority-0 weights of the localities of eps to share
// of shareScale, split in proportion to by(locality, capacity), where a
// locality's capacity is the sum of its serving endpoints' weights (each
// at least 1); equal parts when every part is 0. Every weight is >= 1.
func spread(into map[envoy.PriorityLocality]uint32, eps []envoy.Endpoint, share float64, by func(envoy.Locality, float64) float64) {
	capacity := map[envoy.Locality]float64{}
	for _, e := range eps {
		if Serving(e.Health) {
			capacity[e.Locality] += float64(max(e.Weight, 1))
		} else if _, ok := capacity[e.Locality]; !ok {
			capacity[e.Locality] = 0
		}
	}
	parts, total := make(map[envoy.Locality]float64, len(capacity)), 0.0
	for l, c := range capacity {
		parts[l] = max(by(l, c), 0)
		total += parts[l]
	}
	for l, p := range parts {
		frac := 1 / float64(len(parts))
		if total > 0 {
			frac = p / total
		}
		w := math.Round(share * frac * shareScale)
		into[envoy.PriorityLocality{Locality: l}] = uint32(max(w, 1))
	}
}
