package ratelimit

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The load of TestRedisClusterReshard: rules' keys placed on chosen
// slots, workers deciding calls over them, and what they were told.

// reshardKey is one rule's key under the load, and what the load was told.
type reshardKey struct {
	check  Check
	key    string // the store's key (prefix included)
	slot   uint16
	moving bool // in the slots that move
	// overCounts: a refused hit is counted too (a fixed window checked
	// with the full limit as its cap, as envoyproxy/ratelimit counts it)
	overCounts bool

	allowed, refused, failed atomic.Int64
	mu                       sync.Mutex
	seen                     []uint64 // usage before each counted hit (Result.Used - Hits)
}

// findReshardKey is a check named after name under l whose Redis key
// hashes to a slot that in accepts.
func findReshardKey(st *Redis, name string, l Limit, in func(uint16) bool) *reshardKey {
	for i := 0; ; i++ {
		c := Check{Key: fmt.Sprintf("rs_%s_%d_", name, i), Limit: l, Cap: l.Capacity(), Hits: 1}
		key, _ := st.encode(nil, t0, c)
		if s := hashSlot(key); in(s) {
			return &reshardKey{check: c, key: key, slot: s, overCounts: l.Algorithm == FixedWindow}
		}
	}
}

// reshardLayout places the keys: big holds 6 keys on one moving slot,
// small 2 keys on each of 3 other moving
// slots, stable 2 keys on other slots of each master (the moving slots'
// source and destinations included). Every algorithm that keeps a count
// is there, with a limit never reached and one the load reaches.
func reshardLayout(st *Redis, moving []uint16, masters []string, owner func(uint16) string) (big, small, stable []*reshardKey) {
	fixed := Limit{Algorithm: FixedWindow, Requests: reshardLarge, Unit: Hour}
	tight := Limit{Algorithm: FixedWindow, Requests: reshardTight, Unit: Hour}
	sliding := Limit{Algorithm: SlidingWindow, Requests: reshardLarge, Unit: Hour}
	// a token a second: with the clock fixed at t0, the TAT is t0 + tokens
	bucket := Limit{Algorithm: TokenBucket, Requests: 3600, Unit: Hour, Burst: reshardLarge}
	tightBucket := Limit{Algorithm: TokenBucket, Requests: 3600, Unit: Hour, Burst: reshardTight}
	bigSlot := moving[len(moving)/2]
	for i, l := range []Limit{fixed, fixed, fixed, tight, bucket, sliding} {
		big = append(big, findReshardKey(st, "big"+strconv.Itoa(i), l, func(s uint16) bool { return s == bigSlot }))
	}
	used := map[uint16]bool{bigSlot: true}
	for i, pair := range [][2]Limit{{fixed, tight}, {fixed, tightBucket}, {sliding, bucket}} {
		first := findReshardKey(st, "small"+strconv.Itoa(i), pair[0], func(s uint16) bool {
			return !used[s] && slices.Contains(moving, s)
		})
		used[first.slot] = true
		second := findReshardKey(st, "small"+strconv.Itoa(i)+"b", pair[1], func(s uint16) bool { return s == first.slot })
		small = append(small, first, second)
	}
	for _, k := range slices.Concat(big, small) {
		k.moving = true
	}
	for i, m := range masters {
		for j, l := range []Limit{fixed, []Limit{tight, bucket, sliding}[i%3]} {
			stable = append(stable, findReshardKey(st, fmt.Sprintf("stable%d_%d", i, j), l, func(s uint16) bool {
				return owner(s) == m && !slices.Contains(moving, s)
			}))
		}
	}
	return big, small, stable
}

// reshardEvent is one Decide call of the load.
type reshardEvent struct {
	start, end int64 // unix ns
	failed     bool
	moving     bool // a check on a moving slot
	checks     int
}

// reshardLoad decides calls of the given shapes (each a list of keys,
// decided together in one Decide call) with reshardWorkers goroutines.
type reshardLoad struct {
	st     *Redis
	shapes [][]*reshardKey
	checks [][]Check
	calls  atomic.Int64

	mu     sync.Mutex
	events []reshardEvent
	errs   map[string]int // failed calls by error (digits as N)
}

func newReshardLoad(st *Redis, shapes ...[]*reshardKey) *reshardLoad {
	l := &reshardLoad{st: st, shapes: shapes, errs: map[string]int{}}
	for _, keys := range shapes {
		var checks []Check
		for _, k := range keys {
			checks = append(checks, k.check)
		}
		l.checks = append(l.checks, checks)
	}
	return l
}

// run starts the workers; stop ends them, wait waits for them.
func (l *reshardLoad) run(stop <-chan struct{}) (wait func()) {
	var wg sync.WaitGroup
	for w := range reshardWorkers {
		wg.Go(func() {
			var events []reshardEvent
			for i := w; ; i++ {
				select {
				case <-stop:
					l.mu.Lock()
					l.events = append(l.events, events...)
					l.mu.Unlock()
					return
				default:
				}
				events = append(events, l.decide(l.shapes[i%len(l.shapes)], l.checks[i%len(l.shapes)]))
				l.calls.Add(1)
			}
		})
	}
	return wg.Wait
}

var reshardDigits = regexp.MustCompile(`[0-9]+`)

// decide makes one call of checks (those of keys) and records what it
// was told.
func (l *reshardLoad) decide(keys []*reshardKey, checks []Check) reshardEvent {
	start := time.Now().UnixNano()
	res, err := l.st.Decide(context.Background(), t0, checks)
	ev := reshardEvent{start: start, end: time.Now().UnixNano(), failed: err != nil, checks: len(checks),
		moving: slices.ContainsFunc(keys, func(k *reshardKey) bool { return k.moving })}
	if err != nil {
		for _, k := range keys {
			k.failed.Add(1)
		}
		l.mu.Lock()
		l.errs[reshardDigits.ReplaceAllString(err.Error(), "N")]++
		l.mu.Unlock()
		return ev
	}
	for i, k := range keys {
		if res[i].Allowed {
			k.allowed.Add(1)
		} else if k.refused.Add(1); !k.overCounts {
			continue
		}
		k.mu.Lock()
		k.seen = append(k.seen, res[i].Used-uint64(checks[i].Hits))
		k.mu.Unlock()
	}
	return ev
}

// redirects counts the MOVED, ASK and TRYAGAIN replies the store's node
// clients read (go-redis follows the first two).
type redirects struct{ moved, ask, tryAgain atomic.Int64 }

func (r *redirects) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r *redirects) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		r.count(cmd)
		return err
	}
}

func (r *redirects) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			r.count(cmd)
		}
		return err
	}
}

func (r *redirects) count(cmd redis.Cmder) {
	switch err := cmd.Err(); {
	case err == nil:
	case redis.HasErrorPrefix(err, "MOVED"):
		r.moved.Add(1)
	case redis.HasErrorPrefix(err, "ASK"):
		r.ask.Add(1)
	case redis.HasErrorPrefix(err, "TRYAGAIN"):
		r.tryAgain.Add(1)
	}
}

// fill writes, through node (their master), reshardFiller keys of
// reshardFillerSize bytes before each of keys' first hit (three times
// as many before the first key of a slot): the keys of a slot are listed
// (CLUSTER GETKEYSINSLOT, newest first) and so migrated among the
// filler, each rule's key in its own MIGRATE, the slot's oldest filler
// last; the filler makes those MIGRATEs take a while. So a slot is
// split (TRYAGAIN for a script over keys on both sides), then has all
// its rules' keys on the destination while it still migrates (ASK).
func fill(t *testing.T, node *redis.Client, load *reshardLoad, keys []*reshardKey) {
	t.Helper()
	value := strings.Repeat("x", reshardFillerSize)
	first := map[uint16]bool{}
	for i, k := range keys {
		tag := 0
		for hashSlot(strconv.Itoa(tag)) != k.slot {
			tag++
		}
		n := reshardFiller
		if !first[k.slot] {
			first[k.slot], n = true, 3*reshardFiller
		}
		pipe := node.Pipeline()
		for j := range n {
			pipe.Set(context.Background(), fmt.Sprintf("rs:filler:{%d}:%d:%d", tag, i, j), value, time.Hour)
		}
		if _, err := pipe.Exec(context.Background()); err != nil {
			t.Fatal(err)
		}
		if ev := load.decide([]*reshardKey{k}, []Check{k.check}); ev.failed {
			t.Fatalf("first hit on %s: %v", k.key, load.errs)
		}
	}
}
