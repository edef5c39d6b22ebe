package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/xds-server/xds-server/e2e/harness"
	"github.com/xds-server/xds-server/ratelimit"
)

// ratelimit.redis.per_second.address: the store is a Split whose checks
// per second reach the second Redis, the others the first.
func TestNewStorePerSecond(t *testing.T) {
	main, sec := harness.Redis(t, harness.RedisOptions{}), harness.Redis(t, harness.RedisOptions{})
	cfg, err := loadArgs(t, "--ratelimit.store", "redis", "--ratelimit.redis.address", main.Addr(),
		"--ratelimit.redis.per_second.address", sec.Addr())
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	st, closeStore, err := newStore(cfg.RateLimit.RateLimitConfig, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer closeStore()
	if _, ok := st.(*ratelimit.Split); !ok {
		t.Fatalf("store %T, want *ratelimit.Split", st)
	}
	if n := strings.Count(logs.String(), "redis store connected"); n != 2 || !strings.Contains(logs.String(), "store=per_second") {
		t.Errorf("want two connected lines, one store=per_second:\n%s", logs.String())
	}
	ctx := context.Background()
	checks := []ratelimit.Check{
		{Key: "d_s_", Limit: ratelimit.Limit{Algorithm: ratelimit.FixedWindow, Requests: 5, Unit: ratelimit.Second}, Cap: 5, Hits: 1},
		{Key: "d_h_", Limit: ratelimit.Limit{Algorithm: ratelimit.FixedWindow, Requests: 5, Unit: ratelimit.Hour}, Cap: 5, Hits: 1},
		{Key: "d_d_", Limit: ratelimit.Limit{Algorithm: ratelimit.TokenBucket, Requests: 5, Unit: ratelimit.Day, Burst: 5}, Cap: 5, Hits: 1},
	}
	res, err := st.Decide(ctx, time.Now(), checks)
	if err != nil || len(res) != 3 || !res[0].Allowed || !res[1].Allowed || !res[2].Allowed {
		t.Fatalf("Decide: %+v, %v", res, err)
	}
	for srv, want := range map[*harness.RedisServer]int64{main: 2, sec: 1} {
		c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
		if n := c.DBSize(ctx).Val(); n != want {
			t.Errorf("Redis %s holds %d keys, want %d", srv.Addr(), n, want)
		}
		c.Close()
	}
}

// ratelimit.redis.per_second.mode cluster and sentinel, on real servers:
// the checks per second land on the second Redis in its mode (spread over
// the cluster's masters, or on the sentinels' master), the others on the
// first, and repeated calls count on each.
func TestNewStorePerSecondModes(t *testing.T) {
	main := harness.Redis(t, harness.RedisOptions{})
	cluster := harness.RedisCluster(t, harness.RedisClusterOptions{})
	sentinel := harness.RedisSentinel(t, harness.RedisSentinelOptions{MasterName: "persec"})
	for _, c := range []struct {
		mode  string
		args  []string
		count func(ctx context.Context) (int64, error) // keys on the per-second Redis
	}{
		{"cluster", []string{"--ratelimit.redis.per_second.mode", "cluster",
			"--ratelimit.redis.per_second.addresses", strings.Join(cluster.Addrs(), ",")},
			func(ctx context.Context) (int64, error) {
				cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs()})
				defer cc.Close()
				var n atomicSum
				err := cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
					k, err := m.DBSize(ctx).Result()
					n.add(k, err == nil && k > 0)
					return err
				})
				if err == nil && n.nodes() < 2 {
					err = fmt.Errorf("the keys sit on %d master(s), want them spread", n.nodes())
				}
				return n.total(), err
			}},
		{"sentinel", []string{"--ratelimit.redis.per_second.mode", "sentinel",
			"--ratelimit.redis.per_second.addresses", strings.Join(sentinel.SentinelAddrs(), ","),
			"--ratelimit.redis.per_second.sentinel.master_name", sentinel.MasterName},
			func(ctx context.Context) (int64, error) {
				m := redis.NewClient(&redis.Options{Addr: sentinel.Master.Addr()})
				defer m.Close()
				return m.DBSize(ctx).Result()
			}},
	} {
		t.Run(c.mode, func(t *testing.T) {
			ctx := context.Background()
			mc := redis.NewClient(&redis.Options{Addr: main.Addr()})
			defer mc.Close()
			if err := mc.FlushAll(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			args := append([]string{"--ratelimit.store", "redis", "--ratelimit.redis.address", main.Addr(),
				"--ratelimit.redis.key_prefix", c.mode + ":"}, c.args...)
			cfg, err := loadArgs(t, args...)
			if err != nil {
				t.Fatal(err)
			}
			st, closeStore, err := newStore(cfg.RateLimit.RateLimitConfig, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			defer closeStore()
			perSecond := ratelimit.Limit{Algorithm: ratelimit.FixedWindow, Requests: 3, Unit: ratelimit.Second}
			var checks []ratelimit.Check
			for i := range 12 { // twelve users with unlike ids (CRC16 is linear: ids a digit apart share slot patterns)
				checks = append(checks, ratelimit.Check{Key: fmt.Sprintf("d_user_%08x_", uint32(i+1)*2654435761), Limit: perSecond, Cap: 3, Hits: 1})
			}
			checks = append(checks, ratelimit.Check{Key: "d_tenant_t_",
				Limit: ratelimit.Limit{Algorithm: ratelimit.FixedWindow, Requests: 3, Unit: ratelimit.Hour}, Cap: 3, Hits: 1})
			allowed := make([]int, len(checks))
			now := time.Now().Truncate(time.Second).Add(100 * time.Millisecond) // one window of a second for all four calls
			for range 4 {
				res, err := st.Decide(ctx, now, checks)
				if err != nil || len(res) != len(checks) {
					t.Fatalf("Decide: %d results, %v", len(res), err)
				}
				for i, r := range res {
					if r.Allowed {
						allowed[i]++
					}
				}
			}
			for i, n := range allowed {
				if n != 3 { // a limit of 3: the fourth call refused, on either Redis
					t.Errorf("%s: allowed %d of 4, want 3", checks[i].Key, n)
				}
			}
			if n, err := c.count(ctx); err != nil || n != 12 {
				t.Errorf("the per-second Redis holds %d keys (%v), want the 12 per-second ones", n, err)
			}
			if n := mc.DBSize(ctx).Val(); n != 1 {
				t.Errorf("the main Redis holds %d keys, want the 1 per hour", n)
			}
		})
	}
}

// atomicSum adds the key counts of a cluster's masters (ForEachMaster
// calls at once).
type atomicSum struct {
	mu       sync.Mutex
	n        int64
	nonEmpty int
}

func (a *atomicSum) add(n int64, nonEmpty bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.n += n
	if nonEmpty {
		a.nonEmpty++
	}
}

func (a *atomicSum) total() int64 { a.mu.Lock(); defer a.mu.Unlock(); return a.n }

func (a *atomicSum) nodes() int { a.mu.Lock(); defer a.mu.Unlock(); return a.nonEmpty }
