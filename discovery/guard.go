package discovery

import (
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
// what of a snapshot is applied at once and what is held, because it
// removes more than a fraction of the instances (a truncated catalog, a
// Consul agent restarted with an empty catalog, or removals sliced a few
// at a time). It reads no clock: every call is given now. Not safe for
// concurrent use.
//
// An instance is a (service, endpoint ID) pair; one whose health changes
// is not removed. Removals are judged per service against the largest
// number of instances the service had in any snapshot applied in full
// within the window (peak), so removals that arrive a few at a time add
// up: a service's removed count is the larger of the instances of the
// last applied snapshot it lacks and peak minus what it has now.
//
// Two rules, two kinds of hold:
//   - a service that loses more than fraction of its own peak (at least
//     minServiceRemoved instances) has only its removals held: the
//     applied snapshot is the offered one (every other service, and the
//     held service's additions and health changes, at once) plus the held
//     service's removed instances as they were in the last applied
//     snapshot. Each held service has its own deadline; its hold ends
//     when a newer snapshot is no longer a mass removal for it
//     (cancelled) or at the deadline (expired: its removals are applied
//     and its window starts afresh). While held, its counts are not taken
//     into its peak.
//   - a snapshot that removes, over all services, more than fraction of
//     the peak instances is held whole: nothing is applied until a newer
//     snapshot is no longer such a removal (then the rule above judges it)
//     or the deadline passes (then it is applied as offered, every hold
//     ends and the window starts afresh for every service).
//
// A newer snapshot that is still a mass removal keeps the deadline. The
// first snapshot, and any snapshot after an empty one, is applied at once.
type RemovalGuard struct {
	fraction float64       // hold when removed > fraction * peak; in (0, 1], 1 never holds
	hold     time.Duration // how long; 0 never holds
	window   time.Duration // how long an applied count stays in the peaks; 0: the last one only

	base    map[string]map[string]Endpoint // instances of the last applied snapshot, by service and ID
	total   int                            // instances in base
	peaks   map[string]*peakQueue          // per service: instance counts applied in full within the window
	applied bool                           // a snapshot was applied
	offered Snapshot                       // the newest snapshot offered

	holding bool                 // the whole of offered is held
	until   time.Time            // when the whole hold ends
	held    map[string]time.Time // services whose removals are held, with their deadlines
}

// HoldEvent is what happened to a service's hold in one call.
type HoldEvent int

// Hold events.
const (
	HoldKept      HoldEvent = iota // in force, as before the call
	HoldStarted                    // began with this call
	HoldCancelled                  // a newer snapshot is no longer a mass removal of the service
	HoldExpired                    // its deadline passed: its removals are applied
)

var holdEventNames = [...]string{"kept", "started", "cancelled", "expired"}

func (e HoldEvent) String() string { return holdEventNames[e] }

// ServiceHold is the hold of one service's removals.
type ServiceHold struct {
	Name  string
	Event HoldEvent
	// Removed of Total: the service's removed instances, of its peak.
	Removed, Total int
	Until          time.Time // its deadline
}

// Verdict is what the guard decided about a snapshot (Offer) or the
// holds in force (Due).
type Verdict struct {
	Apply    bool     // emit Snapshot now
	Snapshot Snapshot // the snapshot to emit, when Apply
	// Held: the whole snapshot is held (after this call) until Until.
	Held  bool
	Until time.Time
	// Of the whole-snapshot hold: Started, it began with this call;
	// Cancelled, a newer snapshot that removes no more than the fraction
	// of all instances ended it; Expired, the snapshot is applied because
	// the hold is over.
	Started, Cancelled, Expired bool
	// Removed of Total: instances removed, over all services, of the peak
	// instances within the window.
	Removed, Total int
	// Service is the service that lost the largest share of its peak, and
	// ServiceRemoved of ServiceTotal its loss; "" when none lost any.
	Service                      string
	ServiceRemoved, ServiceTotal int
	// Services are the services whose removals are held after the call
	// (HoldStarted, HoldKept) or whose hold ended with it, sorted by name.
	Services []ServiceHold
	// Next is the earliest deadline of the holds in force, when Due should
	// be called; zero when nothing is held.
	Next time.Time
}

// HeldServices is how many services have their removals held after the
// call that returned v.
func (v Verdict) HeldServices() int {
	n := 0
	for _, h := range v.Services {
		if h.Event == HoldKept || h.Event == HoldStarted {
			n++
		}
	}
	return n
}

// NewRemovalGuard returns a guard holding, for hold (0: never), removals
// of more than fraction (in (0, 1]; 1: never) of the instances seen
// within window (0: of the last applied snapshot).
func NewRemovalGuard(fraction float64, hold, window time.Duration) *RemovalGuard {
	return &RemovalGuard{fraction: fraction, hold: hold, window: max(window, 0),
		peaks: map[string]*peakQueue{}, held: map[string]time.Time{}}
}

// Offer takes a new snapshot at time now and says what to apply.
func (g *RemovalGuard) Offer(s Snapshot, now time.Time) Verdict {
	g.offered = s
	j := g.judge(s, now)
	v := j.v
	if j.catalog {
		if !g.holding {
			g.holding, g.until, v.Started = true, now.Add(g.hold), true
		}
		if now.Before(g.until) {
			return g.holdWhole(v, j)
		}
		v.Expired = true
		return g.applyWhole(v, now)
	}
	v.Cancelled, g.holding, g.until = g.holding, false, time.Time{}
	var expired []string
	for _, c := range j.services {
		until, held := g.held[c.name]
		ev := HoldKept
		switch {
		case c.mass && !held:
			until, ev = now.Add(g.hold), HoldStarted
			g.held[c.name] = until
		case c.mass && !now.Before(until):
			ev, expired = HoldExpired, append(expired, c.name)
			delete(g.held, c.name)
		case c.mass:
		case held:
			ev = HoldCancelled
			delete(g.held, c.name)
		default:
			continue
		}
		v.Services = append(v.Services, ServiceHold{c.name, ev, c.removed, c.peak, until})
	}
	return g.apply(v, now, expired)
}

// Due applies what is held if its hold is over at now: the whole held
// snapshot, or the removals of the services whose deadline passed.
// Otherwise it reports the holds in force (or nothing, when none is).
func (g *RemovalGuard) Due(now time.Time) Verdict {
	if !g.holding && len(g.held) == 0 {
		return Verdict{}
	}
	j := g.judge(g.offered, now)
	v := j.v
	if g.holding {
		if now.Before(g.until) {
			return g.holdWhole(v, j)
		}
		v.Expired = true
		return g.applyWhole(v, now)
	}
	var expired []string
	for _, c := range j.services {
		until, held := g.held[c.name]
		if !held {
			continue
		}
		ev := HoldKept
		if !now.Before(until) {
			ev, expired = HoldExpired, append(expired, c.name)
			delete(g.held, c.name)
		}
		v.Services = append(v.Services, ServiceHold{c.name, ev, c.removed, c.peak, until})
	}
	if len(expired) == 0 {
		v.Next = g.next()
		return v
	}
	return g.apply(v, now, expired)
}

// holdWhole reports the whole offered snapshot held, with the service
// holds in force.
func (g *RemovalGuard) holdWhole(v Verdict, j judgement) Verdict {
	v.Held, v.Until = true, g.until
	for _, c := range j.services {
		if until, ok := g.held[c.name]; ok {
			v.Services = append(v.Services, ServiceHold{c.name, HoldKept, c.removed, c.peak, until})
		}
	}
	v.Next = g.next()
	return v
}

// applyWhole applies the offered snapshot as it is at now, ending every
// hold (their deadlines, set before the whole hold began, have passed)
// and starting the window afresh.
func (g *RemovalGuard) applyWhole(v Verdict, now time.Time) Verdict {
	j := g.judge(g.offered, now)
	for _, c := range j.services {
		if until, ok := g.held[c.name]; ok {
			v.Services = append(v.Services, ServiceHold{c.name, HoldExpired, c.removed, c.peak, until})
		}
	}
	clear(g.held)
	clear(g.peaks)
	g.holding, g.until = false, time.Time{}
	return g.apply(v, now, nil)
}

// judgement is what judge found.
type judgement struct {
	v        Verdict        // Removed, Total and the worst service
	catalog  bool           // more than the fraction of all instances removed
	services []serviceCount // every service known, sorted by name
}

// serviceCount is one service's removals.
type serviceCount struct {
	name          string
	removed, peak int
	mass          bool // more than the fraction of its peak (and at least minServiceRemoved)
}

// judge counts what s removes at now, per service and over all of them.
func (g *RemovalGuard) judge(s Snapshot, now time.Time) judgement {
	sets, _ := instances(s)
	armed := g.armed()
	var j judgement
	worst := -1.0
	for _, name := range g.services(sets) {
		peak := g.peak(name, now)
		removed := max(g.lost(name, sets[name]), peak-len(sets[name]), 0)
		c := serviceCount{name: name, removed: removed, peak: peak}
		c.mass = armed && removed >= minServiceRemoved && g.over(removed, peak)
		j.services = append(j.services, c)
		j.v.Removed += removed
		j.v.Total += peak
		if removed == 0 || peak == 0 {
			continue
		}
		if share := float64(removed) / float64(peak); share > worst {
			worst, j.v.Service, j.v.ServiceRemoved, j.v.ServiceTotal = share, name, removed, peak
		}
	}
	j.catalog = armed && g.over(j.v.Removed, j.v.Total)
	return j
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
