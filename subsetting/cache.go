package subsetting

import "sync"

// maxCachedRounds bounds the rounds (classic) or rings (steady) a plan
// keeps, each one index per backend (4 bytes). Client indices are dense:
// 16,384 cover over 500,000 clients of a steady plan with 32-client blocks.
// Beyond it, a round or ring is rebuilt on each call that needs it.
const maxCachedRounds = 1 << 14

// roundCache holds the per-round lists of a plan, built on first use. It is
// safe for concurrent use; the lists it returns are never modified.
type roundCache struct {
	mu     sync.RWMutex
	rounds map[uint64][]uint32
}

// get returns round r's list, building it with build if it is not cached.
// build must be a pure function of r: two goroutines may both build a round,
// and either result is kept.
func (c *roundCache) get(r uint64, build func(uint64) []uint32) []uint32 {
	c.mu.RLock()
	list, ok := c.rounds[r]
	c.mu.RUnlock()
	if ok {
		return list
	}
	list = build(r)
	c.mu.Lock()
	defer c.mu.Unlock()
	if prev, ok := c.rounds[r]; ok {
		return prev
	}
	if c.rounds == nil {
		c.rounds = make(map[uint64][]uint32)
	}
	if len(c.rounds) < maxCachedRounds {
		c.rounds[r] = list
	}
	return list
}
