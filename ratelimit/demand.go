package ratelimit

import (
	"hash/maphash"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultDemandKeys bounds the keys whose demand per class is tracked.
const DefaultDemandKeys = 100_000

const (
	demandShards = 16
	// demandMinCoverage is the least share of a period a young key's
	// counts are taken to cover: its first hits do not extrapolate to
	// an absurd rate.
	demandMinCoverage = 0.01
	demandEvictSample = 16
	// slidingReserveShare is the share of a unit the sliding windows
	// reserve the higher classes' demand for.
	slidingReserveShare = 0.25
)

// demand estimates, per bucket key, how many hits each criticality class
// asks for per unit of the key's limit, refused hits included: a sliding
// count over the last two periods (a period is the limit's unit, aligned
// as the windows are), the way the sliding window algorithm estimates
// usage. The counts are this process's; replicas sharing a store scale
// them by the share of the key's usage this process admitted (the
// store's usage over the hits admitted here in the same span), so each
// reserves for the whole fleet. A key is tracked from the first request
// of a class other than CRITICAL (the class of requests without a
// criticality entry), so traffic without criticality costs one atomic
// load.
type demand struct {
	seed     maphash.Seed
	perShard int
	size     atomic.Int64
	shards   [demandShards]demandShard
}

type demandShard struct {
	mu sync.Mutex
	m  map[string]*classDemand
}

// classDemand is one key's hits per class in its current period
// [start, start+period) and the one before, in ns; the hits this
// process admitted in them; and the fleet's usage over this process's.
type classDemand struct {
	created, start, period, last int64
	cur, prev                    [numCriticalities]float64
	adm, admPrev                 float64
	scale                        float64 // >= 1
}

func newDemand(maxKeys int) *demand {
	d := &demand{seed: maphash.MakeSeed(), perShard: max(maxKeys/demandShards, 1)}
	for i := range d.shards {
		d.shards[i].m = map[string]*classDemand{}
	}
	return d
}

// add counts hits of class c for key, whose limit has the given unit, at
// t (Unix ns), and returns the demand of the classes above c: hits per
// unit, over the last unit, for the fleet; and whether the key is tracked
// (its decision is then to be observed). Zero for untracked keys.
func (d *demand) add(key string, u Unit, c Criticality, hits uint32, t int64) (float64, bool) {
	if c == Critical && d.size.Load() == 0 {
		return 0, false
	}
	sh := &d.shards[maphash.String(d.seed, key)%demandShards]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.m[key]
	if e == nil {
		if c == Critical {
			return 0, false
		}
		if len(sh.m) >= d.perShard {
			d.evict(sh)
		}
		e = &classDemand{}
		sh.m[key] = e
		d.size.Add(1)
	}
	above := e.advance(u.Duration().Nanoseconds(), t).above(c, t)
	e.cur[c] += float64(hits)
	e.last = t
	return above * e.scale, true
}

// demandMinAdmitted is how many hits this process must have admitted in
// the span before its share of the usage is measured.
const demandMinAdmitted = 8

// maxDemandScale bounds the fleet's usage over this process's.
const maxDemandScale = 64

// observe records a tracked key's decision at t: admitted hits (0 when
// refused) and the store's usage after it (Result.Used), to measure this
// process's share of the usage. Only the window algorithms report a
// usage comparable with hits: the buckets keep the last scale.
func (d *demand) observe(key string, l Limit, admitted uint32, used uint64, t int64) {
	sh := &d.shards[maphash.String(d.seed, key)%demandShards]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.m[key]
	if e == nil || e.period != l.Unit.Duration().Nanoseconds() {
		return
	}
	e.advance(e.period, t)
	e.adm += float64(admitted)
	local := e.adm // the fixed window is the current period
	if l.Algorithm != FixedWindow {
		local += e.admPrev * (1 - float64(t-e.start)/float64(e.period))
	}
	if l.Algorithm.bucket() || local < demandMinAdmitted {
		return
	}
	e.scale = min(max(float64(used)/local, 1), maxDemandScale)
}

// advance moves e's periods up to t; a new period length (the limit's
// unit changed) starts afresh.
func (e *classDemand) advance(period, t int64) *classDemand {
	if period <= 0 {
		period = int64(time.Second)
	}
	aligned := t - floorMod(t, period)
	switch {
	case e.period != period || t < e.start:
		*e = classDemand{created: t, start: aligned, period: period, scale: 1}
	case aligned == e.start:
	case aligned == e.start+period:
		e.prev, e.cur, e.start = e.cur, [numCriticalities]float64{}, aligned
		e.admPrev, e.adm = e.adm, 0
	default: // idle for a period or more
		e.prev, e.cur, e.start = [numCriticalities]float64{}, [numCriticalities]float64{}, aligned
		e.admPrev, e.adm = 0, 0
	}
	return e
}

// above is the demand per period of the classes above c at t: the hits
// of the last period (the current one and the overlapping part of the
// previous), scaled up while the key is younger than a period.
func (e *classDemand) above(c Criticality, t int64) float64 {
	p := float64(e.period)
	w := 1 - float64(t-e.start)/p // share of the previous period still in the window
	coverage := min(max(float64(t-e.created)/p, demandMinCoverage), 1)
	var sum float64
	for x := c + 1; x < numCriticalities; x++ {
		sum += e.prev[x]*w + e.cur[x]
	}
	return sum / coverage
}

// evict drops the sampled key updated longest ago; sh.mu is held.
func (d *demand) evict(sh *demandShard) {
	victim, oldest, seen := "", int64(math.MaxInt64), 0
	for k, e := range sh.m {
		if e.last < oldest {
			victim, oldest = k, e.last
		}
		if seen++; seen >= demandEvictSample {
			break
		}
	}
	if oldest != math.MaxInt64 {
		delete(sh.m, victim)
		d.size.Add(-1)
	}
}

// reserve is how many hits of a bucket of limit l to keep, at t, for
// classes that ask for above hits per unit: their expected demand until
// the window (aligned to the unit) ends, or over a quarter unit if more
// for the sliding windows (whose usage already holds the last unit's
// hits, but whose end is not a reset), or over the time a bucket takes to
// refill its burst; plus two standard deviations of a Poisson count of
// that mean, for arrivals that bunch up.
func reserve(l Limit, above float64, t int64) float64 {
	if above <= 0 {
		return 0
	}
	u := l.Unit.Duration().Nanoseconds()
	if u <= 0 {
		u = int64(time.Second)
	}
	horizon := float64(u - floorMod(t, u))
	switch {
	case l.Algorithm.bucket() && l.Requests > 0:
		horizon = float64(u) * float64(l.Burst) / float64(l.Requests)
	case l.Algorithm != FixedWindow:
		horizon = max(horizon, float64(u)*slidingReserveShare)
	}
	expected := above * horizon / float64(u)
	// Arrivals fluctuate: keep two standard deviations more (of a
	// Poisson count), or the last hits of a fixed window go to lower
	// classes that the higher ones then miss.
	return expected + 2*math.Sqrt(expected)
}

// adaptiveCap is the cap of a class whose higher classes ask for above
// hits per unit: the capacity less their reserve, rounded up.
func adaptiveCap(l Limit, above float64, t int64) uint32 {
	capacity := l.Capacity()
	r := math.Ceil(reserve(l, above, t))
	if r >= float64(capacity) {
		return 0
	}
	return capacity - uint32(r)
}
