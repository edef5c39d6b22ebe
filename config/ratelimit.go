package config

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/xds-server/xds-server/ratelimit"
)

// RateLimitConfig configures the rate-limit service (the ratelimit:
// section).
type RateLimitConfig struct {
	Address        string            `mapstructure:"address"`          // host:port of the RLS gRPC listener
	Server         string            `mapstructure:"server"`           // grpc | lean
	MaxStreams     uint32            `mapstructure:"max_streams"`      // concurrent calls per connection
	MaxConnections uint32            `mapstructure:"max_connections"`  // open connections of the listener; 0 = from the file limit
	Config         string            `mapstructure:"config"`           // envoyproxy/ratelimit YAML file or directory; "" = no domains
	MergeDomains   bool              `mapstructure:"merge_domains"`    // merge files that share a domain (else an error)
	AllowEmpty     bool              `mapstructure:"allow_empty"`      // a config path without domains is accepted (else an error)
	FailureMode    string            `mapstructure:"failure_mode"`     // allow | deny, when the store fails
	Store          string            `mapstructure:"store"`            // memory | redis
	Headers        bool              `mapstructure:"headers"`          // RateLimit-* response headers
	ReloadInterval time.Duration     `mapstructure:"reload_interval"`  // how often the config files are checked for changes
	ShadowMode     bool              `mapstructure:"shadow_mode"`      // every rule in shadow mode
	NearLimitRatio float64           `mapstructure:"near_limit_ratio"` // near_limit above this share of a limit
	LocalCacheKeys uint32            `mapstructure:"local_cache_keys"` // over-limit cache bound; 0 = off
	MaxDescriptors uint32            `mapstructure:"max_descriptors"`  // request bounds
	MaxEntries     uint32            `mapstructure:"max_entries"`
	MaxValueBytes  uint32            `mapstructure:"max_value_bytes"`
	Criticality    CriticalityConfig `mapstructure:"criticality"`
	Memory         MemoryConfig      `mapstructure:"memory"` // the memory store (store: memory)
	Redis          RedisConfig       `mapstructure:"redis"`  // the redis store (store: redis)
	TLS            TLSConfig         `mapstructure:"tls"`
	Authorization  struct {
		Identities []string `mapstructure:"identities"` // globs on the client certificate's SANs; empty = any verified client
	} `mapstructure:"authorization"`
}

// MemoryConfig is the ratelimit.memory section: the bounds of the memory
// store.
type MemoryConfig struct {
	MaxKeys  uint32 `mapstructure:"max_keys"`  // most keys held, >= 64
	MaxBytes uint32 `mapstructure:"max_bytes"` // most bytes of keys held, >= 1 MiB
}

// Store is the ratelimit.MemoryConfig of c, with the background sweep.
func (c MemoryConfig) Store() ratelimit.MemoryConfig {
	return ratelimit.MemoryConfig{MaxKeys: int(c.MaxKeys), MaxBytes: int(c.MaxBytes),
		SweepInterval: ratelimit.DefaultMemorySweepInterval}
}

// validate checks the ratelimit.memory section.
func (c MemoryConfig) validate(p *problems) {
	if c.MaxKeys < ratelimit.DefaultMemoryShards {
		p.bad("ratelimit.memory.max_keys", c.MaxKeys, fmt.Sprintf("is below %d (one per shard)", ratelimit.DefaultMemoryShards))
	}
	if minBytes := uint32(ratelimit.DefaultMemoryShards * 16 << 10); c.MaxBytes < minBytes {
		p.bad("ratelimit.memory.max_bytes", c.MaxBytes, fmt.Sprintf("is below %d (16 KiB per shard)", minBytes))
	}
}

// CriticalityConfig is the ratelimit.criticality section.
type CriticalityConfig struct {
	Key      string `mapstructure:"key"`      // descriptor entry key of the criticality
	Adaptive bool   `mapstructure:"adaptive"` // reserve the higher classes' recent demand
	Enabled  bool   `mapstructure:"enabled"`  // shares for every rule without its own setting
	Shares   struct {
		Sheddable     float64 `mapstructure:"sheddable"`
		SheddablePlus float64 `mapstructure:"sheddable_plus"`
		Critical      float64 `mapstructure:"critical"`
		CriticalPlus  float64 `mapstructure:"critical_plus"`
	} `mapstructure:"shares"`
}

// shares are c's shares, lowest class first.
func (c CriticalityConfig) shares() ratelimit.Shares {
	s := c.Shares
	return ratelimit.Shares{s.Sheddable, s.SheddablePlus, s.Critical, s.CriticalPlus}
}

// Service is the part of ratelimit.ServiceConfig that c sets.
func (c RateLimitConfig) Service() ratelimit.ServiceConfig {
	cacheKeys := int(c.LocalCacheKeys)
	if cacheKeys == 0 {
		cacheKeys = -1 // off
	}
	return ratelimit.ServiceConfig{Path: c.Config, MergeDomains: c.MergeDomains, AllowEmpty: c.AllowEmpty, Headers: c.Headers, ShadowMode: c.ShadowMode, NearLimitRatio: c.NearLimitRatio,
		OverLimitKeys: cacheKeys, MaxDescriptors: int(c.MaxDescriptors), MaxEntries: int(c.MaxEntries),
		MaxValueBytes: int(c.MaxValueBytes),
		Criticality: ratelimit.CriticalityConfig{Key: c.Criticality.Key, StaticOnly: !c.Criticality.Adaptive,
			Enabled: c.Criticality.Enabled, Shares: c.Criticality.shares()}}
}

// LoadOptions is how c's config files are combined.
func (c RateLimitConfig) LoadOptions() ratelimit.LoadOptions {
	return ratelimit.LoadOptions{MergeDomains: c.MergeDomains, AllowEmpty: c.AllowEmpty}
}

// RedisConfig is the ratelimit.redis section: the Redis node shared by
// the replicas of the rate-limit service.
type RedisConfig struct {
	RedisConnection `mapstructure:",squash"`
	KeyPrefix       string `mapstructure:"key_prefix"` // before every key
	Pipelines       uint32 `mapstructure:"pipelines"`  // script runs in flight at once; 0 = 1

	BreakerFailures uint32        `mapstructure:"breaker_failures"` // failed runs in a row that open the breaker; 0 = no breaker
	BreakerBackoff  time.Duration `mapstructure:"breaker_backoff"`  // first wait of an open breaker before a probe (> 0)

	// PerSecond is a second Redis for the limits per second (as
	// envoyproxy/ratelimit's REDIS_PERSECOND_*), used when its address or
	// addresses are set, with ratelimit.store redis; the keys above are
	// shared.
	PerSecond RedisConnection `mapstructure:"per_second"`
}

// RedisConnection are the keys of one Redis's connection, in
// ratelimit.redis and ratelimit.redis.per_second.
type RedisConnection struct {
	Mode          string              `mapstructure:"mode"`            // single | cluster | sentinel
	Address       string              `mapstructure:"address"`         // host:port of one Redis node (mode single)
	Addresses     []string            `mapstructure:"addresses"`       // cluster seed nodes or sentinels (modes cluster, sentinel)
	Sentinel      RedisSentinelConfig `mapstructure:"sentinel"`        // mode sentinel
	Username      string              `mapstructure:"username"`        // ACL user; "" = the default user
	Password      string              `mapstructure:"password"`        // "" = no AUTH; env XDS_SERVER_RATELIMIT_REDIS_PASSWORD (_PER_SECOND_PASSWORD)
	DB            uint32              `mapstructure:"db"`              // database number
	TLS           bool                `mapstructure:"tls"`             // connect with TLS
	TLSCAFile     string              `mapstructure:"tls_ca_file"`     // PEM CA bundle; "" = system roots
	TLSServerName string              `mapstructure:"tls_server_name"` // name verified; "" = the address's host
	TLSSkipVerify bool                `mapstructure:"tls_skip_verify"` // do not verify the server's certificate
	PoolSize      uint32              `mapstructure:"pool_size"`       // connections; 0 = 10 per CPU
	Timeout       time.Duration       `mapstructure:"timeout"`         // bound of one decision round trip (> 0)
}

// RedisSentinelConfig is the ratelimit.redis.sentinel section.
type RedisSentinelConfig struct {
	MasterName string `mapstructure:"master_name"` // the name the sentinels know the master by
	Password   string `mapstructure:"password"`    // the sentinels' own; "" = no AUTH; env XDS_SERVER_RATELIMIT_REDIS_SENTINEL_PASSWORD
}

// Store is the ratelimit.RedisConfig of c: the address of its mode only.
func (c RedisConfig) Store() ratelimit.RedisConfig {
	s := c.store()
	switch s.Mode {
	case ratelimit.RedisCluster:
		s.Addresses = c.Addresses
	case ratelimit.RedisSentinel:
		s.Addresses, s.MasterName, s.SentinelPassword = c.Addresses, c.Sentinel.MasterName, c.Sentinel.Password
	default:
		s.Address = c.Address
	}
	return s
}

// store is the ratelimit.RedisConfig of c without the mode's addresses.
func (c RedisConfig) store() ratelimit.RedisConfig {
	return ratelimit.RedisConfig{Mode: ratelimit.RedisMode(c.Mode), Username: c.Username, Password: c.Password, DB: int(c.DB),
		TLS: c.TLS, TLSCAFile: c.TLSCAFile, TLSServerName: c.TLSServerName, TLSInsecureSkipVerify: c.TLSSkipVerify,
		PoolSize: int(c.PoolSize), Timeout: c.Timeout, KeyPrefix: c.KeyPrefix,
		Pipelines: int(c.Pipelines), BreakerFailures: breakerFailures(c.BreakerFailures), BreakerBackoff: c.BreakerBackoff}
}

// breakerFailures is ratelimit.RedisConfig.BreakerFailures of n: 0 (no
// breaker) is negative there.
func breakerFailures(n uint32) int {
	if n == 0 {
		return -1
	}
	return int(min(n, 1<<30))
}

// validate checks the ratelimit.redis section, or another at key
// prefix that has its keys (whatever the store, so that a mistake shows
// before the store is switched).
func (c RedisConfig) validate(p *problems, at string) {
	c.validateMode(p, at)
	if c.DB > math.MaxInt32 {
		p.bad(at+".db", c.DB, fmt.Sprintf("is not in [0, %d]", math.MaxInt32))
	}
	if c.Timeout <= 0 {
		p.bad(at+".timeout", c.Timeout, "must be positive")
	}
	if c.PoolSize > 10_000 {
		p.bad(at+".pool_size", c.PoolSize, "is not in [0, 10000]")
	}
	if !c.TLS {
		for key, v := range map[string]any{"tls_ca_file": c.TLSCAFile, "tls_server_name": c.TLSServerName,
			"tls_skip_verify": c.TLSSkipVerify} {
			if v != "" && v != false {
				p.bad(at+"."+key, v, "needs "+at+".tls: true")
			}
		}
	}
	if c.TLS && c.TLSCAFile != "" {
		if _, err := c.Store().TLSConfig(); err != nil {
			p.bad(at+".tls_ca_file", c.TLSCAFile, err.Error())
		}
	}
}

// validateMode checks the keys that depend on the mode (at+".mode").
func (c RedisConfig) validateMode(p *problems, at string) {
	mode := ratelimit.RedisMode(c.Mode)
	switch mode {
	case ratelimit.RedisSingle:
		checkAddr(p, at+".address", c.Address)
		if len(c.Addresses) > 0 {
			p.bad(at+".addresses", c.Addresses, "needs "+at+".mode cluster or sentinel (mode single: "+at+".address)")
		}
	case ratelimit.RedisCluster, ratelimit.RedisSentinel:
		if len(c.Addresses) == 0 {
			p.bad(at+".addresses", "[]", fmt.Sprintf("is required with "+at+".mode %s (%s)", mode,
				map[ratelimit.RedisMode]string{ratelimit.RedisCluster: "seed nodes of the cluster", ratelimit.RedisSentinel: "the sentinels"}[mode]))
		}
		for _, a := range c.Addresses {
			checkAddr(p, at+".addresses", a)
		}
	default:
		p.bad(at+".mode", c.Mode, "is not one of single, cluster, sentinel")
	}
	if mode == ratelimit.RedisSentinel && c.Sentinel.MasterName == "" {
		p.bad(at+".sentinel.master_name", "", "is required with "+at+".mode sentinel")
	}
	if mode != ratelimit.RedisSentinel {
		if c.Sentinel.MasterName != "" {
			p.bad(at+".sentinel.master_name", c.Sentinel.MasterName, "needs "+at+".mode sentinel")
		}
		if c.Sentinel.Password != "" {
			p.bad(at+".sentinel.password", "(set)", "needs "+at+".mode sentinel")
		}
	}
	if mode == ratelimit.RedisCluster && c.DB != 0 {
		p.bad(at+".db", c.DB, "must be 0 with "+at+".mode cluster (a Redis Cluster has only db 0)")
	}
}

// validateRateLimit checks the ratelimit section, the config files included.
func (c Config) validateRateLimit(p *problems) {
	r := c.RateLimit
	checkAddr(p, "ratelimit.address", r.Address)
	if _, err := ratelimit.ParseFailureMode(r.FailureMode); err != nil {
		p.bad("ratelimit.failure_mode", r.FailureMode, "is not one of allow, deny")
	}
	if r.Server != "grpc" && r.Server != "lean" {
		p.bad("ratelimit.server", r.Server, "is not one of grpc, lean")
	}
	if r.MaxStreams == 0 || r.MaxStreams > 1<<20 {
		p.bad("ratelimit.max_streams", r.MaxStreams, fmt.Sprintf("is not in [1, %d]", 1<<20))
	}
	switch r.Store {
	case "memory", "redis":
	default:
		p.bad("ratelimit.store", r.Store, "is not one of memory, redis")
	}
	r.Memory.validate(p)
	r.Redis.validate(p, "ratelimit.redis")
	if b := r.Redis.BreakerBackoff; b <= 0 || b > ratelimit.MaxRedisBreakerBackoff {
		p.bad("ratelimit.redis.breaker_backoff", b, fmt.Sprintf("is not in (0, %v]", ratelimit.MaxRedisBreakerBackoff))
	}
	r.validatePerSecond(p)
	if r.ReloadInterval <= 0 {
		p.bad("ratelimit.reload_interval", r.ReloadInterval, "must be positive")
	}
	if !(r.NearLimitRatio > 0 && r.NearLimitRatio <= 1) {
		p.bad("ratelimit.near_limit_ratio", r.NearLimitRatio, "is not in (0, 1]")
	}
	for key, v := range map[string]uint32{"max_descriptors": r.MaxDescriptors, "max_entries": r.MaxEntries,
		"max_value_bytes": r.MaxValueBytes} {
		if v == 0 || v > 1<<20 {
			p.bad("ratelimit."+key, v, fmt.Sprintf("is not in [1, %d]", 1<<20))
		}
	}
	if r.Criticality.Key == "" {
		p.bad("ratelimit.criticality.key", r.Criticality.Key, "must not be empty")
	}
	c.validateShares(p)
	if r.Config != "" {
		if _, err := r.LoadOptions().LoadPath(r.Config); err != nil {
			for _, line := range errorLines(err) {
				p.bad("ratelimit.config", r.Config, line)
			}
		}
	}
}

// validateShares checks each class's share: in [0, 1], never below the
// share of the class under it.
func (c Config) validateShares(p *problems) {
	s := c.RateLimit.Criticality.Shares
	classes := []struct {
		key string
		v   float64
	}{{"sheddable", s.Sheddable}, {"sheddable_plus", s.SheddablePlus}, {"critical", s.Critical}, {"critical_plus", s.CriticalPlus}}
	for i, cl := range classes {
		key := "ratelimit.criticality.shares." + cl.key
		switch {
		case !(cl.v >= 0 && cl.v <= 1):
			p.bad(key, cl.v, "is not in [0, 1]")
		case i > 0 && cl.v < classes[i-1].v:
			p.bad(key, cl.v, fmt.Sprintf("is below ratelimit.criticality.shares.%s (%v)", classes[i-1].key, classes[i-1].v))
		}
	}
}

// errorLines splits a (joined) error into its lines, one problem each; a
// heading line that ends with a colon is left out when lines follow it.
func errorLines(err error) []string {
	var out []string
	lines := strings.Split(err.Error(), "\n")
	for i, line := range lines {
		line = strings.TrimSpace(line)
		if line == "" || (strings.HasSuffix(line, ":") && i+1 < len(lines)) {
			continue
		}
		out = append(out, line)
	}
	return out
}
