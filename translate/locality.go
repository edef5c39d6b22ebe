package translate

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/xds-server/xds-server/envoy"
)

// Level is a failover level: what an endpoint must share with a node to
// be tried at that level's priority.
type Level string

// Failover levels (services.<name>.locality.failover).
const (
	LevelZone       Level = "zone"       // same datacenter, region and zone
	LevelRegion     Level = "region"     // same datacenter and region
	LevelDatacenter Level = "datacenter" // same datacenter; then every other datacenter, one priority each
)

// Failover is an ordered list of distinct levels; "" ends it. An array,
// so that ServiceSettings stay comparable.
type Failover [3]Level

// ParseFailover returns the failover list of names (zone, region,
// datacenter; each at most once).
func ParseFailover(names []string) (Failover, error) {
	var f Failover
	if len(names) > len(f) {
		return f, fmt.Errorf("translate: failover: %d levels, at most %d (zone, region, datacenter)", len(names), len(f))
	}
	for i, n := range names {
		l := Level(n)
		switch {
		case l != LevelZone && l != LevelRegion && l != LevelDatacenter:
			return Failover{}, fmt.Errorf("translate: failover: unknown level %q (want zone, region or datacenter)", n)
		case slices.Contains(f[:i], l):
			return Failover{}, fmt.Errorf("translate: failover: level %q listed twice", n)
		}
		f[i] = l
	}
	return f, nil
}

// Levels returns the listed levels.
func (f Failover) Levels() []Level {
	n := slices.Index(f[:], "")
	if n < 0 {
		n = len(f)
	}
	return f[:n]
}

// LocalityPolicy is a service's locality settings
// (services.<name>.locality).
type LocalityPolicy struct {
	Failover Failover
	// Distribute is the share of a node's requests kept in its own zone,
	// in (0, 1): the rest goes to the next level's zones by capacity,
	// through locality weights at one priority. 0 is off (strict
	// priorities).
	Distribute float64
	// Spill makes the next level take an overloaded zone's excess (the
	// zone states of NodeInput.Spill), by spare capacity.
	Spill bool
}

// On reports whether the policy orders endpoints by the node's locality.
func (p LocalityPolicy) On() bool {
	return p.Failover[0] != "" || p.Distribute > 0 || p.Spill
}

// Validate checks the distribute share.
func (p LocalityPolicy) Validate() error {
	if !(p.Distribute >= 0 && p.Distribute < 1) {
		return errors.New("translate: locality.distribute not in [0, 1)")
	}
	return nil
}

// Place is where a node runs, as far as its priorities depend on it;
// empty fields are unknown.
type Place struct {
	Datacenter string `json:"datacenter"`
	Region     string `json:"region"`
	Zone       string `json:"zone"`
}

// Key is a compact key of the place (nodes of one place share answers).
func (p Place) Key() string { return p.Datacenter + "\x00" + p.Region + "\x00" + p.Zone }

// Zone identifies a zone of endpoints: their locality's region and zone.
type Zone struct{ Region, Zone string }

// ZoneSpill is a zone's spill state for one service (from the weights'
// spill stage).
type ZoneSpill struct {
	Keep  float64 // share of its own nodes' requests the zone keeps, in (0, 1]; 1 = no spill
	Spare float64 // requests/s it can still take below the overload threshold; >= 0
}

// rankAll returns, per endpoint of eps, its rank for a node at place
// (lower is tried first), or -1 when the node is not given it: endpoints
// of another datacenter without a datacenter level. Ranks need not be
// contiguous. dcs is the datacenter failover order.
func rankAll(eps []envoy.Endpoint, f Failover, at Place, dcs []string) []int {
	levels := placeable(f.Levels(), at)
	remote := slices.Contains(levels, LevelDatacenter)
	out := make([]int, len(eps))
	for k, e := range eps {
		if sameDC(e.Datacenter, at.Datacenter) {
			out[k] = len(levels)
			for i, l := range levels {
				if matches(l, e, at) {
					out[k] = i
					break
				}
			}
			continue
		}
		out[k] = -1
		if remote {
			out[k] = len(levels) + 1 + dcRank(e.Datacenter, at.Datacenter, dcs)
		}
	}
	return out
}

// placeable drops the levels the node's place cannot tell (a zone level
// for a node without a zone, a region level for one without a region).
func placeable(levels []Level, at Place) []Level {
	return slices.DeleteFunc(slices.Clone(levels), func(l Level) bool {
		return (l == LevelZone && at.Zone == "") || (l == LevelRegion && at.Region == "")
	})
}

func matches(l Level, e envoy.Endpoint, at Place) bool {
	switch l {
	case LevelZone: // a node that names no region matches the zone alone
		return (at.Region == "" || e.Locality.Region == at.Region) && e.Locality.Zone == at.Zone
	case LevelRegion:
		return e.Locality.Region == at.Region
	default: // datacenter: already the node's
		return true
	}
}

// sameDC reports whether an endpoint of datacenter dc is in the node's
// (an unknown datacenter on either side counts as the same).
func sameDC(dc, node string) bool { return dc == "" || node == "" || dc == node }

// dcRank is the position of a remote datacenter in the failover order
// (the node's own left out); datacenters not listed come after, by name.
func dcRank(dc, node string, dcs []string) int {
	order := slices.DeleteFunc(slices.Clone(dcs), func(d string) bool { return d == node })
	if i := slices.Index(order, dc); i >= 0 {
		return i
	}
	return len(order) // unknown ones tie; levelsOf splits them by name
}

// levelsOf groups the indices of eps into priority levels (contiguous,
// first tried first), by rankAll; endpoints not given are left out. Within
// a level indices ascend; levels of unlisted remote datacenters are sorted
// by name.
func levelsOf(eps []envoy.Endpoint, f Failover, at Place, dcs []string) [][]int {
	ranks := rankAll(eps, f, at, dcs)
	type key struct {
		rank int
		dc   string
	}
	byKey := map[key][]int{}
	for k, r := range ranks {
		if r < 0 {
			continue
		}
		kk := key{rank: r}
		if !sameDC(eps[k].Datacenter, at.Datacenter) {
			kk.dc = eps[k].Datacenter
		}
		byKey[kk] = append(byKey[kk], k)
	}
	keys := make([]key, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b key) int { return cmp.Or(cmp.Compare(a.rank, b.rank), strings.Compare(a.dc, b.dc)) })
	out := make([][]int, len(keys))
	for i, k := range keys {
		out[i] = byKey[k]
	}
	return out
}
