package ratelimit

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/xds-server/xds-server/e2e/harness"
)

const (
	// reshardSlots is how many slots each reshard moves: the lowest of
	// the source master, which hold every moving key.
	reshardSlots = 32
	// reshardPipeline is how many keys each MIGRATE moves (redis-cli's
	// --cluster-pipeline).
	reshardPipeline = 4
	// reshardWorkers decide calls at once, each one call at a time.
	reshardWorkers = 8
	// reshardCalls are the calls decided before the first reshard, between
	// two and after the last.
	reshardCalls = 400
	// reshardFiller keys of reshardFillerSize bytes before each rule's
	// key on a moving slot make the slot take many MIGRATEs, the rules'
	// keys each in its own: the slot is split between two masters for a
	// while (scripts over keys on both sides get TRYAGAIN).
	reshardFiller     = 30
	reshardFillerSize = 16 << 10
	reshardLarge      = 1_000_000 // a limit no rule reaches
	reshardTight      = 300       // a limit the load reaches (about the first reshard)
)

// A rule's counters stay exact while its slot moves to another master
// under load: redis-cli --cluster reshard moves the lowest slots of a
// master (holding the rules' keys) to a second master, then on to the
// third, while workers decide calls that mix keys of the moving slots
// (each split between two masters for a while: its rules' keys go in
// different MIGRATEs) with keys on other slots of every master, and
// calls with only the latter. Afterwards, read on the master that now
// serves it, each counter is the hits the load was told were counted,
// plus at most the failed calls' (a call fails when one of its slots'
// runs fails; its other slots have run); no hit was told a usage another
// one was (nothing lost); the limits held; calls failed only during a
// reshard, only with a key on a moving slot, and at most half of those
// in flight; the keys live on the destination.
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
	load := newReshardLoad(st, slices.Concat(small, stable), slices.Concat(big, stable), stable)
	fill(t, nodes[path[0]], load, slices.Concat(big, small))
	windows := moveUnderLoad(t, c, load, path, func(dst string) {
		checkPlacement(t, nodes, owners, moving, slices.Concat(big, small), dst)
	})
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
	if red.ask.Load()+red.tryAgain.Load() == 0 {
		t.Error("no ASK nor TRYAGAIN: the load never met a slot while it migrated")
	}
}

// moveUnderLoad runs load while the moving slots go from path[0] to each
// next master in turn (reshardCalls calls before, between and after the
// moves), calling placed after each; it returns the moves' windows (unix
// ns) once the load has stopped.
func moveUnderLoad(t *testing.T, c *harness.RedisClusterServers, load *reshardLoad, path []string, placed func(dst string)) [][2]int64 {
	t.Helper()
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
		placed(path[i])
		more(fmt.Sprintf("calls after reshard %d", i))
	}
	halt()
	return windows
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
		if perSlot[k.slot] == 0 {
			perSlot[k.slot] = 2 * reshardFiller // more filler before a slot's first key (see fill)
		}
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
	if allowed == 0 || capacity == reshardTight && refused == 0 {
		t.Errorf("%s: %d hits allowed, %d refused: the load never reached the limit or never passed", name, allowed, refused)
	}
	return extra
}

// reshardReport logs each reshard's window with the calls in flight
// during it and those that failed, and checks the load ran during each
// and failed only then, only in calls with a key on a moving slot (the
// other slots, of the same masters too, keep deciding), only where
// Redis refused a script over keys on both sides of a split slot
// (TRYAGAIN), and for at most half of the calls in flight.
func reshardReport(t *testing.T, load *reshardLoad, windows [][2]int64, extra int64) {
	t.Helper()
	var calls, checks, failed, outside, still int
	for _, ev := range load.events {
		calls, checks = calls+1, checks+ev.checks
		if !ev.failed {
			continue
		}
		failed++
		if !ev.moving {
			still++
		}
		if !slices.ContainsFunc(windows, func(w [2]int64) bool { return ev.start <= w[1] && ev.end >= w[0] }) {
			outside++
		}
	}
	for i, w := range windows {
		in, inChecks, inFailed := callsDuring(load.events, w)
		t.Logf("reshard %d: %v (redis-cli, cluster checks included); %d calls (%d decisions) in flight, %d failed",
			i+1, time.Duration(w[1]-w[0]).Round(time.Millisecond), in, inChecks, inFailed)
		if in < 2*reshardWorkers {
			t.Errorf("reshard %d: only %d calls during it: the load did not run", i+1, in)
		}
		if inFailed*2 > in {
			t.Errorf("reshard %d: %d of %d calls failed, want at most half", i+1, inFailed, in)
		}
	}
	t.Logf("in all: %d calls (%d decisions), %d failed (%d outside a reshard, %d without a key on a moving slot); increments of failed calls counted: %d; errors: %v",
		calls, checks, failed, outside, still, extra, load.errs)
	if outside > 0 || still > 0 {
		t.Errorf("%d calls failed outside a reshard, %d without a key on a moving slot", outside, still)
	}
	for msg := range load.errs { // MOVED and ASK are followed; TRYAGAIN: the script did not run
		if !strings.Contains(msg, "TRYAGAIN") {
			t.Errorf("calls failed with %q", msg)
		}
	}
}

// callsDuring counts the calls in flight during window w, their checks
// and the calls that failed.
func callsDuring(events []reshardEvent, w [2]int64) (calls, checks, failed int) {
	for _, ev := range events {
		if ev.start <= w[1] && ev.end >= w[0] {
			calls, checks = calls+1, checks+ev.checks
			if ev.failed {
				failed++
			}
		}
	}
	return calls, checks, failed
}
