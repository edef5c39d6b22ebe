package ratelimit

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultOverLimitKeys is ServiceConfig.OverLimitKeys' default.
const DefaultOverLimitKeys = 100_000

const overLimitShards = 16

// overLimitCache is the local cache of keys known to be over their limit
// (Result.Exhausted) until a time: checks of such keys are refused
// without asking the store, as envoyproxy/ratelimit's local cache does.
// An entry holds only for the limit it was learnt with, so a request
// override or a reload that changes the limit asks the store again.
type overLimitCache struct {
	seed     maphash.Seed
	perShard int
	size     atomic.Int64
	shards   [overLimitShards]olShard
}

type olShard struct {
	mu sync.RWMutex
	m  map[string]olEntry
}

type olEntry struct {
	until int64 // Unix ns
	limit Limit
}

func newOverLimitCache(maxKeys int) *overLimitCache {
	c := &overLimitCache{seed: maphash.MakeSeed(), perShard: max(maxKeys/overLimitShards, 1)}
	for i := range c.shards {
		c.shards[i].m = map[string]olEntry{}
	}
	return c
}

func (c *overLimitCache) shard(key string) *olShard {
	return &c.shards[maphash.String(c.seed, key)%overLimitShards]
}

// get returns how long key stays over limit l at t (Unix ns).
func (c *overLimitCache) get(key string, l Limit, t int64) (time.Duration, bool) {
	if c.size.Load() == 0 {
		return 0, false
	}
	sh := c.shard(key)
	sh.mu.RLock()
	e, ok := sh.m[key]
	sh.mu.RUnlock()
	if !ok {
		return 0, false
	}
	if e.until <= t {
		sh.mu.Lock()
		if cur, ok := sh.m[key]; ok && cur.until <= t {
			delete(sh.m, key)
			c.size.Add(-1)
		}
		sh.mu.Unlock()
		return 0, false
	}
	if e.limit != l {
		return 0, false
	}
	return time.Duration(e.until - t), true
}

// put records that key is over limit l until until (Unix ns); a full
// shard first drops the expired entries among a sample and otherwise
// skips the key.
func (c *overLimitCache) put(key string, l Limit, until, t int64) {
	sh := c.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if _, ok := sh.m[key]; !ok && len(sh.m) >= c.perShard {
		seen := 0
		for k, e := range sh.m {
			if e.until <= t {
				delete(sh.m, k)
				c.size.Add(-1)
			}
			if seen++; seen >= evictSample {
				break
			}
		}
		if len(sh.m) >= c.perShard {
			return
		}
	}
	if _, ok := sh.m[key]; !ok {
		c.size.Add(1)
	}
	sh.m[key] = olEntry{until: until, limit: l}
}

// clear forgets every key (after a configuration change).
func (c *overLimitCache) clear() {
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		c.size.Add(-int64(len(sh.m)))
		clear(sh.m)
		sh.mu.Unlock()
	}
}
