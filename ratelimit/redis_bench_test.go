package ratelimit

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xds-server/xds-server/e2e/harness"
)

// BenchmarkRedisDecide is the Redis store alone, from parallel callers
// (16 x GOMAXPROCS goroutines): one call of 1 or 3 checks (fixed window,
// sliding window, token bucket) per op over 10,000 keys each.
func BenchmarkRedisDecide(b *testing.B) {
	srv := harness.Redis(b, harness.RedisOptions{})
	benchRedisDecide(b, newRedisStore(b, srv, RedisConfig{Timeout: time.Second}))
}

// BenchmarkRedisClusterDecide is BenchmarkRedisDecide on a 3-master
// Redis Cluster (3 replicas) on the same machine.
func BenchmarkRedisClusterDecide(b *testing.B) {
	c := harness.RedisCluster(b, harness.RedisClusterOptions{})
	benchRedisDecide(b, newModeStore(b, RedisConfig{Mode: RedisCluster, Addresses: c.Addrs(), Timeout: time.Second}))
}

func benchRedisDecide(b *testing.B, st *Redis) {
	limits := []Limit{{FixedWindow, 1_000_000, Second, 0}, {SlidingWindow, 1_000_000, Minute, 0},
		{TokenBucket, 1_000_000, Second, 1_000_000}}
	for _, n := range []int{1, 3} {
		b.Run("checks="+strconv.Itoa(n), func(b *testing.B) {
			b.SetParallelism(16) // calls in flight: 16 x GOMAXPROCS
			var next atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				checks := make([]Check, n)
				for pb.Next() {
					i := next.Add(1)
					for j := range checks {
						checks[j] = Check{Key: "bench_" + strconv.FormatInt(i%10_000, 10) + "_", Limit: limits[j], Cap: 1_000_000, Hits: 1}
					}
					if _, err := st.Decide(context.Background(), time.Now(), checks); err != nil {
						b.Error(err)
						return
					}
				}
			})
			reportDecisions(b, n)
		})
	}
}
