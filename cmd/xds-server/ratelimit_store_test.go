package main

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
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
