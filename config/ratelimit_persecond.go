package config

import (
	"strings"
	"time"

	"github.com/xds-server/xds-server/ratelimit"
)

// RedisPerSecondConfig is the ratelimit.redis.per_second section: a
// second Redis (any mode) for the limits per second, as
// envoyproxy/ratelimit's REDIS_PERSECOND_* variables. It is used when
// Address or Addresses is set, with ratelimit.store redis. Its keys are
// the connection's; key_prefix, pipelines and the breaker are
// ratelimit.redis's.
type RedisPerSecondConfig struct {
	Mode          string              `mapstructure:"mode"`            // single | cluster | sentinel
	Address       string              `mapstructure:"address"`         // host:port of one Redis node (mode single)
	Addresses     []string            `mapstructure:"addresses"`       // cluster seed nodes or sentinels
	Sentinel      RedisSentinelConfig `mapstructure:"sentinel"`        // mode sentinel
	Username      string              `mapstructure:"username"`        // ACL user; "" = the default user
	Password      string              `mapstructure:"password"`        // "" = no AUTH; env XDS_SERVER_RATELIMIT_REDIS_PER_SECOND_PASSWORD
	DB            uint32              `mapstructure:"db"`              // database number
	TLS           bool                `mapstructure:"tls"`             // connect with TLS
	TLSCAFile     string              `mapstructure:"tls_ca_file"`     // PEM CA bundle; "" = system roots
	TLSServerName string              `mapstructure:"tls_server_name"` // name verified; "" = the address's host
	TLSSkipVerify bool                `mapstructure:"tls_skip_verify"` // do not verify the server's certificate
	PoolSize      uint32              `mapstructure:"pool_size"`       // connections; 0 = 10 per CPU
	Timeout       time.Duration       `mapstructure:"timeout"`         // bound of one decision round trip (> 0)
}

// Enabled reports whether a per-second Redis is configured (its address
// or addresses set).
func (c RedisPerSecondConfig) Enabled() bool { return c.Address != "" || len(c.Addresses) > 0 }

// redis is main with c's connection keys.
func (c RedisPerSecondConfig) redis(main RedisConfig) RedisConfig {
	r := main
	r.Mode, r.Address, r.Addresses, r.Sentinel = c.Mode, c.Address, c.Addresses, c.Sentinel
	r.Username, r.Password, r.DB = c.Username, c.Password, c.DB
	r.TLS, r.TLSCAFile, r.TLSServerName, r.TLSSkipVerify = c.TLS, c.TLSCAFile, c.TLSServerName, c.TLSSkipVerify
	r.PoolSize, r.Timeout, r.PerSecond = c.PoolSize, c.Timeout, RedisPerSecondConfig{}
	return r
}

// PerSecondStore is the ratelimit.RedisConfig of the per-second Redis;
// ok is false when none is configured.
func (c RedisConfig) PerSecondStore() (s ratelimit.RedisConfig, ok bool) {
	if !c.PerSecond.Enabled() {
		return s, false
	}
	return c.PerSecond.redis(c).Store(), true
}

// validatePerSecond checks the ratelimit.redis.per_second section.
func (c RateLimitConfig) validatePerSecond(p *problems) {
	const at = "ratelimit.redis.per_second"
	ps := c.Redis.PerSecond
	if !ps.Enabled() {
		if ps.Mode != string(ratelimit.RedisSingle) {
			p.bad(at+".mode", ps.Mode, "needs "+at+".addresses (or, mode single, .address): they enable the per-second Redis")
		}
		return
	}
	ps.redis(c.Redis).validate(p, at)
	if c.Store != "redis" {
		p.warn(at+".address", ps.Address+strings.Join(ps.Addresses, ","), "ignored: the per-second Redis needs ratelimit.store redis")
	}
}
