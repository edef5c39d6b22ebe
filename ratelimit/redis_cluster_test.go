package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/xds-server/xds-server/e2e/harness"
)

// newModeStore returns a store of cfg (its key prefix its own unless
// cfg names one), that answered PING, closed when the test ends.
func newModeStore(t testing.TB, cfg RedisConfig) *Redis {
	t.Helper()
	st := newRedisStore(t, nil, cfg)
	if err := st.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	return st
}

// clusterClient is a plain client of cluster c, for looking at its keys.
func clusterClient(t testing.TB, c *harness.RedisClusterServers) *redis.ClusterClient {
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	t.Cleanup(func() { cc.Close() })
	return cc
}

// The store suite (every algorithm case, batches, checks, concurrency,
// the conformance fixtures) gives the same answers on a 3-master Redis
// Cluster and behind Sentinel as on one node (TestRedisStore) and in
// memory.
func TestRedisClusterStore(t *testing.T) {
	c := harness.RedisCluster(t, harness.RedisClusterOptions{})
	runStoreSuite(t, func(t *testing.T) Store {
		return newModeStore(t, RedisConfig{Mode: RedisCluster, Addresses: c.Addrs()})
	})
}

func TestRedisSentinelStore(t *testing.T) {
	s := harness.RedisSentinel(t, harness.RedisSentinelOptions{MasterName: "rl"})
	runStoreSuite(t, func(t *testing.T) Store {
		return newModeStore(t, RedisConfig{Mode: RedisSentinel, Addresses: s.SentinelAddrs(), MasterName: s.MasterName})
	})
}

// One batch over many keys spreads them over every master (no hot slot)
// and decides each check as one node would, in the call's order.
func TestRedisClusterSpread(t *testing.T) {
	c := harness.RedisCluster(t, harness.RedisClusterOptions{})
	st := newModeStore(t, RedisConfig{Mode: RedisCluster, Addresses: c.Addrs(), KeyPrefix: "spread:"})
	ctx := context.Background()
	const n = 300
	algs := []Algorithm{FixedWindow, SlidingWindow, SlidingLog, TokenBucket, LeakyBucket}
	var checks []Check
	for i := range n {
		l := Limit{Algorithm: algs[i%len(algs)], Requests: 2, Unit: Minute, Burst: 2}
		checks = append(checks, Check{Key: fmt.Sprintf("k_%d_", i), Limit: l, Cap: 2, Hits: 1})
	}
	// Twice each, and a third hit refused: order kept per key.
	checks = append(checks, checks...)
	checks = append(checks, checks[:n]...)
	mem, err := NewMemory(MemoryConfig{})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := mem.Decide(ctx, t0, checks)
	got, err := st.Decide(ctx, t0, checks)
	if err != nil {
		t.Fatal(err)
	}
	for i := range checks {
		if got[i] != want[i] {
			t.Fatalf("check %d (%s): %+v, memory gives %+v", i, checks[i].Key, got[i], want[i])
		}
	}
	if got[0].Allowed != true || got[2*n].Allowed != false {
		t.Fatalf("first hit %+v, third %+v: want allowed, refused", got[0], got[2*n])
	}
	cc := clusterClient(t, c)
	counts := map[string]int64{}
	var mu sync.Mutex
	err = cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		k, err := m.DBSize(ctx).Result()
		mu.Lock()
		counts[m.Options().Addr] = k
		mu.Unlock()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("keys per master: %v", counts)
	if len(counts) != 3 {
		t.Fatalf("%d masters, want 3", len(counts))
	}
	for addr, k := range counts {
		if k < n/3/2 { // about n/3 each; a fixed hash tag would put all on one
			t.Errorf("master %s holds %d of %d keys", addr, k, n)
		}
	}
}

// clusterBatch is a batch of 30 fixed-window checks spread over a
// cluster's masters, decided once (every master has the script and the
// store knows them all): their keys and script arguments as the batcher
// builds them, and each check's master. dead is a check and down its
// master; live a check on another master.
type clusterBatch struct {
	checks     []Check
	keys       []string
	args       []any
	master     map[string]string // check key -> its master's address
	dead, live Check
	down       string
	downServer *harness.RedisServer
}

func newClusterBatch(t *testing.T, c *harness.RedisClusterServers, st *Redis, prefix string) *clusterBatch {
	t.Helper()
	ctx := context.Background()
	cc := clusterClient(t, c)
	l := Limit{Algorithm: FixedWindow, Requests: 100, Unit: Hour}
	b := &clusterBatch{args: []any{redisTTLGrace.Milliseconds()}, master: map[string]string{}}
	for i := range 30 {
		ch := Check{Key: fmt.Sprintf("%s_%d_", prefix, i), Limit: l, Cap: 100, Hits: 1}
		var key string
		key, b.args = st.encode(b.args, t0, ch)
		m, err := cc.MasterForKey(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		b.checks, b.keys, b.master[ch.Key] = append(b.checks, ch), append(b.keys, key), m.Options().Addr
	}
	// Twice: the first batch runs one script per slot while the store
	// learns the masters' ids, the second one script per master.
	if _, err := st.Decide(ctx, t0, b.checks); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the store knows every master's id", func() bool {
		for _, m := range b.master {
			if _, ok := st.batch.ids.id(m); !ok {
				return false
			}
		}
		return true
	})
	if _, err := st.Decide(ctx, t0, b.checks); err != nil {
		t.Fatal(err)
	}
	b.dead, b.down = b.checks[0], b.master[b.checks[0].Key]
	b.live = b.dead
	for _, ch := range b.checks {
		if b.master[ch.Key] != b.down {
			b.live = ch
			break
		}
	}
	for _, n := range c.Nodes {
		if n.Addr() == b.down {
			b.downServer = n
		}
	}
	return b
}

// runSlots runs the batch once within d and checks that exactly the
// checks on the down master failed.
func (b *clusterBatch) runSlots(t *testing.T, st *Redis, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	_, errs, ok := st.batch.runSlots(ctx, b.keys, b.args)
	cancel()
	if !ok {
		t.Fatalf("no run of the batch succeeded: %v", errs)
	}
	for i, ch := range b.checks {
		if failed := errs[i] != nil; failed != (b.master[ch.Key] == b.down) {
			t.Errorf("check %s on %s (down: %s): error %v", ch.Key, b.master[ch.Key], b.down, errs[i])
		}
	}
}

// A master that does not answer (SIGSTOP) fails only the runs of its
// slots: in one batch, the checks on the other masters are decided; its
// breaker then opens and fails its calls at once, while calls on the
// other masters keep being decided.
func TestRedisClusterNodeFailure(t *testing.T) {
	c := harness.RedisCluster(t, harness.RedisClusterOptions{})
	const timeout = 300 * time.Millisecond
	st := newModeStore(t, RedisConfig{Mode: RedisCluster, Addresses: c.Addrs(), KeyPrefix: "fail:", Timeout: timeout})
	ctx := context.Background()
	b := newClusterBatch(t, c, st, "n")
	dead, live, down, master := b.dead, b.live, b.down, b.master
	b.downServer.Pause()
	defer b.downServer.Resume()

	b.runSlots(t, st, timeout)
	if n := gatherCounter(t, st, "ratelimit_redis_slot_runs_failed_total"); n == 0 {
		t.Error("ratelimit_redis_slot_runs_failed_total did not count the failed runs")
	}
	// One call at a time: the down master's time out until its breaker
	// opens (DefaultRedisBreakerFailures runs in a row, the batch above
	// included), then fail at once; the others are decided throughout.
	var fast bool
	for i := range 2 * DefaultRedisBreakerFailures {
		for _, ch := range []Check{dead, live} {
			start := time.Now()
			res, err := st.Decide(ctx, t0, []Check{ch})
			took := time.Since(start)
			switch {
			case master[ch.Key] != down && (err != nil || !res[0].Allowed):
				t.Fatalf("round %d: %s on a live master: %+v, %v", i, ch.Key, res, err)
			case master[ch.Key] == down && err == nil:
				t.Fatalf("round %d: %s on the paused master decided: %+v", i, ch.Key, res)
			case master[ch.Key] == down && errors.Is(err, ErrBreakerOpen):
				fast = true
				if took > timeout/2 {
					t.Errorf("open breaker took %v", took)
				}
			}
		}
	}
	if !fast {
		t.Error("the paused master's breaker never opened")
	}
	var states strings.Builder
	st.batch.nodes.each(func(br *breaker) { fmt.Fprintf(&states, " %d", br.state.Load()) })
	t.Logf("breaker states:%s, slot runs failed %d, calls failed %d", states.String(),
		st.batch.stats.groupsFailed.Load(), st.batch.stats.callsFailed.Load())
}

// A master gone (SIGKILL: connections refused) whose slots go-redis
// still maps to it fails only its own checks, batch after batch: go-redis
// retries a node it could not connect to and, when the context ends during
// the wait before a retry, fails every command of that pipeline, so a
// batch's masters must not share one (the failover test saw live masters'
// checks fail this way about once in eight runs). Full coverage is not
// required: the other masters keep serving while the node is marked
// failed.
func TestRedisClusterRefusedMaster(t *testing.T) {
	c := harness.RedisCluster(t, harness.RedisClusterOptions{Args: []string{"--cluster-require-full-coverage", "no"}})
	st := newModeStore(t, RedisConfig{Mode: RedisCluster, Addresses: c.Addrs(), KeyPrefix: "refused:",
		BreakerFailures: 1000}) // the breaker stays closed: every batch tries the gone master
	b := newClusterBatch(t, c, st, "r")
	b.downServer.Stop()
	// The waits before go-redis's 3 retries add up to 24ms to 136ms
	// (80ms on average): a run of 100ms ends during one in about one
	// batch of four, so 16 batches show the fault but for 1% of runs,
	// and leave the live masters time to answer on a loaded machine.
	for range 16 {
		b.runSlots(t, st, 100*time.Millisecond)
	}
}

// hashSlot is Redis's CLUSTER KEYSLOT (values from the Redis Cluster
// specification and redis-cli), hash tags included.
func TestHashSlot(t *testing.T) {
	for key, want := range map[string]uint16{
		"foo":                  12182,
		"bar":                  5061,
		"123456789":            12739, // CRC16/XMODEM 0x31c3
		"{user1000}.following": 3443,
		"user1000":             3443,
		"foo{}{bar}":           8363, // an empty tag: the whole key
		"foo{{bar}}zap":        4015, // the tag is "{bar"
		"foo{bar}{zap}":        5061, // the first tag: "bar"
	} {
		if got := hashSlot(key); got != want {
			t.Errorf("hashSlot(%q) = %d, want %d", key, got, want)
		}
	}
}

// The password is every node's: decisions on every master's slots with
// it, none without.
func TestRedisClusterAuth(t *testing.T) {
	c := harness.RedisCluster(t, harness.RedisClusterOptions{Replicas: -1, Password: "s3cret"})
	st := newModeStore(t, RedisConfig{Mode: RedisCluster, Addresses: c.Addrs(), Password: "s3cret"})
	var checks []Check
	for i := range 60 {
		// user ids, not a_0_..a_59_: keys that differ in a few digits hash
		// (CRC16, linear) to a structured set of slots that can miss a master
		checks = append(checks, Check{Key: fmt.Sprintf("u_%08x_", uint32(i)*2654435761), Limit: Limit{FixedWindow, 5, Minute, 0}, Cap: 5, Hits: 1})
	}
	res, err := st.Decide(context.Background(), t0, checks)
	if err != nil || len(res) != len(checks) || !res[0].Allowed || res[0].Remaining != 4 {
		t.Fatalf("with the password: %v, %v", err, res)
	}
	// Who owns each slot, as the cluster says now (the client's cached
	// view may still be loading).
	slots, err := st.cluster.ClusterSlots(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	masters := map[string]bool{}
	for _, ch := range checks {
		slot := int(hashSlot(st.prefix + FixedWindowKey(ch.Key, t0, Minute)))
		for _, s := range slots {
			if slot >= s.Start && slot <= s.End && len(s.Nodes) > 0 {
				masters[s.Nodes[0].Addr] = true
			}
		}
	}
	if len(masters) != 3 {
		t.Errorf("the checks reached %d masters, want 3 (slots %+v, prefix %q)", len(masters), slots, st.prefix)
	}
	wrong, err := NewRedis(RedisConfig{Mode: RedisCluster, Addresses: c.Addrs(), Password: "nope"})
	if err != nil {
		t.Fatal(err)
	}
	defer wrong.Close()
	if err := wrong.Ping(context.Background()); err == nil || strings.Contains(err.Error(), "nope") {
		t.Errorf("Ping with a wrong password: %v", err)
	}
	if _, err := wrong.Decide(context.Background(), t0, checks[:1]); err == nil {
		t.Error("decided with a wrong password")
	}
}

// Behind Sentinel, the nodes' password and the sentinels' own are each
// used where they belong.
func TestRedisSentinelAuth(t *testing.T) {
	s := harness.RedisSentinel(t, harness.RedisSentinelOptions{Replicas: -1, Password: "node-pw", SentinelPassword: "sentinel-pw"})
	cfg := RedisConfig{Mode: RedisSentinel, Addresses: s.SentinelAddrs(), MasterName: s.MasterName,
		Password: "node-pw", SentinelPassword: "sentinel-pw", Timeout: time.Second}
	st := newModeStore(t, cfg)
	c := Check{Key: "sa_", Limit: Limit{FixedWindow, 2, Minute, 0}, Cap: 2, Hits: 1}
	if res, err := st.Decide(context.Background(), t0, []Check{c}); err != nil || !res[0].Allowed || res[0].Remaining != 1 {
		t.Fatalf("with both passwords: %+v, %v", res, err)
	}
	for name, bad := range map[string]RedisConfig{
		"wrong sentinel password": {SentinelPassword: "nope", Password: "node-pw"},
		"no sentinel password":    {Password: "node-pw"},
		"wrong node password":     {SentinelPassword: "sentinel-pw", Password: "nope"},
	} {
		bad.Mode, bad.Addresses, bad.MasterName, bad.Timeout = RedisSentinel, cfg.Addresses, cfg.MasterName, 500*time.Millisecond
		st, err := NewRedis(bad)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Ping(context.Background()); err == nil || strings.Contains(err.Error(), "nope") {
			t.Errorf("%s: Ping: %v", name, err)
		}
		st.Close()
	}
}

// gatherCounter is the value of the counter name (no labels) that st
// collects, through a pedantic registry (which checks the metrics).
func gatherCounter(t *testing.T, st *Redis, name string) float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(st)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// Seed nodes that do not answer (or are not there) fail Decide within
// about the timeout; once the topology's breaker opens, at once.
func TestRedisClusterUnreachable(t *testing.T) {
	silent := silentListener(t)
	const timeout = 100 * time.Millisecond
	c := Check{Key: "t_", Limit: Limit{FixedWindow, 2, Minute, 0}, Cap: 2, Hits: 1}
	for name, addr := range map[string]string{"silent": silent.Addr().String(), "closed": "127.0.0.1:" + strconv.Itoa(harness.FreePort(t))} {
		t.Run(name, func(t *testing.T) {
			st, err := NewRedis(RedisConfig{Mode: RedisCluster, Addresses: []string{addr}, Timeout: timeout})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			for i := range DefaultRedisBreakerFailures + 2 {
				start := time.Now()
				_, err := st.Decide(context.Background(), t0, []Check{c})
				if err == nil {
					t.Fatal("Decide succeeded")
				}
				d := time.Since(start)
				if d > 2*time.Second {
					t.Errorf("call %d failed after %v, want about the %v timeout", i, d, timeout)
				}
				if open := errors.Is(err, ErrBreakerOpen); open != (i >= DefaultRedisBreakerFailures) {
					t.Errorf("call %d: %v, breaker open %v", i, err, open)
				} else if open && d > timeout/2 {
					t.Errorf("call %d: the open breaker took %v", i, d)
				}
			}
		})
	}
}

// A rule's counter stays exact while its slot moves to another master:
// before, during (ASK, the key already moved) and after (MOVED) the
// migration, go-redis follows the redirections and the script runs once
// each time. Every call also checks a key on another slot of the same
// source master, so the two run as one node script that finds the moved
// key elsewhere, writes nothing, and is run again per slot: neither
// counter counts twice.
func TestRedisClusterSlotMigration(t *testing.T) {
	c := harness.RedisCluster(t, harness.RedisClusterOptions{Replicas: -1})
	st := newModeStore(t, RedisConfig{Mode: RedisCluster, Addresses: c.Addrs(), KeyPrefix: "mig:", Timeout: 2 * time.Second})
	ctx := context.Background()
	const limit = 1000
	check := Check{Key: "m_", Limit: Limit{FixedWindow, limit, Hour, 0}, Cap: limit, Hits: 1}
	key := st.prefix + FixedWindowKey(check.Key, t0, Hour)
	slot := int(hashSlot(key))
	cc := clusterClient(t, c)
	src, err := cc.MasterForKey(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	a := src.Options().Addr
	other, otherKey := sameMasterCheck(t, cc, st, a, slot)
	used := 0
	decide := func(stage string) {
		t.Helper()
		checks := []Check{check, other}
		if used%2 == 1 { // either key first: either one routes the run
			checks = []Check{other, check}
		}
		res, err := st.Decide(ctx, t0, checks)
		used++
		if err != nil || !res[0].Allowed || res[0].Remaining != uint32(limit-used) || res[1].Remaining != uint32(limit-used) {
			t.Fatalf("%s: %+v, %v; want remaining %d", stage, res, err, limit-used)
		}
	}
	for range 5 {
		decide("before")
	}
	nodes, ids := clusterNodes(t, c)
	b := startMigration(t, nodes, ids, slot, a)
	decide("migrating, key still on the source")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	_, port, _ := net.SplitHostPort(b)
	must(nodes[a].Migrate(ctx, "127.0.0.1", port, key, 0, 5*time.Second).Err())
	decide("migrating, key moved (ASK)")
	decide("migrating, key moved (ASK), the other key first")
	for _, cl := range nodes {
		must(cl.Do(ctx, "cluster", "setslot", slot, "node", ids[b]).Err())
	}
	decide("migrated (MOVED)")
	decide("migrated, again")
	if got, err := nodes[b].Get(ctx, key).Int(); err != nil || got != used {
		t.Errorf("the counter on the new master: %d, %v; want %d", got, err, used)
	}
	if got, err := nodes[a].Get(ctx, otherKey).Int(); err != nil || got != used {
		t.Errorf("the other counter, on the source: %d, %v; want %d", got, err, used)
	}
	if n := gatherCounter(t, st, "ratelimit_redis_node_runs_redone_total"); n < 1 {
		t.Errorf("node runs redone per slot: %v, want at least 1", n)
	}
}

// sameMasterCheck is a check whose key is on master addr, on another
// slot than slot, and that key.
func sameMasterCheck(t *testing.T, cc *redis.ClusterClient, st *Redis, addr string, slot int) (Check, string) {
	t.Helper()
	for i := range 10_000 {
		c := Check{Key: "o" + strconv.Itoa(i) + "_", Limit: Limit{FixedWindow, 1000, Hour, 0}, Cap: 1000, Hits: 1}
		key := st.prefix + FixedWindowKey(c.Key, t0, Hour)
		m, err := cc.MasterForKey(context.Background(), key)
		if err != nil {
			t.Fatal(err)
		}
		if m.Options().Addr == addr && int(hashSlot(key)) != slot {
			return c, key
		}
	}
	t.Fatal("no key on the same master")
	return Check{}, ""
}

// The errors that send a node run's checks back to one script per slot,
// and those that do not (a network error: the run may have written).
func TestNodeRunErrors(t *testing.T) {
	for _, c := range []struct {
		msg          string
		here, unsupp bool
	}{
		{"ERR Script attempted to access a non local key in a cluster node script: 1f0e, on @user_script:166.", true, false},
		{"MOVED 3999 127.0.0.1:6381", true, false},
		{"ASK 3999 127.0.0.1:6381", true, false},
		{"TRYAGAIN Multiple keys request during rehashing of slot", true, false},
		{"NOTPLANNED node run reached another node", true, false},
		{"ERR This Redis command is not allowed from script script: 1f0e, on @user_script:156.", false, true},
		{"ERR Error compiling script (new function): user_script:1: unexpected symbol near '#'", false, true},
		{"ERR Unknown lua shebang option: flags", false, true},
		{"ERR WRONGTYPE Operation against a key holding the wrong kind of value", false, false},
	} {
		err := errors.New(c.msg)
		if got := notServedHere(err); got != c.here {
			t.Errorf("notServedHere(%q) = %v", c.msg, got)
		}
		if got := scriptUnsupported(err); got != c.unsupp {
			t.Errorf("scriptUnsupported(%q) = %v", c.msg, got)
		}
	}
}

// Two checks on one moving slot, one key moved and one not: their slot's
// script gets TRYAGAIN (nothing ran) and each runs alone; with a third
// check on another slot of the same master, the node script, the slot
// scripts and the lone checks all take their turn in one Decide, and
// every counter counts each call once.
func TestRedisClusterSlotMigrationTryAgain(t *testing.T) {
	sc := newSlotCase(t, "try:", "t")
	st, ctx, a, slot := sc.st, context.Background(), sc.a, sc.slot
	moved, stays, other := sc.moved, sc.stays, sc.other
	movedKey, staysKey, otherKey := sc.movedKey, sc.staysKey, sc.otherKey
	decide := sc.decide
	c := sc.c
	decide(t, "before", moved, stays, other)
	nodes, ids := clusterNodes(t, c)
	b := startMigration(t, nodes, ids, slot, a)
	_, port, _ := net.SplitHostPort(b)
	if err := nodes[a].Migrate(ctx, "127.0.0.1", port, movedKey, 0, 5*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	decide(t, "half moved, the moved key first", moved, stays, other)
	decide(t, "half moved, the other slot first", other, stays, moved)
	decide(t, "half moved, the slot alone", stays, moved)
	// The slot is still moving: the moved key counts on the target (read
	// after ASKING), the one left behind on the source; the other key
	// was in every call but the last.
	for _, w := range []struct {
		key, node string
		want      int
	}{{movedKey, b, sc.used}, {staysKey, a, sc.used}, {otherKey, a, sc.used - 1}} {
		var get *redis.StringCmd
		_, err := nodes[w.node].Pipelined(ctx, func(p redis.Pipeliner) error {
			p.Do(ctx, "asking")
			get = p.Get(ctx, w.key)
			return nil
		})
		if got, gerr := get.Int(); err != nil || gerr != nil || got != w.want {
			t.Errorf("%s on %s: %d, %v %v; want %d", w.key, w.node, got, err, gerr, w.want)
		}
	}
	if n := gatherCounter(t, st, "ratelimit_redis_node_runs_redone_total"); n < 1 {
		t.Errorf("node runs redone per slot: %v, want at least 1", n)
	}
}

// slotCase is a 3-master cluster without replicas, a store on it, two
// checks on one slot of master a (hash tag tag: moved and stays) and
// one on another slot of a (other), each counting to slotCaseLimit.
type slotCase struct {
	c                            *harness.RedisClusterServers
	st                           *Redis
	moved, stays, other          Check
	movedKey, staysKey, otherKey string
	slot                         int
	a                            string
	used                         int // calls decided: each check's count
}

const slotCaseLimit = 1000

func newSlotCase(t *testing.T, prefix, tag string) *slotCase {
	t.Helper()
	sc := &slotCase{c: harness.RedisCluster(t, harness.RedisClusterOptions{Replicas: -1})}
	sc.st = newModeStore(t, RedisConfig{Mode: RedisCluster, Addresses: sc.c.Addrs(), KeyPrefix: prefix, Timeout: 2 * time.Second})
	mk := func(name string) (Check, string) {
		ch := Check{Key: name, Limit: Limit{FixedWindow, slotCaseLimit, Hour, 0}, Cap: slotCaseLimit, Hits: 1}
		return ch, sc.st.prefix + FixedWindowKey(ch.Key, t0, Hour)
	}
	sc.moved, sc.movedKey = mk("a{" + tag + "}_")
	sc.stays, sc.staysKey = mk("b{" + tag + "}_")
	sc.slot = int(hashSlot(sc.movedKey))
	cc := clusterClient(t, sc.c)
	src, err := cc.MasterForKey(context.Background(), sc.movedKey)
	if err != nil {
		t.Fatal(err)
	}
	sc.a = src.Options().Addr
	sc.other, sc.otherKey = sameMasterCheck(t, cc, sc.st, sc.a, sc.slot)
	return sc
}

// decide decides checks in one call and fails the test unless each is
// allowed with the count of a check in every call so far.
func (sc *slotCase) decide(t *testing.T, stage string, checks ...Check) {
	t.Helper()
	res, err := sc.st.Decide(context.Background(), t0, checks)
	sc.used++
	if err != nil {
		t.Fatalf("%s: %v", stage, err)
	}
	for i, r := range res {
		if !r.Allowed || r.Remaining != uint32(slotCaseLimit-sc.used) {
			t.Fatalf("%s: check %d: %+v; want remaining %d", stage, i, r, slotCaseLimit-sc.used)
		}
	}
}

// clusterNodes are a client of each node of c and each node's id, by
// address.
func clusterNodes(t *testing.T, c *harness.RedisClusterServers) (map[string]*redis.Client, map[string]string) {
	t.Helper()
	nodes, ids := map[string]*redis.Client{}, map[string]string{}
	for _, n := range c.Nodes {
		cl := redis.NewClient(&redis.Options{Addr: n.Addr()})
		t.Cleanup(func() { cl.Close() })
		nodes[n.Addr()] = cl
		id, err := cl.ClusterMyID(context.Background()).Result()
		if err != nil {
			t.Fatal(err)
		}
		ids[n.Addr()] = id
	}
	return nodes, ids
}

// startMigration marks slot as moving from master a to another master of
// nodes, which it returns.
func startMigration(t *testing.T, nodes map[string]*redis.Client, ids map[string]string, slot int, a string) string {
	t.Helper()
	var b string
	for addr := range nodes {
		if addr != a {
			b = addr
			break
		}
	}
	ctx := context.Background()
	if err := nodes[b].Do(ctx, "cluster", "setslot", slot, "importing", ids[a]).Err(); err != nil {
		t.Fatal(err)
	}
	if err := nodes[a].Do(ctx, "cluster", "setslot", slot, "migrating", ids[b]).Err(); err != nil {
		t.Fatal(err)
	}
	return b
}

// A node run that go-redis follows through ASK to a slot's importing
// master must not run there: ASKING lets a script touch every key of the
// importing slot, those still on the source included, and with a slot
// map that also has the run's other slot stale (moved to the same
// target behind the store's back) every read of the run passes there,
// so a counter left on the source would start again from zero on the
// target. The run carries its master's id and refuses another node
// (NOTPLANNED): its checks run again one script per slot, where each
// counter is found where it lives.
func TestRedisClusterNodeRunAskedElsewhere(t *testing.T) {
	sc := newSlotCase(t, "ask:", "s")
	st, ctx, a, slot := sc.st, context.Background(), sc.a, sc.slot
	movedKey, staysKey, otherKey := sc.movedKey, sc.staysKey, sc.otherKey
	otherSlot := int(hashSlot(otherKey))
	decide := func(stage string) {
		t.Helper()
		sc.decide(t, stage, sc.moved, sc.stays, sc.other) // movedKey routes the node run
	}
	decide("before")
	waitFor(t, 5*time.Second, "the store knows the master's id", func() bool { _, ok := st.batch.ids.id(a); return ok })
	decide("before, a node run")
	nodes, ids := clusterNodes(t, sc.c)
	b := startMigration(t, nodes, ids, otherSlot, a)
	_, port, _ := net.SplitHostPort(b)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// The other slot moves to b whole, and the store is not told.
	must(nodes[a].Migrate(ctx, "127.0.0.1", port, otherKey, 0, 5*time.Second).Err())
	for _, cl := range nodes {
		must(cl.Do(ctx, "cluster", "setslot", otherSlot, "node", ids[b]).Err())
	}
	if m, err := st.cluster.MasterForKey(ctx, otherKey); err != nil || m.Options().Addr != a {
		t.Fatalf("the store's slot map was refreshed (%v, %v): the case needs it stale", m, err)
	}
	// The routing key's slot starts moving to b too, its key first.
	must(nodes[b].Do(ctx, "cluster", "setslot", slot, "importing", ids[a]).Err())
	must(nodes[a].Do(ctx, "cluster", "setslot", slot, "migrating", ids[b]).Err())
	must(nodes[a].Migrate(ctx, "127.0.0.1", port, movedKey, 0, 5*time.Second).Err())
	decide("routing key moved (ASK), the other slot moved unseen")
	decide("again")
	if got, err := nodes[a].Get(ctx, staysKey).Int(); err != nil || got != sc.used {
		t.Errorf("the counter left on the source: %d, %v; want %d", got, err, sc.used)
	}
	if n := gatherCounter(t, st, "ratelimit_redis_node_runs_redone_total"); n < 1 {
		t.Errorf("node runs redone per slot: %v, want at least 1", n)
	}
}
