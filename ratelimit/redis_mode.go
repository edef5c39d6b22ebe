package ratelimit

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// validateMode checks the fields that depend on the mode: the addresses,
// the master name and the database.
func (c RedisConfig) validateMode() []error {
	var errs []error
	switch c.Mode {
	case "", RedisSingle:
		if c.Address == "" {
			errs = append(errs, errors.New("address is required"))
		} else if !isHostPort(c.Address) {
			errs = append(errs, fmt.Errorf("address %q is not host:port", c.Address))
		}
		if len(c.Addresses) > 0 {
			errs = append(errs, errors.New("addresses are for cluster and sentinel modes (single mode: address)"))
		}
	case RedisCluster, RedisSentinel:
		if c.Address != "" {
			errs = append(errs, fmt.Errorf("address is for single mode (%s mode: addresses)", c.Mode))
		}
		if len(c.Addresses) == 0 {
			errs = append(errs, fmt.Errorf("%s mode needs addresses (%s)", c.Mode, map[RedisMode]string{
				RedisCluster: "seed nodes of the cluster", RedisSentinel: "the sentinels"}[c.Mode]))
		}
		for _, a := range c.Addresses {
			if !isHostPort(a) {
				errs = append(errs, fmt.Errorf("address %q is not host:port", a))
			}
		}
	default:
		errs = append(errs, fmt.Errorf("mode %q is not one of single, cluster, sentinel", c.Mode))
	}
	if c.Mode == RedisSentinel && c.MasterName == "" {
		errs = append(errs, errors.New("sentinel mode needs a master name"))
	}
	if c.Mode != RedisSentinel && (c.MasterName != "" || c.SentinelPassword != "") {
		errs = append(errs, errors.New("master name and sentinel password need sentinel mode"))
	}
	if c.Mode == RedisCluster && c.DB != 0 {
		errs = append(errs, fmt.Errorf("db %d: a Redis Cluster has only db 0", c.DB))
	}
	return errs
}

func isHostPort(a string) bool {
	_, port, err := net.SplitHostPort(a)
	return err == nil && port != ""
}

// newRedisClient returns the client of cfg's mode: a Client for single
// (one node) and sentinel (go-redis's FailoverClient: the master the
// sentinels name, followed across failovers) modes, or a ClusterClient.
// Every client: timeouts from the context (the call's deadline), no
// retries (a script that timed out may have run: never run it twice),
// RESP2 (the script replies integers and strings either way, and RESP3's
// push notifications cost every command a check), no extra commands when
// connecting.
func newRedisClient(cfg RedisConfig, tc *tls.Config, timeout time.Duration) (*redis.Client, *redis.ClusterClient) {
	maint := &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	switch cfg.Mode {
	case RedisCluster:
		return nil, redis.NewClusterClient(&redis.ClusterOptions{
			Addrs: cfg.Addresses, Username: cfg.Username, Password: cfg.Password,
			TLSConfig: tc, PoolSize: cfg.PoolSize,
			DialTimeout: timeout, ReadTimeout: timeout, WriteTimeout: timeout, PoolTimeout: timeout,
			ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1, Protocol: 2,
			DisableIdentity: true, MaintNotificationsConfig: maint,
			// MOVED and ASK are followed (MaxRedirects, go-redis's default);
			// scripts are never resent after a network error (noRetryCmd).
		})
	case RedisSentinel:
		return redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName: cfg.MasterName, SentinelAddrs: cfg.Addresses, SentinelPassword: cfg.SentinelPassword,
			Username: cfg.Username, Password: cfg.Password, DB: cfg.DB,
			TLSConfig: tc, PoolSize: cfg.PoolSize,
			DialTimeout: timeout, ReadTimeout: timeout, WriteTimeout: timeout, PoolTimeout: timeout,
			ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1, Protocol: 2,
			DisableIdentity: true, // RESP2: no maintenance notifications
		}), nil
	}
	return redis.NewClient(&redis.Options{
		Addr: cfg.Address, Username: cfg.Username, Password: cfg.Password, DB: cfg.DB,
		TLSConfig: tc, PoolSize: cfg.PoolSize,
		DialTimeout: timeout, ReadTimeout: timeout, WriteTimeout: timeout, PoolTimeout: timeout,
		ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1, Protocol: 2,
		DisableIdentity: true, MaintNotificationsConfig: maint,
	}), nil
}

// pingCluster pings every master of the cluster.
func (r *Redis) pingCluster(ctx context.Context) error {
	err := r.cluster.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		return c.Ping(ctx).Err()
	})
	if err != nil {
		return fmt.Errorf("ratelimit: redis cluster: %w", err)
	}
	return nil
}
