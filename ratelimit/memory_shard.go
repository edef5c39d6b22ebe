package ratelimit

import "time"

// entrySize is the accounted bytes of an entry of a key of n bytes with
// state st.
func entrySize(n int, st *State) int64 {
	return int64(memEntryOverhead + n + 8*cap(st.Log))
}

// insert adds a new entry for key, making room when the shard is full;
// nil when it cannot without dropping a key that holds usage.
func (s *memShard) insert(key memKey, t int64, maxKeys int, maxBytes int64) *memEntry {
	s.inserts++
	size := entrySize(len(key.key), &State{})
	full := func() bool { return len(s.m) >= maxKeys || s.bytes+size > maxBytes }
	switch {
	case full():
		s.stats.evictedFull += uint64(s.sweep(t, evictSample))
		if full() {
			return nil
		}
	case s.inserts%sweepEvery == 0:
		s.stats.evictedFull += uint64(s.sweep(t, sweepSample))
	}
	e := &memEntry{size: size}
	s.m[key] = e
	s.bytes += size
	s.peak = max(s.peak, len(s.m))
	return e
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
			delete(s.m, k)
			s.bytes -= e.size
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

// decideOverflow decides c, whose key found the shard full, against the
// overflow slot of its hash h (the key's, mixed with its unit and
// algorithm); a sliding log is counted as a sliding window there, so
// that a slot keeps no log.
func (s *memShard) decideOverflow(h uint64, now time.Time, c Check) Result {
	if s.overflow == nil {
		s.overflow = make([]memSlot, MemoryOverflowSlots)
	}
	s.stats.overflowed++
	if c.Limit.Algorithm == SlidingLog {
		c.Limit.Algorithm = SlidingWindow
	}
	h ^= (uint64(c.Limit.Unit)<<8 | uint64(c.Limit.Algorithm)) * 0x9e3779b97f4a7c15
	slot := &s.overflow[(h>>32)%MemoryOverflowSlots]
	return Decide(&slot.st, now, c)
}
