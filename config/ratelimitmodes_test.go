package config

import (
	"slices"
	"strings"
	"testing"

	"github.com/xds-server/xds-server/ratelimit"
)

// ratelimit.redis.mode: each mode's keys reach the store's config, the
// sentinels' password from its env var too.
func TestRateLimitRedisModes(t *testing.T) {
	cluster, err := loadArgs(t, "--config", writeConfig(t, `
ratelimit:
  store: redis
  redis: { mode: cluster, addresses: ["10.0.0.1:7000", "10.0.0.2:7000"], password: p, tls: true }
`))
	if err != nil {
		t.Fatal(err)
	}
	s := cluster.RateLimit.Redis.Store()
	if s.Mode != ratelimit.RedisCluster || s.Address != "" || !slices.Equal(s.Addresses, []string{"10.0.0.1:7000", "10.0.0.2:7000"}) ||
		s.Password != "p" || !s.TLS || s.Validate() != nil {
		t.Errorf("cluster store config: %+v (%v)", s, s.Validate())
	}
	t.Setenv("XDS_SERVER_RATELIMIT_REDIS_SENTINEL_PASSWORD", "sentinel-secret")
	sentinel, err := loadArgs(t, "--ratelimit.redis.mode", "sentinel", "--ratelimit.redis.addresses", "s1:26379,s2:26379,s3:26379",
		"--ratelimit.redis.sentinel.master_name", "rl", "--ratelimit.redis.db", "3")
	if err != nil {
		t.Fatal(err)
	}
	s = sentinel.RateLimit.Redis.Store()
	if s.Mode != ratelimit.RedisSentinel || s.MasterName != "rl" || s.SentinelPassword != "sentinel-secret" || s.DB != 3 ||
		len(s.Addresses) != 3 || s.Address != "" || s.Validate() != nil {
		t.Errorf("sentinel store config: %+v (%v)", s, s.Validate())
	}
	t.Setenv("XDS_SERVER_RATELIMIT_REDIS_SENTINEL_PASSWORD", "")
	single, err := loadArgs(t)
	if err != nil {
		t.Fatal(err)
	}
	if s := single.RateLimit.Redis.Store(); s.Mode != ratelimit.RedisSingle || s.Address != "127.0.0.1:6379" || s.Addresses != nil {
		t.Errorf("default store config: %+v", s)
	}
}

func TestRateLimitRedisModeErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		args []string
		want []string
	}{
		"unknown mode":             {[]string{"--ratelimit.redis.mode", "ring"}, []string{"ratelimit.redis.mode: ring", "single, cluster, sentinel"}},
		"cluster without nodes":    {[]string{"--ratelimit.redis.mode", "cluster"}, []string{"ratelimit.redis.addresses", "required", "seed nodes"}},
		"sentinel without nodes":   {[]string{"--ratelimit.redis.mode", "sentinel", "--ratelimit.redis.sentinel.master_name", "rl"}, []string{"ratelimit.redis.addresses", "the sentinels"}},
		"sentinel without master":  {[]string{"--ratelimit.redis.mode", "sentinel", "--ratelimit.redis.addresses", "s:26379"}, []string{"ratelimit.redis.sentinel.master_name", "required"}},
		"cluster with db":          {[]string{"--ratelimit.redis.mode", "cluster", "--ratelimit.redis.addresses", "n:7000", "--ratelimit.redis.db", "1"}, []string{"ratelimit.redis.db", "must be 0"}},
		"bad node address":         {[]string{"--ratelimit.redis.mode", "cluster", "--ratelimit.redis.addresses", "n:7000,nope"}, []string{"ratelimit.redis.addresses", "nope"}},
		"addresses in single mode": {[]string{"--ratelimit.redis.addresses", "n:7000"}, []string{"ratelimit.redis.addresses", "needs ratelimit.redis.mode"}},
		"master name, not sentinel": {[]string{"--ratelimit.redis.mode", "cluster", "--ratelimit.redis.addresses", "n:7000", "--ratelimit.redis.sentinel.master_name", "rl"},
			[]string{"ratelimit.redis.sentinel.master_name", "needs ratelimit.redis.mode sentinel"}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := loadArgs(t, tc.args...)
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
	// A misplaced sentinel password is reported, never printed.
	t.Setenv("XDS_SERVER_RATELIMIT_REDIS_SENTINEL_PASSWORD", "hunter2-sentinel")
	_, err := loadArgs(t)
	if err == nil || !strings.Contains(err.Error(), "ratelimit.redis.sentinel.password") || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("sentinel password without sentinel mode: %v", err)
	}
}
