package config

import (
	"strings"

	"github.com/xds-server/xds-server/ratelimit"
)

// perSecond reports whether a per-second Redis is configured: its
// address or addresses set.
func (c RedisConfig) perSecond() bool {
	return c.PerSecond.Address != "" || len(c.PerSecond.Addresses) > 0
}

// redis is main with c's connection keys.
func (c RedisConnection) redis(main RedisConfig) RedisConfig {
	main.RedisConnection, main.PerSecond = c, RedisConnection{}
	return main
}

// PerSecondStore is the ratelimit.RedisConfig of the per-second Redis;
// ok is false when none is configured.
func (c RedisConfig) PerSecondStore() (s ratelimit.RedisConfig, ok bool) {
	if !c.perSecond() {
		return s, false
	}
	return c.PerSecond.redis(c).Store(), true
}

// validatePerSecond checks the ratelimit.redis.per_second section.
func (c RateLimitConfig) validatePerSecond(p *problems) {
	const at = "ratelimit.redis.per_second"
	ps := c.Redis.PerSecond
	if !c.Redis.perSecond() {
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
