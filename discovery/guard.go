package discovery

import "time"

// Defaults of the mass-removal guard (discovery.mass_removal_guard and
// discovery.mass_removal_hold).
const (
	DefaultMassRemovalFraction = 0.5
	DefaultMassRemovalHold     = 30 * time.Second
)

// RemovalGuard is the pure core of the mass-removal guard: it decides
// whether a snapshot is applied at once or held, because it removes more
// than a fraction of the instances of the last applied snapshot (a
// truncated catalog, a Consul agent restarted with an empty catalog). It
// reads no clock: every call is given now. Not safe for concurrent use.
//
// An instance is a (service, endpoint ID) pair; one whose health changes
// is not removed. A held snapshot is applied when its hold ends; a newer
// snapshot replaces it, and is applied at once (cancelling the hold) if
// it is no longer a mass removal, or stays held with the same deadline
// if it still is. The first snapshot, and any snapshot after an empty
// one, is applied at once.
type RemovalGuard struct {
	fraction float64       // hold when removed > fraction * total; in (0, 1], 1 never holds
	hold     time.Duration // how long; 0 never holds

	base    map[string]map[string]bool // instances of the last applied snapshot, by service
	total   int                        // len of base, over all services
	applied bool                       // a snapshot was applied
	pending Snapshot                   // the held snapshot, while holding
	holding bool
	until   time.Time // when the held snapshot is applied
}

// Verdict is what the guard decided about a snapshot (Offer) or a held
// one (Due).
type Verdict struct {
	Apply    bool     // emit Snapshot now
	Snapshot Snapshot // the snapshot to emit, when Apply
	// Held: a snapshot is held (after this call) until Until.
	Held  bool
	Until time.Time
	// Started: the hold began with this call; Cancelled: a newer snapshot
	// that is not a mass removal ended it; Expired: the held snapshot is
	// applied because its hold is over.
	Started, Cancelled, Expired bool
	// Removed of Total: instances of the last applied snapshot the
	// offered (or, for Expired, the applied) snapshot does not have.
	Removed, Total int
}

// NewRemovalGuard returns a guard holding snapshots that remove more
// than fraction (in (0, 1]; 1: never) of the instances, for hold (0:
// never).
func NewRemovalGuard(fraction float64, hold time.Duration) *RemovalGuard {
	return &RemovalGuard{fraction: fraction, hold: hold}
}

// Offer takes a new snapshot at time now and says whether to apply it.
func (g *RemovalGuard) Offer(s Snapshot, now time.Time) Verdict {
	removed := g.removed(s)
	v := Verdict{Removed: removed, Total: g.total}
	if !g.mass(removed) {
		v.Cancelled = g.holding
		return g.apply(s, v)
	}
	g.pending = s
	if !g.holding {
		g.holding, g.until, v.Started = true, now.Add(g.hold), true
	}
	if !now.Before(g.until) {
		v.Expired = true
		return g.apply(s, v)
	}
	v.Held, v.Until = true, g.until
	return v
}

// Due applies the held snapshot if its hold is over at now; otherwise it
// reports the hold in force (or nothing, when none is).
func (g *RemovalGuard) Due(now time.Time) Verdict {
	if !g.holding {
		return Verdict{}
	}
	v := Verdict{Removed: g.removed(g.pending), Total: g.total}
	if now.Before(g.until) {
		v.Held, v.Until = true, g.until
		return v
	}
	v.Expired = true
	return g.apply(g.pending, v)
}

// mass reports whether removing removed of the applied instances is held.
func (g *RemovalGuard) mass(removed int) bool {
	if !g.applied || g.total == 0 || g.hold <= 0 || g.fraction >= 1 {
		return false
	}
	return float64(removed) > g.fraction*float64(g.total)
}

func (g *RemovalGuard) apply(s Snapshot, v Verdict) Verdict {
	g.base, g.total = instances(s)
	g.applied, g.holding, g.pending, g.until = true, false, Snapshot{}, time.Time{}
	v.Apply, v.Snapshot = true, s
	return v
}

// removed counts the instances of the applied snapshot that s lacks.
func (g *RemovalGuard) removed(s Snapshot) int {
	kept := 0
	for _, svc := range s.Services {
		ids := g.base[svc.Name]
		if ids == nil {
			continue
		}
		for _, ep := range svc.Endpoints {
			if ids[ep.ID] {
				kept++
			}
		}
	}
	return max(g.total-kept, 0) // s is normalized: no instance twice
}

// instances indexes the (service, endpoint ID) pairs of s.
func instances(s Snapshot) (map[string]map[string]bool, int) {
	out := make(map[string]map[string]bool, len(s.Services))
	n := 0
	for _, svc := range s.Services {
		ids := make(map[string]bool, len(svc.Endpoints))
		for _, ep := range svc.Endpoints {
			if !ids[ep.ID] {
				ids[ep.ID] = true
				n++
			}
		}
		out[svc.Name] = ids
	}
	return out, n
}
