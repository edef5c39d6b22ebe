package discovery

import (
	"slices"
	"time"
)

// Defaults of the mass-removal guard (discovery.mass_removal_guard,
// discovery.mass_removal_hold and discovery.mass_removal_window).
const (
	DefaultMassRemovalFraction = 0.5
	DefaultMassRemovalHold     = 30 * time.Second
	DefaultMassRemovalWindow   = 5 * time.Minute
)

// minServiceRemoved is the fewest instances a service must lose for its
// own loss to be a mass removal: one instance leaving never is.
const minServiceRemoved = 2

// RemovalGuard is the pure core of the mass-removal guard: it decides
// whether a snapshot is applied at once or held, because it removes more
// than a fraction of the instances (a truncated catalog, a Consul agent
// restarted with an empty catalog, or removals sliced a few at a time).
// It reads no clock: every call is given now. Not safe for concurrent use.
//
// An instance is a (service, endpoint ID) pair; one whose health changes
// is not removed. Removals are judged per service against the largest
// number of instances the service had in any snapshot applied within the
// window (peak), so removals that arrive a few at a time add up: a
// service's removed count is the larger of the instances of the last
// applied snapshot it lacks and peak minus what it has now. A snapshot
// is a mass removal when, over all services, more than fraction of the
// peak instances are removed, or when one service loses more than
// fraction of its own peak (at least minServiceRemoved instances).
//
// A held snapshot is applied when its hold ends (and the window starts
// afresh from it); a newer snapshot replaces it, and is applied at once
// (cancelling the hold) if it is no longer a mass removal, or stays held
// with the same deadline if it still is. The first snapshot, and any
// snapshot after an empty one, is applied at once.
type RemovalGuard struct {
	fraction float64       // hold when removed > fraction * peak; in (0, 1], 1 never holds
	hold     time.Duration // how long; 0 never holds
	window   time.Duration // how long an applied snapshot's counts stay in the peaks; 0: the last one only

	base    map[string]map[string]bool // instances of the last applied snapshot, by service
	total   int                        // len of base, over all services
	peaks   map[string]*peakQueue      // per service: instance counts applied within the window
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
	// Removed of Total: instances removed, over all services, of the peak
	// instances within the window (the offered snapshot, or for Expired
	// the applied one).
	Removed, Total int
	// Service is the service that lost the largest share of its peak, and
	// ServiceRemoved of ServiceTotal its loss; "" when none lost any.
	Service                      string
	ServiceRemoved, ServiceTotal int
}

// NewRemovalGuard returns a guard holding, for hold (0: never),
// snapshots that remove more than fraction (in (0, 1]; 1: never) of the
// instances seen within window (0: of the last applied snapshot).
func NewRemovalGuard(fraction float64, hold, window time.Duration) *RemovalGuard {
	return &RemovalGuard{fraction: fraction, hold: hold, window: max(window, 0), peaks: map[string]*peakQueue{}}
}

// Offer takes a new snapshot at time now and says whether to apply it.
func (g *RemovalGuard) Offer(s Snapshot, now time.Time) Verdict {
	v, mass := g.judge(s, now)
	if !mass {
		v.Cancelled = g.holding
		return g.apply(s, v, now, false)
	}
	g.pending = s
	if !g.holding {
		g.holding, g.until, v.Started = true, now.Add(g.hold), true
	}
	if !now.Before(g.until) {
		v.Expired = true
		return g.apply(s, v, now, true)
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
	v, _ := g.judge(g.pending, now)
	if now.Before(g.until) {
		v.Held, v.Until = true, g.until
		return v
	}
	v.Expired = true
	return g.apply(g.pending, v, now, true)
}

// judge counts what s removes at now and reports whether that is a mass
// removal.
func (g *RemovalGuard) judge(s Snapshot, now time.Time) (Verdict, bool) {
	sets, _ := instances(s)
	have := make(map[string]int, len(sets))
	for name, ids := range sets {
		have[name] = len(ids)
	}
	var v Verdict
	mass, worst := false, -1.0
	for _, name := range g.services(have) {
		peak := g.peak(name, now)
		removed := max(g.lost(name, sets[name]), peak-have[name], 0)
		v.Removed += removed
		v.Total += peak
		if removed == 0 || peak == 0 {
			continue
		}
		if share := float64(removed) / float64(peak); share > worst {
			worst, v.Service, v.ServiceRemoved, v.ServiceTotal = share, name, removed, peak
		}
		mass = mass || (removed >= minServiceRemoved && g.over(removed, peak))
	}
	mass = mass || g.over(v.Removed, v.Total)
	return v, mass && g.armed()
}

// armed reports whether the guard holds anything: a non-empty snapshot
// was applied last and the guard is on.
func (g *RemovalGuard) armed() bool {
	return g.applied && g.total > 0 && g.hold > 0 && g.fraction < 1
}

// over reports whether removing removed of total is more than the fraction.
func (g *RemovalGuard) over(removed, total int) bool {
	return total > 0 && float64(removed) > g.fraction*float64(total)
}

// services lists, sorted, every service of the base, the peaks or have.
func (g *RemovalGuard) services(have map[string]int) []string {
	seen := make(map[string]bool, len(have)+len(g.peaks))
	var out []string
	add := func(name string) {
		if !seen[name] {
			seen[name] = true
			out = append(out, name)
		}
	}
	for name := range g.base {
		add(name)
	}
	for name := range g.peaks {
		add(name)
	}
	for name := range have {
		add(name)
	}
	slices.Sort(out)
	return out
}

// peak is the largest instance count of service name applied within the
// window before now (the last applied count included).
func (g *RemovalGuard) peak(name string, now time.Time) int {
	q := g.peaks[name]
	if q == nil {
		return len(g.base[name])
	}
	return max(q.max(now.Add(-g.window)), len(g.base[name]))
}

// lost counts the instances of service name in the applied snapshot
// that have (its instances now) lacks.
func (g *RemovalGuard) lost(name string, have map[string]bool) int {
	n := 0
	for id := range g.base[name] {
		if !have[id] {
			n++
		}
	}
	return n
}

// apply makes s the applied snapshot at now; fresh (a hold ended) starts
// the window afresh from s.
func (g *RemovalGuard) apply(s Snapshot, v Verdict, now time.Time, fresh bool) Verdict {
	g.base, g.total = instances(s)
	if fresh {
		clear(g.peaks)
	}
	cutoff := now.Add(-g.window)
	for name, q := range g.peaks {
		if _, ok := g.base[name]; !ok {
			q.push(now, 0)
		}
		if q.max(cutoff) == 0 {
			delete(g.peaks, name)
		}
	}
	for name, ids := range g.base {
		q := g.peaks[name]
		if q == nil {
			q = &peakQueue{}
			g.peaks[name] = q
		}
		q.push(now, len(ids))
	}
	g.applied, g.holding, g.pending, g.until = true, false, Snapshot{}, time.Time{}
	v.Apply, v.Snapshot = true, s
	return v
}

// peakQueue is a monotonic queue of (time, count): counts strictly
// decrease from front to back, so the front is the largest count pushed
// since the cutoff. The newest entry always stays.
type peakQueue struct {
	at    []time.Time
	count []int
}

// push adds count at time at (not before the last push).
func (q *peakQueue) push(at time.Time, count int) {
	for n := len(q.count); n > 0 && q.count[n-1] <= count; n-- {
		q.at, q.count = q.at[:n-1], q.count[:n-1]
	}
	q.at, q.count = append(q.at, at), append(q.count, count)
}

// max drops the entries pushed before cutoff (but the newest) and returns
// the largest count left.
func (q *peakQueue) max(cutoff time.Time) int {
	i := 0
	for i < len(q.at)-1 && q.at[i].Before(cutoff) {
		i++
	}
	if i > 0 {
		q.at, q.count = slices.Delete(q.at, 0, i), slices.Delete(q.count, 0, i)
	}
	if len(q.count) == 0 {
		return 0
	}
	return q.count[0]
}

// instances indexes the (service, endpoint ID) pairs of s.
func instances(s Snapshot) (map[string]map[string]bool, int) {
	out := make(map[string]map[string]bool, len(s.Services))
	n := 0
	for _, svc := range s.Services {
		ids := out[svc.Name]
		if ids == nil {
			ids = make(map[string]bool, len(svc.Endpoints))
			out[svc.Name] = ids
		}
		for _, ep := range svc.Endpoints {
			if !ids[ep.ID] {
				ids[ep.ID] = true
				n++
			}
		}
	}
	return out, n
}
