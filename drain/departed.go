package drain

import (
	"slices"
	"strings"
	"time"

	"github.com/xds-server/xds-server/discovery"
	"github.com/xds-server/xds-server/internal/logclip"
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
	for k := range d.refused {
		if _, ok := next[k]; !ok {
			delete(d.refused, k)
		}
	}
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
// A shared departure is only trusted as far as this replica can check it
// (see refusal): the rest are refused, noted once each.
func (d *Overlay) adopt(registered map[string]map[string]discovery.Endpoint, now time.Time, first bool) {
	if first {
		d.start = now
	}
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
		local, seen := d.gone[name][id]
		if why := d.refusal(g, seen, registered, now); why != "" {
			if at, done := d.refused[k]; !done || !at.Equal(g.Until) {
				d.refused[k] = g.Until
				d.newRefused = append(d.newRefused, Refused{Departed: g, Reason: why})
			}
			continue
		}
		ep := g.Endpoint
		if seen {
			ep = local.ep // what discovery saw here, not what the KV says
		}
		if d.gone[name] == nil {
			d.gone[name] = map[string]departed{}
		}
		d.gone[name][id] = departed{ep: ep, until: g.Until}
	}
}

// Reasons a shared departure is refused (Refused.Reason).
const (
	RefusedNoWindow       = "no_window"       // the service's drain window is 0: nothing is kept
	RefusedBeyondWindow   = "beyond_window"   // its removal time is more than the drain window away
	RefusedUnknownService = "unknown_service" // discovery does not serve the service
	RefusedNotSeen        = "not_seen"        // it left after this replica started, yet discovery here never had it
)

// DepartSkew is the slack allowed between the replicas' clocks when
// judging whether a departure happened before this replica started.
const DepartSkew = 5 * time.Second

// Refused is a shared departure this replica does not serve, and why.
type Refused struct {
	Departed
	Reason string // one of the Refused* reasons
}

// refusal says why the shared departure g is not served at now, or "" if
// it is: it must end within the service's drain window from now, and be
// of an endpoint discovery saw here (seen: it left here too), or else of
// a service discovery serves, departed before this replica started (so it
// could not have seen it; DepartSkew allowed).
func (d *Overlay) refusal(g Departed, seen bool, registered map[string]map[string]discovery.Endpoint, now time.Time) string {
	w := time.Duration(0)
	if d.cfg.Window != nil {
		w = d.cfg.Window(g.Service)
	}
	switch _, served := registered[g.Service]; {
	case w <= 0:
		return RefusedNoWindow
	case g.Until.After(now.Add(w)):
		return RefusedBeyondWindow
	case seen:
		return ""
	case !served:
		return RefusedUnknownService
	case !g.Until.Add(-w).Before(d.start.Add(DepartSkew)):
		return RefusedNotSeen
	}
	return ""
}

// Refusals returns (sorted by service and endpoint), and forgets, the
// shared departures refused since the last call; each is reported once
// (again only if its removal time changes).
func (d *Overlay) Refusals() []Refused {
	out := d.newRefused
	d.newRefused = nil
	slices.SortFunc(out, func(a, b Refused) int {
		return strings.Compare(a.Service+"\x00"+a.Endpoint.ID, b.Service+"\x00"+b.Endpoint.ID)
	})
	return out
}

// refusedLogLines bounds the log lines of the shared departures refused
// by one Apply; the rest are counted in one line.
const refusedLogLines = 5

// noteRefused counts the refused departures and logs the first few,
// their names clipped. s.mu is held.
func (s *Manager) noteRefused(list []Refused) {
	for i, r := range list {
		s.refused.WithLabelValues(r.Reason).Inc()
		if i < refusedLogLines {
			s.log.Warn("a shared departure is not served", "service", logclip.Name(r.Service), "endpoint", logclip.Name(r.Endpoint.ID),
				"until", r.Until, "reason", r.Reason)
		}
	}
	if n := len(list) - refusedLogLines; n > 0 {
		s.log.Warn("more shared departures are not served", "suppressed", n)
	}
}
