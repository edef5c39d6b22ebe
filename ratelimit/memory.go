package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"math/bits"
	"sync"
	"time"
)

// Defaults of MemoryConfig.
const (
	DefaultMemoryShards  = 64
	DefaultMemoryMaxKeys = 1_000_000
	maxMemoryShards      = 1 << 16
	evictSample          = 32 // keys examined to make room in a full shard
	sweepEvery           = 64 // inserts between opportunistic sweeps of a shard
	sweepSample          = 8  // keys examined by such a sweep
)

// MemoryConfig configures NewMemory.
type MemoryConfig struct {
	// Shards is the number of independently locked parts of the key
	// space, a power of two in [1, 65536]; 0 means DefaultMemoryShards.
	Shards int
	// MaxKeys bounds the keys kept (at least Shards); 0 means
	// DefaultMemoryMaxKeys. A full shard first drops expired keys, then
	// the sampled key closest to expiry (which forgets its usage).
	MaxKeys int
}

// Validate reports every invalid field (zero fields are defaults).
func (c MemoryConfig) Validate() error {
	var errs []error
	if c.Shards < 0 || c.Shards > maxMemoryShards || (c.Shards > 0 && bits.OnesCount(uint(c.Shards)) != 1) {
		errs = append(errs, fmt.Errorf("shards %d is not a power of two in [1, %d]", c.Shards, maxMemoryShards))
	}
	if c.MaxKeys < 0 || (c.MaxKeys > 0 && c.MaxKeys < max(c.Shards, 1)) {
		errs = append(errs, fmt.Errorf("max keys %d is below the shards %d", c.MaxKeys, c.Shards))
	}
	if len(errs) > 0 {
		return fmt.Errorf("ratelimit: invalid memory store config: %w", errors.Join(errs...))
	}
	return nil
}

// Memory is the in-process Store: sharded maps under mutexes, bounded,
// with keys expiring once their state holds no usage. It runs the pure
// algorithms of Decide, so it answers exactly as they do.
type Memory struct {
	seed     maphash.Seed
	mask     uint64
	perShard int
	shards   []memShard
}

type memShard struct {
	mu      sync.Mutex
	m       map[memKey]*memEntry
	inserts int
	_       [40]byte // keep shards on separate cache lines
}

// memKey is what a memory entry is kept under: the check's key, unit and
// algorithm, so that limits of different units or algorithms on one
// descriptor (a rule and a request's override, say) count apart, as
// their keys in Redis do.
type memKey struct {
	key  string
	unit Unit
	alg  Algorithm
}

type memEntry struct {
	st      State
	expires int64 // Unix ns after which the entry holds no usage
}

// NewMemory returns an empty memory store.
func NewMemory(cfg MemoryConfig) (*Memory, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	shards := cfg.Shards
	if shards == 0 {
		shards = DefaultMemoryShards
	}
	maxKeys := cfg.MaxKeys
	if maxKeys == 0 {
		maxKeys = max(DefaultMemoryMaxKeys, shards)
	}
	m := &Memory{seed: maphash.MakeSeed(), mask: uint64(shards - 1),
		perShard: maxKeys / shards, shards: make([]memShard, shards)}
	for i := range m.shards {
		m.shards[i].m = map[memKey]*memEntry{}
	}
	return m, nil
}

// Decide implements Store. It never fails and never blocks beyond its
// shard locks, so it ignores ctx.
func (m *Memory) Decide(_ context.Context, now time.Time, checks []Check) ([]Result, error) {
	res := make([]Result, len(checks))
	t := now.UnixNano()
	for i, c := range checks {
		sh := &m.shards[maphash.String(m.seed, c.Key)&m.mask]
		sh.mu.Lock()
		k := memKey{c.Key, c.Limit.Unit, c.Limit.Algorithm}
		e := sh.m[k]
		if e == nil && c.Hits == 0 {
			sh.mu.Unlock()
			var st State // a check of an unknown key changes nothing
			res[i] = Decide(&st, now, c)
			continue
		}
		if e == nil {
			e = sh.insert(k, t, m.perShard)
		}
		res[i] = Decide(&e.st, now, c)
		e.expires = e.st.Expiry(c.Limit)
		sh.mu.Unlock()
	}
	return res, nil
}

// Len returns the number of keys held (expired ones included until
// dropped).
func (m *Memory) Len() int {
	n := 0
	for i := range m.shards {
		sh := &m.shards[i]
		sh.mu.Lock()
		n += len(sh.m)
		sh.mu.Unlock()
	}
	return n
}

// insert adds a new entry for key, making room when the shard is full.
func (s *memShard) insert(key memKey, t int64, limit int) *memEntry {
	s.inserts++
	switch {
	case len(s.m) >= limit:
		s.evict(t)
	case s.inserts%sweepEvery == 0:
		s.sweep(t, sweepSample)
	}
	e := &memEntry{}
	s.m[key] = e
	return e
}

// sweep drops the expired keys among n sampled ones and returns how
// many it dropped.
func (s *memShard) sweep(t int64, n int) int {
	seen, dropped := 0, 0
	for k, e := range s.m {
		if e.expires <= t {
			delete(s.m, k)
			dropped++
		}
		if seen++; seen >= n {
			break
		}
	}
	return dropped
}

// evict makes room for one key: expired keys first, else the sampled key
// closest to expiry.
func (s *memShard) evict(t int64) {
	victim, soonest, seen := memKey{}, int64(math.MaxInt64), 0
	dropped := 0
	for k, e := range s.m {
		switch {
		case e.expires <= t:
			delete(s.m, k)
			dropped++
		case e.expires < soonest:
			victim, soonest = k, e.expires
		}
		if seen++; seen >= evictSample {
			break
		}
	}
	if dropped == 0 && soonest != math.MaxInt64 {
		delete(s.m, victim)
	}
}
