package translate

import (
	"math"
	"slices"

	"github.com/xds-server/xds-server/envoy"
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
// by locality weights. Pure; s is not modified.
func Localize(s envoy.Service, set ServiceSettings, in LocalizeInput) (envoy.Service, error) {
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
	levels := levelsOf(s.Endpoints, f, in.At, in.Datacenters)
	picked := make([][]envoy.Endpoint, len(levels))
	for i, lvl := range levels {
		eps, err := levelPick(s, set, lvl, in)
		if err != nil {
			return s, err
		}
		picked[i] = eps
	}
	out := s
	out.Endpoints, out.LocalityWeights = nil, nil
	first := 0
	if keep < 1 && len(picked) >= 2 && hasZone(f, in.At) {
		merged, rest, weights := shareFirst(picked[0], picked[1], keep, bySpare, in.Spill)
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
	return out, nil
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

// zoneState is the spill state of the node's zone. A node without a
// region has the zone of that name in any region (as its zone level has,
// matches): the smallest keep among them.
func zoneState(spill map[Zone]ZoneSpill, at Place) (ZoneSpill, bool) {
	if z, ok := spill[Zone{at.Region, at.Zone}]; ok || at.Region != "" {
		return z, ok
	}
	var out ZoneSpill
	found := false
	for k, z := range spill {
		if k.Zone == at.Zone && (!found || z.Keep < out.Keep) {
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

// levelPick returns the endpoints of one level the node gets: all of
// them, or, for a node with a client index and a level larger than the
// subset size, its pick of a plan over the level alone.
func levelPick(s envoy.Service, set ServiceSettings, lvl []int, in LocalizeInput) ([]envoy.Endpoint, error) {
	eps := make([]envoy.Endpoint, len(lvl))
	for k, i := range lvl {
		eps[k] = s.Endpoints[i]
	}
	if in.Index < 0 || !Subsetted(set.SubsetSize, len(eps)) {
		return eps, nil
	}
	sub := s
	sub.Endpoints = eps
	var slots map[string]int
	if in.Slots != nil && UsesSlots(set, len(eps)) {
		slots = make(map[string]int, len(eps))
		for _, e := range eps {
			if x, ok := in.Slots[e.ID]; ok {
				slots[e.ID] = x
			}
		}
	}
	v, err := subsetFor(sub, set, slots, in.Index)
	return v.Endpoints, err
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
