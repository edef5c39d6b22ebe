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
// count over the last two periods (a period is the limit's unit), the
// way the sliding window algorithm estimates usage. It is local to the
// process. A key is tracked from the first request of a class other than
// CRITICAL (the class of requests without a criticality entry), so
// traffic without criticality costs one atomic load.
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
// [start, start+period) and the one before, in ns.
type classDemand struct {
	created, start, period, last int64
	cur, prev                    [numCriticalities]float64
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
// unit, over the last unit. Zero for keys without tracked demand.
func (d *demand) add(key string, u Unit, c Criticality, hits uint32, t int64) float64 {
	if c == Critical && d.size.Load() == 0 {
		return 0
	}
	sh := &d.shards[maphash.String(d.seed, key)%demandShards]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.m[key]
	if e == nil {
		if c == Critical {
			return 0
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
	return above
}

// advance moves e's periods up to t; a new period length (the limit's
// unit changed) starts afresh.
func (e *classDemand) advance(period, t int64) *classDemand {
	switch {
	case period <= 0:
		period = int64(time.Second)
		fallthrough
	case e.period != period || t < e.start:
		*e = classDemand{created: t, start: t, period: period}
	case t >= e.start+2*period:
		e.prev, e.cur, e.start = [numCriticalities]float64{}, [numCriticalities]float64{}, t
	case t >= e.start+period:
		e.prev, e.cur, e.start = e.cur, [numCriticalities]float64{}, e.start+period
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
