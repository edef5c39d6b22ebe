package ratelimit

import (
	"hash/maphash"
	"time"
)

// entrySize is the accounted bytes of an entry of a key of n bytes with
// state st.
func entrySize(n int, st *State) int64 {
	return int64(memEntryOverhead + n + 8*cap(st.Log))
}

// memBounds are a shard's bounds and its sketches' size.
type memBounds struct {
	keys  int
	bytes int64
	cells int
	seed  maphash.Seed
}

// insert adds a new entry for c's key (of hash h), making room when the
// shard is full (dropping expired keys, else evicting the coldest of a
// sample); nil when it cannot. A key of a kind with a sketch starts from
// its estimate there.
func (s *memShard) insert(key memKey, h uint64, now time.Time, c Check, b memBounds) *memEntry {
	t := now.UnixNano()
	s.inserts++
	size := entrySize(len(key.key), &State{})
	full := func() bool { return len(s.m) >= b.keys || s.bytes+size > b.bytes }
	switch {
	case full():
		for range maxEvictions {
			k, cold := s.makeRoom(t)
			if !full() || cold == nil {
				break
			}
			s.evict(k, cold, t, b)
		}
		if full() {
			return nil
		}
	case s.inserts%sweepEvery == 0:
		s.stats.evictedFull += uint64(s.sweep(t, sweepSample))
	}
	e := &memEntry{size: size}
	if sk := s.sketchOf(kindOf(c.Limit), 0); sk != nil {
		e.st = sk.estimate(h, now, c)
	}
	s.m[key] = e
	s.bytes += size
	s.peak = max(s.peak, len(s.m))
	return e
}

// makeRoom drops the expired keys among coldSample examined ones (from a
// random place) and returns the coldest of the others: the one that used
// the least of its cap at its last decision (nil when none is left).
func (s *memShard) makeRoom(t int64) (memKey, *memEntry) {
	var coldKey memKey
	var cold *memEntry
	seen := 0
	for k, e := range s.m {
		if seen >= coldSample {
			break
		}
		seen++
		if e.expires <= t {
			s.drop(k, e)
			s.stats.evictedFull++
			continue
		}
		if cold == nil || e.heat < cold.heat {
			coldKey, cold = k, e
		}
	}
	return coldKey, cold
}

// evict drops e, a key holding usage: a cold one (under half its cap) is
// forgotten, a hot one folded into its kind's sketch.
func (s *memShard) evict(k memKey, e *memEntry, t int64, b memBounds) {
	s.drop(k, e)
	if e.heat < hotHeat {
		s.stats.evictedCold++
		return
	}
	s.stats.evictedHot++
	sk := s.sketchOf(kindOf(Limit{Algorithm: k.alg, Unit: k.unit}), b.cells)
	sk.fold(maphash.String(b.seed, k.key), &e.st, t)
}

// drop removes key k, holding e, and its bytes.
func (s *memShard) drop(k memKey, e *memEntry) {
	delete(s.m, k)
	s.bytes -= e.size
}

// sketchOf is the shard's sketch of kind k; with cells > 0 it is made
// (of that many cells) if missing, else nil when missing.
func (s *memShard) sketchOf(k memKind, cells int) *memSketch {
	for _, sk := range s.sketches {
		if sk.kind == k {
			return sk
		}
	}
	if cells == 0 {
		return nil
	}
	sk := &memSketch{kind: k, cells: make([]memCell, cells)}
	s.sketches = append(s.sketches, sk)
	s.bytes += int64(cells * memCellBytes)
	return sk
}

// heatOf is the share of capacity that used makes, in [0, 65535],
// rounded up (so half the capacity is hotHeat).
func heatOf(used uint64, capacity uint32) uint16 {
	if capacity == 0 || used >= uint64(capacity) {
		return 65535
	}
	return uint16((used*65535 + uint64(capacity) - 1) / uint64(capacity))
}

// resize accounts for e's sliding log after a decision.
func (s *memShard) resize(e *memEntry, keyLen int) {
	size := entrySize(keyLen, &e.st)
	s.bytes += size - e.size
	e.size = size
}

// sweep drops the expired keys among n examined ones (from a random
// place) and returns how many it dropped. Expired keys hold no usage.
func (s *memShard) sweep(t int64, n int) int {
	seen, dropped := 0, 0
	for k, e := range s.m {
		if seen >= n {
			break
		}
		seen++
		if e.expires <= t {
			s.drop(k, e)
			dropped++
		}
	}
	return dropped
}

// shrink rebuilds the map once it holds under a quarter of its peak:
// Go's maps never give back their tables.
func (s *memShard) shrink() {
	if s.peak < 1024 || len(s.m)*4 > s.peak {
		return
	}
	m := make(map[memKey]*memEntry, len(s.m))
	for k, e := range s.m {
		m[k] = e
	}
	s.m, s.peak = m, len(m)
}

// decideOverflow decides c, whose key (of hash h) found the shard full
// and could not make room, in its kind's sketch: from the key's estimate
// there, folded back after (a sliding log is counted as a sliding window
// there).
func (s *memShard) decideOverflow(h uint64, now time.Time, c Check, b memBounds) Result {
	s.stats.overflowed++
	if c.Limit.Algorithm == SlidingLog {
		c.Limit.Algorithm = SlidingWindow
	}
	sk := s.sketchOf(kindOf(c.Limit), b.cells)
	st := sk.estimate(h, now, c)
	r := Decide(&st, now, c)
	sk.fold(h, &st, now.UnixNano())
	return r
}
