package weights

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"
)

// ZoneKey is a zone of endpoints: their Locality's Region and Zone (Region
// defaults to the Consul datacenter).
type ZoneKey struct{ Region, Zone string }

// String is "region/zone", as the metrics and logs show it.
func (k ZoneKey) String() string { return k.Region + "/" + k.Zone }

// ZoneSpill is one zone's spill state for one service.
type ZoneSpill struct {
	// Keep is the share of its own nodes' requests the zone keeps, in
	// [MinKeep, 1]; 1 = no spill.
	Keep float64 `json:"keep"`
	// Spare is the requests/s its serving endpoints can still take below
	// OverloadThreshold: max(0, threshold*Capacity - load); >= 0.
	Spare float64 `json:"spare"`
	// Utilization is measured: the sum of load over the sum of capacity of
	// its serving endpoints; 0 = unknown.
	Utilization float64 `json:"utilization"`
	// Capacity is requests/s at utilization 1 of its serving endpoints
	// (the sum of their Row.Capacity).
	Capacity float64 `json:"capacity"`
}

// SpillPublisher is implemented by a Publisher that takes spill states
// (the xDS server will); the pipeline type-asserts its Publisher to it.
type SpillPublisher interface {
	SetSpill(map[string]map[ZoneKey]ZoneSpill) // service -> zone -> state
}

// MinKeep is the floor of ZoneSpill.Keep: an overloaded zone keeps at
// least 5% of its own nodes' requests, so its endpoints keep serving and
// reporting, and the controller sees when to take the traffic back.
const MinKeep = 0.05

// ZoneLoad is what the spill controller reads of one zone at one step.
type ZoneLoad struct {
	Capacity float64 // requests/s at utilization 1 of its serving endpoints of known capacity; >= 0
	Load     float64 // requests/s those endpoints serve now; >= 0
}

// Spill reasons, as /debug/weights shows them.
const (
	SpillLocal      = "local"      // Keep 1: nothing spilled
	SpillSpilling   = "spilling"   // Keep < 1, last moved down (or never moved up)
	SpillRecovering = "recovering" // Keep < 1, last moved up
)

// SpillConfig tunes the spill controller; the marks and the period are the
// overload guard's (weights.overload_*), see SpillConfigFrom.
type SpillConfig struct {
	Threshold float64       // utilization in (0, MaxUtilization] above which a zone spills
	Recover   float64       // utilization in (0, Threshold] below which it takes traffic back
	Period    time.Duration // Keep moves at most once per this (> 0), on the mean utilization over it
	Factor    float64       // in (0, 1): the most Keep a saturated zone (mean utilization >= 1) keeps per move
}

// SpillConfigFrom takes the overload guard's marks and period.
func SpillConfigFrom(c Config) SpillConfig {
	return SpillConfig{Threshold: c.OverloadThreshold, Recover: c.OverloadRecover, Period: c.OverloadPeriod,
		Factor: c.OverloadFactor}
}

// Validate reports every invalid field at once, wrapping ErrInvalidConfig.
func (c SpillConfig) Validate() error {
	var errs []error
	if !(c.Threshold > 0 && c.Threshold <= MaxUtilization) {
		errs = append(errs, fmt.Errorf("spill threshold %v not in (0, %v]", c.Threshold, MaxUtilization))
	}
	if !(c.Recover > 0 && c.Recover <= c.Threshold) {
		errs = append(errs, fmt.Errorf("spill recover mark %v not in (0, threshold %v]", c.Recover, c.Threshold))
	}
	if !(c.Factor > 0 && c.Factor < 1) {
		errs = append(errs, fmt.Errorf("spill factor %v not in (0, 1)", c.Factor))
	}
	if c.Period <= 0 {
		errs = append(errs, fmt.Errorf("spill period %v must be positive", c.Period))
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrInvalidConfig, errors.Join(errs...))
}

// Spiller is the capacity-aware spill controller: per service and zone it
// keeps Keep, the share of the zone's own nodes' requests the zone serves
// (the rest goes to the next locality level, spread there in proportion
// to Spare). Pure: no clock (Step takes now), no I/O; not safe for
// concurrent use.
type Spiller struct {
	cfg   SpillConfig
	zones map[string]map[ZoneKey]*zoneSpill // service -> zone -> state
}

// zoneSpill is one zone's controller state.
type zoneSpill struct {
	keep   float64
	reason string
	from   time.Time // the current window opened at its first reading; zero: none yet
	sum    float64   // utilization readings in the window
	n      int
}

// NewSpiller validates cfg and returns a controller with no zones.
func NewSpiller(cfg SpillConfig) (*Spiller, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Spiller{cfg: cfg, zones: map[string]map[ZoneKey]*zoneSpill{}}, nil
}

// Step feeds the controller the zones of service at now and returns their
// states. Zones absent from loads are forgotten (a zone that comes back
// starts at Keep 1). Per zone, with U = Load/Capacity (unknown when the
// capacity is 0), the readings of known U are averaged over windows of
// Period (a window opens at the last move, or at its first reading after a
// longer gap), and at the end of each window, on its mean m:
//
//	m >  Threshold:            Keep *= Threshold/m (at most Factor if m >= 1), at least MinKeep
//	Recover <= m <= Threshold: Keep unchanged (hysteresis)
//	m <  Recover:              Keep *= (Threshold+Recover)/2/m, at most 1
//
// A cut spills exactly the excess load Capacity*(m - Threshold) of a zone
// that serves only its own nodes, so its predicted utilization is the
// threshold (a zone that also serves others' spill sheds less: the next
// window finds the rest); a saturated zone cannot show its excess and
// keeps at most Factor (the guard's OverloadFactor, 0.75) per move. But the load spilled by all
// of a service's zones at one step never exceeds the Spare its zones had
// before it (zones in key order take from that pool): spilling what no
// zone can take would only move the overload. A gain aims at the middle
// of the marks, inside the band, with room on both sides.
func (s *Spiller) Step(now time.Time, service string, loads map[ZoneKey]ZoneLoad) map[ZoneKey]ZoneSpill {
	states := s.zones[service]
	if states == nil {
		states = map[ZoneKey]*zoneSpill{}
		s.zones[service] = states
	}
	for k := range states {
		if _, ok := loads[k]; !ok {
			delete(states, k)
		}
	}
	out := make(map[ZoneKey]ZoneSpill, len(loads))
	pool := 0.0
	for k, l := range loads {
		c, load := clean(l.Capacity), clean(l.Load)
		z := ZoneSpill{Capacity: c, Spare: max(0, s.cfg.Threshold*c-load)}
		if c > 0 {
			z.Utilization = min(load/c, MaxUtilization)
		}
		pool += z.Spare
		out[k] = z
	}
	for _, k := range slices.SortedFunc(maps.Keys(loads), compareZones) {
		st := states[k]
		if st == nil {
			st = &zoneSpill{keep: 1, reason: SpillLocal}
			states[k] = st
		}
		z := out[k]
		pool -= s.read(st, z, now, pool)
		z.Keep = st.keep
		out[k] = z
	}
	return out
}

// read adds zone state st's reading z at now and, at the end of a window,
// moves its Keep on the window's mean; it returns the load (requests/s)
// the move spilled out of pool, the spare capacity still unclaimed.
func (s *Spiller) read(st *zoneSpill, z ZoneSpill, now time.Time, pool float64) float64 {
	if z.Utilization <= 0 {
		return 0 // unknown: no reading
	}
	if st.n == 0 && (st.from.IsZero() || now.Sub(st.from) > s.cfg.Period) {
		st.from = now // a window opens at its first reading, or at the last move if that was recent
	}
	st.sum += z.Utilization
	st.n++
	if now.Sub(st.from) < s.cfg.Period {
		return 0
	}
	m := st.sum / float64(st.n)
	st.from, st.sum, st.n = now, 0, 0
	switch {
	case m > s.cfg.Threshold:
		f := s.cfg.Threshold / m
		if m >= 1 {
			f = min(f, s.cfg.Factor) // saturated: the excess does not show
		}
		load := m * z.Capacity
		if load*(1-f) > pool {
			f = 1 - max(pool, 0)/load
		}
		keep := max(st.keep*f, MinKeep)
		if keep >= st.keep {
			return 0
		}
		spilled := load * (1 - keep/st.keep)
		st.keep, st.reason = keep, SpillSpilling
		return spilled
	case m >= s.cfg.Recover || st.keep >= 1:
		return 0
	}
	st.keep, st.reason = min(st.keep*(s.cfg.Threshold+s.cfg.Recover)/2/m, 1), SpillRecovering
	if st.keep > 1-1e-9 {
		st.keep, st.reason = 1, SpillLocal // no rounding residue once fully back
	}
	return 0
}

// State returns the last state of one zone of service: its Keep and
// reason; false if the controller does not know the zone.
func (s *Spiller) State(service string, k ZoneKey) (keep float64, reason string, ok bool) {
	st := s.zones[service][k]
	if st == nil {
		return 0, "", false
	}
	return st.keep, st.reason, true
}

// Forget drops the services not in keep.
func (s *Spiller) Forget(keep map[string]bool) {
	for name := range s.zones {
		if !keep[name] {
			delete(s.zones, name)
		}
	}
}

// clean maps a rate that is not a finite number >= 0 to 0 (unknown).
func clean(v float64) float64 {
	if !(v > 0) || math.IsInf(v, 1) {
		return 0
	}
	return v
}

// compareZones orders zones by region, then zone.
func compareZones(a, b ZoneKey) int {
	return cmp.Or(cmp.Compare(a.Region, b.Region), cmp.Compare(a.Zone, b.Zone))
}
