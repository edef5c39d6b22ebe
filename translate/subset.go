package translate

import (
	"fmt"
	"slices"

	"github.com/xds-server/xds-server/envoy"
	"github.com/xds-server/xds-server/subsetting"
)

// Subsetted reports whether a service with subset size size and n
// endpoints is subset: size is set and smaller than n (otherwise every
// node gets every endpoint anyway).
func Subsetted(size, n int) bool {
	return size > 0 && size < n
}

// UsesSlots reports whether the endpoints of a subset service with n
// endpoints get stable slots: steady subsetting (the default).
func UsesSlots(set ServiceSettings, n int) bool {
	return Subsetted(set.SubsetSize, n) && (set.Subsetting == "" || set.Subsetting == subsetting.Steady)
}

// FreshSlots are the slots a fresh table gives the endpoints ids: in id
// order, 0 for the first (duplicates count once).
func FreshSlots(ids []string) map[string]int {
	sorted := slices.Clone(ids)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	out := make(map[string]int, len(sorted))
	for i, id := range sorted {
		out[id] = i
	}
	return out
}

// NewPlan is the subsetting plan of the endpoints names: over their slots
// (Ringsteady) when there are usable ones, else alg's plan over the
// names ("" is steady, on hash rings without slots).
func NewPlan(alg subsetting.Algorithm, names []string, size int, slots map[string]int) (subsetting.Plan, error) {
	if slots != nil {
		if p, err := subsetting.NewSlotted(slots, size); err == nil {
			return p, nil
		}
	}
	return subsetting.New(alg, names, size)
}

// Arrange returns s with its endpoints in plan order (the plan's
// Backends), and which of them are serving, by plan index.
func Arrange(s envoy.Service, plan subsetting.Plan) (envoy.Service, []bool, error) {
	byID := make(map[string]envoy.Endpoint, len(s.Endpoints))
	for _, ep := range s.Endpoints {
		byID[ep.ID] = ep
	}
	backends := plan.Backends()
	serving := make([]bool, len(backends))
	s.Endpoints = make([]envoy.Endpoint, len(backends))
	for i, id := range backends {
		ep, ok := byID[id]
		if !ok {
			return s, nil, fmt.Errorf("translate: subsets of %s: plan lost endpoint %q", s.Name, id)
		}
		s.Endpoints[i] = ep
		serving[i] = Serving(ep.Health)
	}
	return s, serving, nil
}

// Serving reports whether an endpoint takes new requests.
func Serving(h envoy.HealthStatus) bool {
	return h == envoy.HealthHealthy || h == envoy.HealthDegraded || h == envoy.HealthUnknown
}

// Pick returns what nodes with client index i get of a subset service,
// as plan indices: the first Size of the plan's order (the subset), then
// the next candidates of that order, as many as there are members not
// serving, repeatedly, so that the subset counts Size serving endpoints
// when the service has them. serving is by plan index (see Arrange).
func Pick(plan subsetting.Plan, serving []bool, i int) []int {
	size := plan.Size()
	order := plan.Order(make([]int, 0, size+4), i, size)
	for n := len(order); n < len(serving); {
		missing := size - countServing(serving, order)
		if missing <= 0 {
			break
		}
		n = min(n+missing, len(serving))
		order = plan.Order(order[:0], i, n)
	}
	return slices.Clip(order)
}

func countServing(serving []bool, idx []int) int {
	n := 0
	for _, i := range idx {
		if serving[i] {
			n++
		}
	}
	return n
}

// Members returns the plan indices of a pick ascending: the order in
// which its endpoints are sent.
func Members(order []int) []int {
	m := slices.Clone(order)
	slices.Sort(m)
	return m
}

// SubsetOf returns arranged (endpoints in plan order, see Arrange)
// serving only the endpoints at the plan indices members.
func SubsetOf(arranged envoy.Service, members []int) envoy.Service {
	eps := make([]envoy.Endpoint, len(members))
	for k, m := range members {
		eps[k] = arranged.Endpoints[m]
	}
	arranged.Endpoints = eps
	return arranged
}
