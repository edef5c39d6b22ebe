package config

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xds-server/xds-server/ratelimit"
)

// ratelimit.redis.per_second.*: off by default; set, its connection keys
// reach its store's config (its password from its env var), the rest is
// ratelimit.redis's.
func TestRateLimitRedisPerSecond(t *testing.T) {
	def, err := loadArgs(t)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := def.RateLimit.Redis.PerSecondStore(); ok {
		t.Error("per-second Redis on by default")
	}
	t.Setenv("XDS_SERVER_RATELIMIT_REDIS_PER_SECOND_PASSWORD", "ps-secret")
	c, err := loadArgs(t, "--config", writeConfig(t, `
ratelimit:
  store: redis
  redis:
    address: "10.0.0.1:6379"
    password: main
    key_prefix: "rl:"
    per_second: { mode: cluster, addresses: ["10.0.0.2:7000", "10.0.0.3:7000"], timeout: 100ms, pool_size: 7 }
`))
	if err != nil {
		t.Fatal(err)
	}
	s, ok := c.RateLimit.Redis.PerSecondStore()
	if !ok || s.Mode != ratelimit.RedisCluster || s.Address != "" || !slices.Equal(s.Addresses, []string{"10.0.0.2:7000", "10.0.0.3:7000"}) ||
		s.Password != "ps-secret" || s.Timeout != 100*time.Millisecond || s.PoolSize != 7 || s.KeyPrefix != "rl:" || s.Validate() != nil {
		t.Errorf("per-second store config (%v): %+v (%v)", ok, s, s.Validate())
	}
	if m := c.RateLimit.Redis.Store(); m.Address != "10.0.0.1:6379" || m.Password != "main" || m.Timeout != 250*time.Millisecond {
		t.Errorf("main store config: %+v", m)
	}
}

func TestRateLimitRedisPerSecondErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		args []string
		want []string
	}{
		"mode without addresses": {[]string{"--ratelimit.redis.per_second.mode", "cluster"},
			[]string{"ratelimit.redis.per_second.mode: cluster", "needs ratelimit.redis.per_second.addresses"}},
		"bad address": {[]string{"--ratelimit.redis.per_second.address", "nope"}, []string{"ratelimit.redis.per_second.address", "nope"}},
		"addresses in single mode": {[]string{"--ratelimit.redis.per_second.addresses", "n:7000"},
			[]string{"ratelimit.redis.per_second.addresses", "needs ratelimit.redis.per_second.mode cluster or sentinel"}},
		"sentinel without master": {[]string{"--ratelimit.redis.per_second.mode", "sentinel", "--ratelimit.redis.per_second.addresses", "s:26379"},
			[]string{"ratelimit.redis.per_second.sentinel.master_name", "required"}},
		"zero timeout": {[]string{"--ratelimit.redis.per_second.address", "h:6379", "--ratelimit.redis.per_second.timeout", "0s"},
			[]string{"ratelimit.redis.per_second.timeout", "must be positive"}},
		"tls key without tls": {[]string{"--ratelimit.redis.per_second.address", "h:6379", "--ratelimit.redis.per_second.tls_server_name", "r"},
			[]string{"ratelimit.redis.per_second.tls_server_name", "needs ratelimit.redis.per_second.tls: true"}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := loadArgs(t, append([]string{"--ratelimit.store", "redis"}, tc.args...)...)
			if err == nil {
				t.Fatal("loaded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// With the memory store, a per-second Redis is ignored with a warning.
func TestRateLimitRedisPerSecondMemoryStore(t *testing.T) {
	_, err := loadArgs(t, "--ratelimit.store", "memory", "--ratelimit.redis.per_second.address", "h:6379")
	if err == nil || !strings.Contains(err.Error(), "needs ratelimit.store redis") {
		t.Errorf("per-second Redis with the memory store: %v", err)
	}
}
