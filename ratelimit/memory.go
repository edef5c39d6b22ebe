package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"math/bits"
	"sync"
	"time"
)

// Defaults and bounds of MemoryConfig.
const (
	DefaultMemoryShards = 64
	// DefaultMemoryMaxKeys and DefaultMemoryMaxBytes keep the store's
	// heap (keys, states, map tables, overflow slots) under about 160
	// MiB, so that the process fits in 256 MiB.
	DefaultMemoryMaxKeys  = 1_000_000
	DefaultMemoryMaxBytes = 128 << 20
	// DefaultMemorySweepInterval is how often the background sweep drops
	// the expired keys (NewMemory's SweepInterval as cmd wires it).
	DefaultMemorySweepInterval = 10 * time.Second
	// MemorySketchCells is the most cells of a shard's sketch of one
	// unit and algorithm (24 bytes each; see MemoryConfig.MaxBytes).
	MemorySketchCells   = 8192
	maxMemoryShards     = 1 << 16
	minMemoryShardBytes = 16 << 10
	evictSample         = 32      // keys examined to make room in a full shard
	coldSample          = 8       // keys examined for the coldest (each one a cache miss)
	maxEvictions        = 8       // keys evicted at most to make room for one
	hotHeat             = 1 << 15 // heat of a key that used half its cap
	sweepEvery          = 64      // inserts between opportunistic sweeps of a shard
	sweepSample         = 8       // keys examined by such a sweep
	// memEntryOverhead is what a key costs beyond its bytes and its
	// sliding log: the map slot (memKey and pointer, with the table's
	// slack), the memEntry and the allocators' rounding; measured by
	// TestMemoryFloodBounded.
	memEntryOverhead = 192
)

// MemoryConfig configures NewMemory.
type MemoryConfig struct {
	// Shards is the number of independently locked parts of the key
	// space, a power of two in [1, 65536]; 0 means DefaultMemoryShards.
	Shards int
	// MaxKeys bounds the keys kept (at least Shards); 0 means
	// DefaultMemoryMaxKeys.
	MaxKeys int
	// MaxBytes bounds the bytes of the keys kept (their bytes, sliding
	// logs and a fixed overhead each), at least 16 KiB per shard; 0 means
	// DefaultMemoryMaxBytes. The overflow slots (64 bytes each, 1024 per
	// shard) come on top.
	//
	// A full shard makes room for a new key by dropping expired keys
	// (they hold no usage), else by evicting the coldest of a sample of
	// keys: the one that used the least of its cap at its last decision.
	// A cold key (under half its cap) is forgotten; a hot one is folded
	// into the shard's sketch of its unit and algorithm (a count-min
	// sketch with conservative update, of states rather than counts: see
	// memSketch), and any new key of that kind starts from its estimate
	// there, which never holds less than the key's own usage. So a flood
	// of new keys evicts its own cold keys, and new keys are counted
	// exactly; a key near its limit is never reset, only counted
	// approximately once evicted (it may be refused early, but is never
	// admitted beyond its limit; but for sliding_log, kept as a sliding
	// window there: at most twice the limit in a unit). A sketch is made
	// when first needed and counts in MaxBytes: at most MemorySketchCells
	// cells of 24 bytes per shard and kind, and at most a quarter of the
	// shard's bytes.
	MaxBytes int
	// SweepInterval is how often a background goroutine drops every
	// expired key (and shrinks emptied maps) until Close; 0 means no
	// background sweep (inserts still sweep a little as they go).
	SweepInterval time.Duration
}

// Validate reports every invalid field (zero fields are defaults).
func (c MemoryConfig) Validate() error {
	var errs []error
	if c.Shards < 0 || c.Shards > maxMemoryShards || (c.Shards > 0 && bits.OnesCount(uint(c.Shards)) != 1) {
		errs = append(errs, fmt.Errorf("shards %d is not a power of two in [1, %d]", c.Shards, maxMemoryShards))
	}
	shards := max(c.Shards, 1)
	if c.Shards == 0 {
		shards = DefaultMemoryShards
	}
	if c.MaxKeys < 0 || (c.MaxKeys > 0 && c.MaxKeys < shards) {
		errs = append(errs, fmt.Errorf("max keys %d is below the shards %d", c.MaxKeys, shards))
	}
	if c.MaxBytes < 0 || (c.MaxBytes > 0 && c.MaxBytes < shards*minMemoryShardBytes) {
		errs = append(errs, fmt.Errorf("max bytes %d is below %d (16 KiB per shard)", c.MaxBytes, shards*minMemoryShardBytes))
	}
	if c.SweepInterval < 0 {
		errs = append(errs, fmt.Errorf("sweep interval %v is negative", c.SweepInterval))
	}
	if len(errs) > 0 {
		return fmt.Errorf("ratelimit: invalid memory store config: %w", errors.Join(errs...))
	}
	return nil
}

// Memory is the in-process Store: sharded maps under mutexes, bounded in
// keys and bytes, with keys expiring once their state holds no usage. It
// runs the pure algorithms of Decide, so it answers exactly as they do
// (but for keys counted in the overflow slots of a full store: see
// MemoryConfig.MaxBytes).
type Memory struct {
	seed          maphash.Seed
	mask          uint64
	perShardKeys  int
	perShardBytes int64
	sketchCells   int
	shards        []memShard
	stop          chan struct{}
	done          chan struct{}
	once          sync.Once
}

type memShard struct {
	mu       sync.Mutex
	m        map[memKey]*memEntry
	bytes    int64        // accounted bytes of m's entries
	peak     int          // most entries since the map was last rebuilt
	sketches []*memSketch // by kind, made when first needed
	inserts  int
	stats    memStats
	_        [40]byte // keep shards on separate cache lines
}

// memStats are a shard's counters, read by Collect.
type memStats struct {
	evictedFull, evictedSweep, evictedCold, evictedHot, overflowed uint64
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
	expires int64  // Unix ns after which the entry holds no usage
	size    int64  // accounted bytes
	heat    uint16 // share of the cap used at the last decision, in 1/65535
}

// NewMemory returns an empty memory store; with cfg.SweepInterval it
// sweeps in the background until Close.
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
	maxBytes := cfg.MaxBytes
	if maxBytes == 0 {
		maxBytes = max(DefaultMemoryMaxBytes, shards*minMemoryShardBytes)
	}
	m := &Memory{seed: maphash.MakeSeed(), mask: uint64(shards - 1),
		perShardKeys: maxKeys / shards, perShardBytes: int64(maxBytes / shards), sketchCells: sketchCells(maxKeys/shards, int64(maxBytes/shards)),
		shards: make([]memShard, shards),
		stop:   make(chan struct{}), done: make(chan struct{})}
	for i := range m.shards {
		m.shards[i].m = map[memKey]*memEntry{}
	}
	if cfg.SweepInterval > 0 {
		go m.sweepEvery(cfg.SweepInterval)
	} else {
		close(m.done)
	}
	return m, nil
}

// Close stops the background sweep. The store still answers.
func (m *Memory) Close() {
	m.once.Do(func() { close(m.stop) })
	<-m.done
}

func (m *Memory) sweepEvery(d time.Duration) {
	defer close(m.done)
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case now := <-t.C:
			m.Sweep(now)
		}
	}
}

// Decide implements Store. It never fails and never blocks beyond its
// shard locks, so it ignores ctx.
func (m *Memory) Decide(_ context.Context, now time.Time, checks []Check) ([]Result, error) {
	res := make([]Result, len(checks))
	for i, c := range checks {
		h := maphash.String(m.seed, c.Key)
		sh := &m.shards[h&m.mask]
		sh.mu.Lock()
		k := memKey{c.Key, c.Limit.Unit, c.Limit.Algorithm}
		e := sh.m[k]
		if e == nil && c.Hits == 0 { // a check of an unknown key changes nothing
			var st State
			if sk := sh.sketchOf(kindOf(c.Limit), 0); sk != nil {
				st = sk.estimate(h, now, c)
			}
			sh.mu.Unlock()
			res[i] = Decide(&st, now, c)
			continue
		}
		if e == nil {
			b := memBounds{m.perShardKeys, m.perShardBytes, m.sketchCells, m.seed}
			if e = sh.insert(k, h, now, c, b); e == nil {
				res[i] = sh.decideOverflow(h, now, c, b)
				sh.mu.Unlock()
				continue
			}
		}
		res[i] = Decide(&e.st, now, c)
		e.expires = e.st.Expiry(c.Limit)
		e.heat = heatOf(res[i].Used, c.Limit.Capacity())
		if c.Limit.Algorithm == SlidingLog {
			sh.resize(e, len(k.key))
		}
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

// Bytes returns the accounted bytes of the keys held.
func (m *Memory) Bytes() int64 {
	var n int64
	for i := range m.shards {
		sh := &m.shards[i]
		sh.mu.Lock()
		n += sh.bytes
		sh.mu.Unlock()
	}
	return n
}

// Sweep drops every key expired at now, shard by shard, shrinking maps
// that emptied, and returns how many it dropped.
func (m *Memory) Sweep(now time.Time) int {
	t, n := now.UnixNano(), 0
	for i := range m.shards {
		sh := &m.shards[i]
		sh.mu.Lock()
		d := sh.sweep(t, len(sh.m))
		sh.stats.evictedSweep += uint64(d)
		sh.shrink()
		sh.mu.Unlock()
		n += d
	}
	return n
}
