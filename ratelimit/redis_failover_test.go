package ratelimit

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/xds-server/xds-server/e2e/harness"
)

// failoverLimit is every failover key's limit: far above what a test
// decides, so that each success tells the counter (Requests-Remaining).
const failoverLimit = 1_000_000

// failoverKey is what the loader saw of one key. Each key is decided by
// one worker, one call at a time, so its counter is known exactly:
// acked successes before the kill, and the first success after it reads
// back what the (promoted) master kept.
type failoverKey struct {
	check Check
	dead  bool // on the killed master

	acked      atomic.Int64 // successful decisions
	errs       atomic.Int64 // failed decisions
	errsAfter  atomic.Int64 // failed decisions after this key's recovery
	firstErr   atomic.Int64 // unix ns of the first failure (0: none)
	recovered  atomic.Int64 // unix ns of the first success after a failure
	lost       atomic.Int64 // hits acked before the kill that the first success after did not see
	ackedAtErr atomic.Int64 // acked at the first failure
	errText    atomic.Value // string: the first failure's error
	errAt      atomic.Int64 // unix ns of the first failure
}

// failoverLoad decides keys with workers goroutines until stop is
// closed; done when they have returned.
func failoverLoad(st *Redis, keys []*failoverKey, workers int, stop <-chan struct{}) (done func()) {
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// paced: each worker offers at most one decision a millisecond,
			// so that failed decisions (at once, breaker open) count load,
			// not how fast a loop can fail
			tick := time.NewTicker(time.Millisecond)
			defer tick.Stop()
			for {
				for i := w; i < len(keys); i += workers {
					select {
					case <-stop:
						return
					case <-tick.C:
					}
					k := keys[i]
					res, err := st.Decide(context.Background(), t0, []Check{k.check})
					now := time.Now().UnixNano()
					switch {
					case err != nil || len(res) != 1 || !res[0].Allowed:
						if k.errs.Add(1) == 1 {
							k.errText.Store(fmt.Sprint(err))
							k.errAt.Store(now)
						}
						if k.firstErr.Load() == 0 {
							k.firstErr.Store(now)
							k.ackedAtErr.Store(k.acked.Load())
						}
						if k.recovered.Load() != 0 {
							k.errsAfter.Add(1)
						}
					default:
						if k.firstErr.Load() != 0 && k.recovered.Load() == 0 {
							// the counter the master kept, this hit included
							seen := int64(failoverLimit - res[0].Remaining)
							k.lost.Store(max(k.acked.Load()+1-seen, 0))
							k.recovered.Store(now)
						}
						k.acked.Add(1)
					}
				}
			}
		}()
	}
	return wg.Wait
}

// waitFor polls cond every 20ms until it holds, failing the test after d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(20 * time.Millisecond) // polling state that has no event to await
	}
}

// failoverReport logs the window, the failed decisions and the counters
// reset of the dead keys, and checks the live keys had no errors and
// the dead keys failed only until they recovered.
func failoverReport(t *testing.T, keys []*failoverKey, killed, promoted time.Time) {
	t.Helper()
	var firstErr, firstOK, lastOK int64
	var failed, decided, reset, lostHits, acked int64
	for _, k := range keys {
		decided += k.acked.Load() + k.errs.Load()
		if !k.dead {
			if n := k.errs.Load(); n != 0 {
				t.Errorf("key %s (live master): %d failed decisions, the first at %v: %v", k.check.Key, n,
					time.Unix(0, k.errAt.Load()).Sub(killed).Round(time.Millisecond), k.errText.Load())
			}
			continue
		}
		if n := k.errsAfter.Load(); n != 0 {
			t.Errorf("key %s: %d failed decisions after it recovered", k.check.Key, n)
		}
		fe, ok := k.firstErr.Load(), k.recovered.Load()
		if fe == 0 || ok == 0 {
			t.Errorf("key %s on the killed master: first failure %d, recovery %d", k.check.Key, fe, ok)
			continue
		}
		if firstErr == 0 || fe < firstErr {
			firstErr = fe
		}
		if firstOK == 0 || ok < firstOK {
			firstOK = ok
		}
		lastOK = max(lastOK, ok)
		failed += k.errs.Load()
		acked += k.ackedAtErr.Load()
		if l := k.lost.Load(); l > 0 {
			reset++
			lostHits += l
		}
	}
	if firstErr == 0 {
		return
	}
	at := func(ns int64) time.Duration { return time.Unix(0, ns).Sub(killed).Round(time.Millisecond) }
	t.Logf("killed at 0; promoted seen at %v; first failure %v; first success after %v, last key recovered %v: window %v",
		promoted.Sub(killed).Round(time.Millisecond), at(firstErr), at(firstOK), at(lastOK),
		time.Duration(firstOK-firstErr).Round(time.Millisecond))
	t.Logf("decisions %d; failed %d (all on the killed master); counters reset %d of %d dead keys, %d of %d acked hits lost",
		decided, failed, reset, countDead(keys), lostHits, acked)
}

func countDead(keys []*failoverKey) (n int) {
	for _, k := range keys {
		if k.dead {
			n++
		}
	}
	return n
}

// failoverChecks are n fixed-window checks on keys spread over the
// slots (user ids: no hash tag, no structured set of slots).
func failoverChecks(n int) []*failoverKey {
	keys := make([]*failoverKey, n)
	for i := range keys {
		keys[i] = &failoverKey{check: Check{Key: fmt.Sprintf("f_%08x_", uint32(i)*2654435761),
			Limit: Limit{FixedWindow, failoverLimit, Hour, 0}, Cap: failoverLimit, Hits: 1}}
	}
	return keys
}

// warmAndKill runs the loader until every key has a few decisions, kills
// node, then waits until promoted reports the new master and every
// dead key has recovered and been decided a few more times.
func warmAndKill(t *testing.T, st *Redis, keys []*failoverKey, node *harness.RedisServer, promoted func() bool) {
	t.Helper()
	stop := make(chan struct{})
	wait := failoverLoad(st, keys, 6, stop)
	stopped := false
	defer func() {
		if !stopped {
			close(stop)
			wait()
		}
	}()
	waitFor(t, 10*time.Second, "warm-up", func() bool {
		for _, k := range keys {
			if k.acked.Load() < 5 {
				return false
			}
		}
		return true
	})
	killed := time.Now()
	node.Stop() // SIGKILL
	var promotedAt time.Time
	waitFor(t, 15*time.Second, "promotion", promoted)
	promotedAt = time.Now()
	waitFor(t, 10*time.Second, "every key on the killed master decided again", func() bool {
		for _, k := range keys {
			if k.dead && k.recovered.Load() == 0 {
				return false
			}
		}
		return true
	})
	after := map[*failoverKey]int64{}
	for _, k := range keys {
		after[k] = k.acked.Load()
	}
	waitFor(t, 5*time.Second, "decisions after recovery", func() bool {
		for _, k := range keys {
			if k.acked.Load() < after[k]+3 {
				return false
			}
		}
		return true
	})
	close(stop)
	wait()
	stopped = true
	failoverReport(t, keys, killed, promotedAt)
}

// A master of a 3-master, 3-replica cluster killed (SIGKILL) under load:
// the other masters' keys are decided throughout; the killed master's
// fail (failure mode) until its replica is promoted, then are decided
// again by the same store. Logs the window, the failed decisions and the
// counters that replication had not carried to the replica.
func TestRedisClusterFailover(t *testing.T) {
	// Without full coverage required, the other masters keep serving
	// while a master's slots have none; the replicas sync at once.
	c := harness.RedisCluster(t, harness.RedisClusterOptions{NodeTimeout: time.Second,
		Args: []string{"--cluster-require-full-coverage", "no", "--repl-diskless-sync-delay", "0"}})
	st := newModeStore(t, RedisConfig{Mode: RedisCluster, Addresses: c.Addrs(), KeyPrefix: "fo:",
		BreakerBackoff: 100 * time.Millisecond})
	ctx := context.Background()
	cc := clusterClient(t, c)
	keys := failoverChecks(36)
	redisKey := func(k *failoverKey) string { return st.prefix + FixedWindowKey(k.check.Key, t0, Hour) }
	first, err := cc.MasterForKey(ctx, redisKey(keys[0]))
	if err != nil {
		t.Fatal(err)
	}
	down := first.Options().Addr
	masters := map[string]int{}
	for _, k := range keys {
		m, err := cc.MasterForKey(ctx, redisKey(k))
		if err != nil {
			t.Fatal(err)
		}
		masters[m.Options().Addr]++
		k.dead = m.Options().Addr == down
	}
	if len(masters) != 3 {
		t.Fatalf("keys on %d masters (%v), want 3", len(masters), masters)
	}
	var node *harness.RedisServer
	var live *redis.Client
	for _, n := range c.Nodes {
		if n.Addr() == down {
			node = n
		} else if live == nil {
			live = redis.NewClient(&redis.Options{Addr: n.Addr()})
			t.Cleanup(func() { live.Close() })
		}
	}
	// A replica that never synced is not promoted: wait for every link.
	for _, n := range c.Nodes {
		cl := redis.NewClient(&redis.Options{Addr: n.Addr()})
		waitFor(t, 10*time.Second, n.Addr()+" in sync", func() bool {
			info, err := cl.Info(ctx, "replication").Result()
			return err == nil && (strings.Contains(info, "role:master") || strings.Contains(info, "master_link_status:up"))
		})
		cl.Close()
	}
	slot := int(hashSlot(redisKey(keys[0])))
	t.Logf("killing %s (%d of %d keys)", down, masters[down], len(keys))
	warmAndKill(t, st, keys, node, func() bool {
		slots, err := live.ClusterSlots(ctx).Result()
		if err != nil {
			return false
		}
		for _, s := range slots {
			if slot >= s.Start && slot <= s.End && len(s.Nodes) > 0 {
				return s.Nodes[0].Addr != down
			}
		}
		return false
	})
}

// The master behind Sentinel killed under load: every decision fails
// until the sentinels promote the replica and the FailoverClient follows,
// then they are decided again by the same store.
func TestRedisSentinelFailover(t *testing.T) {
	s := harness.RedisSentinel(t, harness.RedisSentinelOptions{MasterName: "fo",
		DownAfter: time.Second, FailoverTimeout: 2 * time.Second})
	st := newModeStore(t, RedisConfig{Mode: RedisSentinel, Addresses: s.SentinelAddrs(), MasterName: s.MasterName,
		KeyPrefix: "fo:", BreakerBackoff: 100 * time.Millisecond})
	keys := failoverChecks(12)
	for _, k := range keys {
		k.dead = true
	}
	sc := redis.NewSentinelClient(&redis.Options{Addr: s.Sentinels[0].Addr()})
	t.Cleanup(func() { sc.Close() })
	old := strconv.Itoa(s.Master.Port())
	warmAndKill(t, st, keys, s.Master, func() bool {
		addr, err := sc.GetMasterAddrByName(context.Background(), s.MasterName).Result()
		return err == nil && len(addr) == 2 && addr[1] != old
	})
}
