package drain

import (
	"slices"
	"strings"
	"time"

	"github.com/xds-server/xds-server/discovery"
)

// Departed is a departure shared between replicas (with HA, kept in
// Consul KV): endpoint Endpoint of Service left discovery and is served
// DRAINING until Until, its absolute removal time. The first replica to
// see the departure records it; every replica serves it the same.
type Departed struct {
	Service  string             `json:"service"`
	Endpoint discovery.Endpoint `json:"endpoint"` // as last registered
	Until    time.Time          `json:"until"`
}

// Departures shares the deregistration window between replicas. A Store
// that also implements it (ha.DrainStore) gets the departures this
// Manager sees and passes on those recorded by every replica, along with
// the admin drains; without it the windows live in this Manager only.
type Departures interface {
	// Record queues departures first seen here and re-registrations of
	// departed endpoints (back: the key to delete); it never blocks (it is
	// called with the Manager's lock held) and may drop what it cannot
	// write: the local window stays in force.
	Record(departed, back []Departed)
	// OnDeparted sets the function the Store's Watch calls with every
	// departure stored, before it passes on the admin drains; it is called
	// before Watch.
	OnDeparted(apply func([]Departed))
}

// ReplaceDeparted makes the shared departures exactly list (expired ones
// included: Apply skips them) and reports whether that changed any.
func (d *Overlay) ReplaceDeparted(list []Departed) bool {
	next := make(map[[2]string]Departed, len(list))
	for _, g := range list {
		next[[2]string{g.Service, g.Endpoint.ID}] = g
	}
	changed := len(next) != len(d.shared)
	for k, g := range next {
		old, ok := d.shared[k]
		changed = changed || !ok || !old.Until.Equal(g.Until)
	}
	d.shared = next
	return changed
}

// Recorded returns (sorted by service and endpoint), and forgets, the departures Apply saw first here and
// the re-registrations of shared departures since the last call.
func (d *Overlay) Recorded() (departed, back []Departed) {
	departed, back = d.newGone, d.back
	d.newGone, d.back = nil, nil
	for _, l := range [][]Departed{departed, back} {
		slices.SortFunc(l, func(a, b Departed) int {
			return strings.Compare(a.Service+"\x00"+a.Endpoint.ID, b.Service+"\x00"+b.Endpoint.ID)
		})
	}
	return departed, back
}

// adopt applies the shared departures to the local ones: a shared
// departure of an endpoint not registered now replaces the local one (the
// first replica's removal time wins) or starts its window here; one of an
// endpoint that came back since the last snapshot is reported (back) and
// dropped. first is true on the first snapshot (nothing came back then).
func (d *Overlay) adopt(registered map[string]map[string]discovery.Endpoint, now time.Time, first bool) {
	for k, g := range d.shared {
		name, id := k[0], k[1]
		if _, reg := registered[name][id]; reg {
			if _, before := d.prev[name][id]; !before && !first {
				d.back = append(d.back, g)
				delete(d.shared, k)
			}
			continue
		}
		if !now.Before(g.Until) {
			continue
		}
		if d.gone[name] == nil {
			d.gone[name] = map[string]departed{}
		}
		d.gone[name][id] = departed{ep: g.Endpoint, until: g.Until}
	}
}
