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

	"github.com/xds-server/xds-server/e2e/harness"
)

const (
	// reshardSlots is how many slots each reshard moves: the lowest of
	// the source master, which hold every moving key.
	reshardSlots = 32
	// reshardPipeline is how many keys each MIGRATE moves: fewer than the
	// big slot holds, so that it is split between two masters for a while.
	reshardPipeline = 4
	// reshardWorkers decide calls at once, each one call at a time.
	reshardWorkers = 8
	// reshardCalls are the calls decided before the first reshard, between
	// two and after the last.
	reshardCalls = 400
	// reshardFiller keys of reshardFillerSize bytes before each rule's
	// key on a moving slot make the slot take many MIGRATEs, the rules'
	// keys each in its own: each slot is split between two masters for
	// a while.
	reshardFiller     = 30
	reshardFillerSize = 16 << 10
	reshardLarge      = 1_000_000 // a limit no rule reaches
	reshardTight      = 300       // a limit the load reaches (about the first reshard)
)

// reshardKey is one rule's key under the load, and what the load was told.
type reshardKey struct {
	check  Check
	key    string // the store's key (prefix included)
	slot   uint16
	moving bool // in the slots that move
	// overCounts: a refused hit is counted too (a fixed window at its
	// full limit, as envoyproxy/ratelimit counts it)
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

// reshardLayout places the keys: big holds 6 keys on one moving slot
// (more than one MIGRATE moves), small 2 keys on each of 3 other moving
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

var digits = regexp.MustCompile(`[0-9]+`)

// decide makes one call of checks (those of keys) and records what it
// was told.
func (l *reshardLoad) decide(keys []*reshardKey, checks []Check) reshardEvent {
	start := time.Now().UnixNano()
	res, err := l.st.Decide(context.Background(), t0, checks)
	ev := reshardEvent{start: start, end: time.Now().UnixNano(), failed: err != nil, checks: len(checks)}
	if err != nil {
		for _, k := range keys {
			k.failed.Add(1)
		}
		l.mu.Lock()
		l.errs[digits.ReplaceAllString(err.Error(), "N")]++
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

// A rule's counters stay exact while its slot moves to another master
// under load: redis-cli --cluster reshard moves the lowest slots of a
// master (holding the rules' keys) to a second master, then on to the
// third, while workers decide calls that mix keys of the moving slots
// (one of them split between two masters for a while: more keys than a
// MIGRATE moves) with keys on other slots of every master. Afterwards,
// read on the master that now serves it, each counter is the hits the
// load was told were allowed, plus at most the failed calls' (a call
// fails when one of its slots' runs fails; its other slots have run),
// no allowed hit was told a usage another one was (nothing lost), the
// limits held, the failed calls were few and all during a reshard, and
// the keys live on the destination.
func TestRedisClusterReshard(t *testing.T) {
	c := harness.RedisCluster(t, harness.RedisClusterOptions{Replicas: -1})
	st := newRedisStore(t, nil, RedisConfig{Mode: RedisCluster, Addresses: c.Addrs(), KeyPrefix: "rs:", Timeout: 2 * time.Second})
	var red redirects
	st.cluster.OnNewNode(func(n *redis.Client) { n.AddHook(&red) })
	if err := st.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	nodes := reshardNodes(t, c)
	owners := slotOwners(t, nodes[c.Nodes[0].Addr()])
	path := []string{owners[0]} // the moving slots' masters, in turn
	for _, n := range c.Nodes {
		if n.Addr() != owners[0] {
			path = append(path, n.Addr())
		}
	}
	var moving []uint16
	for s := range uint16(len(owners)) {
		if owners[s] == path[0] && len(moving) < reshardSlots {
			moving = append(moving, s)
		}
	}
	big, small, stable := reshardLayout(st, moving, path, func(s uint16) string { return owners[s] })
	load := newReshardLoad(st, slices.Concat(small, stable), slices.Concat(big, stable))
	fill(t, nodes[path[0]], load, slices.Concat(big, small))
	stop := make(chan struct{})
	wait := load.run(stop)
	var once sync.Once
	halt := func() { once.Do(func() { close(stop); wait() }) }
	defer halt()
	more := func(what string) {
		t.Helper()
		target := load.calls.Load() + reshardCalls
		waitFor(t, time.Minute, what, func() bool { return load.calls.Load() >= target })
	}
	more("calls before the first reshard")
	var windows [][2]int64
	for i := 1; i < len(path); i++ {
		start := time.Now().UnixNano()
		err := c.Reshard(harness.ReshardOptions{From: path[i-1], To: path[i], Slots: reshardSlots, Pipeline: reshardPipeline})
		windows = append(windows, [2]int64{start, time.Now().UnixNano()})
		if err != nil {
			t.Fatal(err)
		}
		checkPlacement(t, nodes, owners, moving, slices.Concat(big, small), path[i])
		more(fmt.Sprintf("calls after reshard %d", i))
	}
	halt()
	var extra int64
	for _, k := range slices.Concat(big, small, stable) {
		at := owners[k.slot]
		if k.moving {
			at = path[len(path)-1]
		}
		extra += checkReshardKey(t, k, readReshardCounter(t, nodes[at], k))
	}
	reshardReport(t, load, windows, extra)
	t.Logf("go-redis read MOVED %d, ASK %d, TRYAGAIN %d; the store's slot runs failed %d, calls failed %d",
		red.moved.Load(), red.ask.Load(), red.tryAgain.Load(), st.batch.stats.groupsFailed.Load(), st.batch.stats.callsFailed.Load())
	if red.moved.Load() == 0 {
		t.Error("no MOVED: the store never used a moved slot's old master")
	}
}

// fill writes, through node (their master), reshardFiller keys of
// reshardFillerSize bytes before each of keys' first hit: the keys of a
// slot are listed (CLUSTER GETKEYSINSLOT, newest first) and so migrated
// among the filler, each in its own MIGRATE, and the filler makes those
// take a while.
func fill(t *testing.T, node *redis.Client, load *reshardLoad, keys []*reshardKey) {
	t.Helper()
	value := strings.Repeat("x", reshardFillerSize)
	for i, k := range keys {
		tag := 0
		for hashSlot(strconv.Itoa(tag)) != k.slot {
			tag++
		}
		pipe := node.Pipeline()
		for j := range reshardFiller {
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

// reshardNodes are plain clients of each node (no redirections followed).
func reshardNodes(t *testing.T, c *harness.RedisClusterServers) map[string]*redis.Client {
	nodes := map[string]*redis.Client{}
	for _, n := range c.Nodes {
		cl := redis.NewClient(&redis.Options{Addr: n.Addr()})
		t.Cleanup(func() { cl.Close() })
		nodes[n.Addr()] = cl
	}
	return nodes
}

// slotOwners is the address of the master of each slot, as node says.
func slotOwners(t *testing.T, node *redis.Client) []string {
	t.Helper()
	slots, err := node.ClusterSlots(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	owners := make([]string, 16384)
	for _, s := range slots {
		for i := s.Start; i <= s.End; i++ {
			owners[i] = s.Nodes[0].Addr
		}
	}
	return owners
}

// checkPlacement checks that every node names dst the master of exactly
// the moving slots (the others' masters unchanged since owners), and
// that the keys of those slots (the rules' and the filler) are on dst
// and on no other node.
func checkPlacement(t *testing.T, nodes map[string]*redis.Client, owners []string, moving []uint16, keys []*reshardKey, dst string) {
	t.Helper()
	ctx := context.Background()
	for addr, cl := range nodes {
		now := slotOwners(t, cl)
		for s, o := range now {
			want := owners[s]
			if slices.Contains(moving, uint16(s)) {
				want = dst
			}
			if o != want {
				t.Fatalf("%s says slot %d is served by %s, want %s", addr, s, o, want)
			}
		}
	}
	perSlot := map[uint16]int64{}
	for _, k := range keys {
		perSlot[k.slot] += 1 + reshardFiller // the key and the filler before it
	}
	for s, n := range perSlot {
		for addr, cl := range nodes {
			want := int64(0)
			if addr == dst {
				want = n
			}
			if got, err := cl.ClusterCountKeysInSlot(ctx, int(s)).Result(); err != nil || got != want {
				t.Errorf("slot %d: %d keys on %s (%v), want %d", s, got, addr, err, want)
			}
		}
	}
}

// readReshardCounter reads k's counter on node (which must serve it):
// the hits a fixed window or sliding window counted, or the tokens a
// token bucket took (its TAT is t0 plus a second a token).
func readReshardCounter(t *testing.T, node *redis.Client, k *reshardKey) uint64 {
	t.Helper()
	v, err := node.Get(context.Background(), k.key).Result()
	if err != nil {
		t.Fatalf("%s on %s: %v", k.key, node.Options().Addr, err)
	}
	f := strings.Fields(v)
	var n uint64
	switch k.check.Limit.Algorithm {
	case SlidingWindow: // "start count previous"
		if len(f) == 3 {
			n, err = strconv.ParseUint(f[1], 10, 64)
		}
	case TokenBucket: // "tat_s tat_ns"
		if len(f) == 2 && f[1] == "0" {
			var s int64
			s, err = strconv.ParseInt(f[0], 10, 64)
			n = uint64(s - t0.Unix())
		}
	default:
		n, err = strconv.ParseUint(v, 10, 64)
	}
	if err != nil || (n == 0 && v != "0") {
		t.Fatalf("%s: value %q: %v", k.key, v, err)
	}
	return n
}

// checkReshardKey checks k's counter against what the load was told and
// returns the increments of failed calls it holds. A hit told allowed
// (or refused, where refused hits count) was counted once: its usage
// before it is unique, below the counter.
func checkReshardKey(t *testing.T, k *reshardKey, counter uint64) (extra int64) {
	t.Helper()
	allowed, failed, refused := k.allowed.Load(), k.failed.Load(), k.refused.Load()
	seen := slices.Sorted(slices.Values(k.seen))
	name := fmt.Sprintf("%s (%s, slot %d, moving %v)", k.check.Key, k.check.Limit, k.slot, k.moving)
	for i := 1; i < len(seen); i++ {
		if seen[i] == seen[i-1] {
			t.Errorf("%s: two counted hits were told the same usage before them (%d): an increment was lost", name, seen[i])
			break
		}
	}
	if n := len(seen); n > 0 && seen[n-1] >= counter {
		t.Errorf("%s: a hit was told a usage of %d before it, the counter is %d: increments were lost", name, seen[n-1], counter)
	}
	counted := allowed
	if k.overCounts {
		counted += refused
	}
	extra = int64(counter) - counted
	switch {
	case extra < 0:
		t.Errorf("%s: counter %d, but %d hits were counted: %d increments lost", name, counter, counted, -extra)
	case extra > failed:
		t.Errorf("%s: counter %d, %d hits counted (%d allowed) and %d calls failed: at least %d increments counted twice",
			name, counter, counted, allowed, failed, extra-failed)
	}
	capacity := k.check.Limit.Capacity()
	if allowed > int64(capacity) || !k.overCounts && counter > uint64(capacity) {
		t.Errorf("%s: limit %d did not hold: %d allowed, counter %d", name, capacity, allowed, counter)
	}
	if refused > 0 && allowed+failed < int64(capacity) {
		t.Errorf("%s: %d hits refused after %d allowed and %d failed, below the limit %d", name, refused, allowed, failed, capacity)
	}
	if allowed == 0 {
		t.Errorf("%s: no hit allowed", name)
	}
	return extra
}

// reshardReport logs each reshard's window with the calls in flight
// during it and those that failed, and checks the load ran during each
// and failed only then, rarely, and only where Redis refused a script
// over keys on both sides of a split slot (TRYAGAIN).
func reshardReport(t *testing.T, load *reshardLoad, windows [][2]int64, extra int64) {
	t.Helper()
	var calls, checks, failed, outside int
	for _, ev := range load.events {
		calls, checks = calls+1, checks+ev.checks
		if !ev.failed {
			continue
		}
		failed++
		if !slices.ContainsFunc(windows, func(w [2]int64) bool { return ev.start <= w[1] && ev.end >= w[0] }) {
			outside++
		}
	}
	for i, w := range windows {
		var in, inChecks, inFailed int
		for _, ev := range load.events {
			if ev.start <= w[1] && ev.end >= w[0] {
				in, inChecks = in+1, inChecks+ev.checks
				if ev.failed {
					inFailed++
				}
			}
		}
		t.Logf("reshard %d: %v (redis-cli, cluster checks included); %d calls (%d decisions) in flight, %d failed",
			i+1, time.Duration(w[1]-w[0]).Round(time.Millisecond), in, inChecks, inFailed)
		if in < 2*reshardWorkers {
			t.Errorf("reshard %d: only %d calls during it: the load did not run", i+1, in)
		}
		if inFailed*4 > in {
			t.Errorf("reshard %d: %d of %d calls failed, want at most a quarter", i+1, inFailed, in)
		}
	}
	t.Logf("in all: %d calls (%d decisions), %d failed (%d outside a reshard); increments of failed calls counted: %d; errors: %v",
		calls, checks, failed, outside, extra, load.errs)
	if outside > 0 {
		t.Errorf("%d calls failed outside a reshard", outside)
	}
	for msg := range load.errs { // MOVED and ASK are followed; TRYAGAIN: the script did not run
		if !strings.Contains(msg, "TRYAGAIN") {
			t.Errorf("calls failed with %q", msg)
		}
	}
}
