package main

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"

	"github.com/xds-server/xds-server/ratelimit"
)

// RateLimitConfig configures the rate-limit service (the ratelimit:
// section).
type RateLimitConfig struct {
	Address        string            `mapstructure:"address"`          // host:port of the RLS gRPC listener
	Config         string            `mapstructure:"config"`           // envoyproxy/ratelimit YAML file or directory; "" = no domains
	MergeDomains   bool              `mapstructure:"merge_domains"`    // merge files that share a domain (else an error)
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
	Redis          RedisConfig       `mapstructure:"redis"` // the redis store (store: redis)
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

// service is the part of ratelimit.ServiceConfig that c sets.
func (c RateLimitConfig) service() ratelimit.ServiceConfig {
	cacheKeys := int(c.LocalCacheKeys)
	if cacheKeys == 0 {
		cacheKeys = -1 // off
	}
	return ratelimit.ServiceConfig{Path: c.Config, MergeDomains: c.MergeDomains, Headers: c.Headers, ShadowMode: c.ShadowMode, NearLimitRatio: c.NearLimitRatio,
		OverLimitKeys: cacheKeys, MaxDescriptors: int(c.MaxDescriptors), MaxEntries: int(c.MaxEntries),
		MaxValueBytes: int(c.MaxValueBytes),
		Criticality: ratelimit.CriticalityConfig{Key: c.Criticality.Key, StaticOnly: !c.Criticality.Adaptive,
			Enabled: c.Criticality.Enabled, Shares: c.Criticality.shares()}}
}

// load is how c's config files are combined.
func (c RateLimitConfig) load() ratelimit.LoadOptions {
	return ratelimit.LoadOptions{MergeDomains: c.MergeDomains}
}

// RedisConfig is the ratelimit.redis section: the Redis node shared by
// the replicas of the rate-limit service.
type RedisConfig struct {
	Address       string        `mapstructure:"address"`         // host:port of one Redis node
	Username      string        `mapstructure:"username"`        // ACL user; "" = the default user
	Password      string        `mapstructure:"password"`        // "" = no AUTH; env XDS_SERVER_RATELIMIT_REDIS_PASSWORD
	DB            uint32        `mapstructure:"db"`              // database number
	TLS           bool          `mapstructure:"tls"`             // connect with TLS
	TLSCAFile     string        `mapstructure:"tls_ca_file"`     // PEM CA bundle; "" = system roots
	TLSServerName string        `mapstructure:"tls_server_name"` // name verified; "" = the address's host
	TLSSkipVerify bool          `mapstructure:"tls_skip_verify"` // do not verify the server's certificate
	PoolSize      uint32        `mapstructure:"pool_size"`       // connections; 0 = 10 per CPU
	Timeout       time.Duration `mapstructure:"timeout"`         // bound of one decision round trip (> 0)
	KeyPrefix     string        `mapstructure:"key_prefix"`      // before every key
	Pipelines     uint32        `mapstructure:"pipelines"`       // script runs in flight at once; 0 = 1
}

// store is the ratelimit.RedisConfig of c.
func (c RedisConfig) store() ratelimit.RedisConfig {
	return ratelimit.RedisConfig{Address: c.Address, Username: c.Username, Password: c.Password, DB: int(c.DB),
		TLS: c.TLS, TLSCAFile: c.TLSCAFile, TLSServerName: c.TLSServerName, TLSInsecureSkipVerify: c.TLSSkipVerify,
		PoolSize: int(c.PoolSize), Timeout: c.Timeout, KeyPrefix: c.KeyPrefix,
		Pipelines: int(c.Pipelines)}
}

// validate checks the ratelimit.redis section (whatever the store, so
// that a mistake shows before the store is switched).
func (c RedisConfig) validate(bad func(key, format string, args ...any)) {
	checkAddr(bad, "ratelimit.redis.address", c.Address)
	if c.DB > math.MaxInt32 {
		bad("ratelimit.redis.db", "%d is out of range [0, %d]", c.DB, math.MaxInt32)
	}
	if c.Timeout <= 0 {
		bad("ratelimit.redis.timeout", "%v must be positive", c.Timeout)
	}
	if c.PoolSize > 10_000 {
		bad("ratelimit.redis.pool_size", "%d is more than 10000", c.PoolSize)
	}
	if !c.TLS {
		for key, set := range map[string]bool{"tls_ca_file": c.TLSCAFile != "", "tls_server_name": c.TLSServerName != "",
			"tls_skip_verify": c.TLSSkipVerify} {
			if set {
				bad("ratelimit.redis."+key, "needs ratelimit.redis.tls: true")
			}
		}
	}
	if c.TLS && c.TLSCAFile != "" {
		if _, err := c.store().TLSConfig(); err != nil {
			bad("ratelimit.redis.tls_ca_file", "%v", err)
		}
	}
}

// validateRateLimit checks the ratelimit section, the config files included.
func (c Config) validateRateLimit(bad func(key, format string, args ...any)) {
	r := c.RateLimit
	checkAddr(bad, "ratelimit.address", r.Address)
	if _, err := ratelimit.ParseFailureMode(r.FailureMode); err != nil {
		bad("ratelimit.failure_mode", "%v", err)
	}
	switch r.Store {
	case "memory", "redis":
	default:
		bad("ratelimit.store", "%q is not one of memory, redis", r.Store)
	}
	r.Redis.validate(bad)
	if r.ReloadInterval <= 0 {
		bad("ratelimit.reload_interval", "%v must be positive", r.ReloadInterval)
	}
	if !(r.NearLimitRatio > 0 && r.NearLimitRatio <= 1) {
		bad("ratelimit.near_limit_ratio", "%v is not in (0, 1]", r.NearLimitRatio)
	}
	for key, v := range map[string]uint32{"max_descriptors": r.MaxDescriptors, "max_entries": r.MaxEntries,
		"max_value_bytes": r.MaxValueBytes} {
		if v == 0 || v > 1<<20 {
			bad("ratelimit."+key, "%d is not in [1, %d]", v, 1<<20)
		}
	}
	if r.Criticality.Key == "" {
		bad("ratelimit.criticality.key", "must not be empty")
	}
	if err := r.Criticality.shares().Validate(); err != nil {
		bad("ratelimit.criticality.shares", "%v", err)
	}
	if r.Config != "" {
		if _, err := r.load().LoadPath(r.Config); err != nil {
			bad("ratelimit.config", "%v", err)
		}
	}
}

// rateLimit is the running rate-limit service and its listener.
type rateLimit struct {
	svc  *ratelimit.Service
	grpc *grpc.Server
	lis  net.Listener
	cfg  RateLimitConfig

	closeStore func()
}

func newRateLimit(cfg RateLimitConfig, log *slog.Logger, reg prometheus.Registerer) (*rateLimit, error) {
	mode, err := ratelimit.ParseFailureMode(cfg.FailureMode)
	if err != nil {
		return nil, err
	}
	var rules *ratelimit.Config
	if cfg.Config != "" {
		if rules, err = cfg.load().LoadPath(cfg.Config); err != nil {
			return nil, err
		}
	}
	store, closeStore, err := newStore(cfg, log)
	if err != nil {
		return nil, err
	}
	sc := cfg.service()
	sc.Store, sc.Config, sc.FailureMode, sc.Registerer, sc.Logger = store, rules, mode, reg, log
	svc, err := ratelimit.NewService(sc)
	if err != nil {
		closeStore()
		return nil, err
	}
	lis, err := net.Listen("tcp", cfg.Address)
	if err != nil {
		closeStore()
		return nil, fmt.Errorf("ratelimit listener: %w", err)
	}
	// Stream workers: handlers run on long-lived goroutines whose stacks are
	// already grown (a goroutine per call grows its stack every time).
	// Handlers wait on the store, so there are many. Fixed flow-control
	// windows turn off grpc-go's bandwidth estimation, whose pings (and
	// their acks, from every client) buy nothing for messages of a few
	// hundred bytes: about 2 µs of server CPU per decision less.
	g := grpc.NewServer(grpc.NumStreamWorkers(128),
		grpc.InitialWindowSize(1<<20), grpc.InitialConnWindowSize(4<<20))
	svc.Register(g)
	return &rateLimit{svc: svc, grpc: g, lis: lis, cfg: cfg, closeStore: closeStore}, nil
}

// newStore returns the store of cfg.Store and the function that closes
// it. An unreachable Redis is not an error: it is logged, decisions
// follow the failure mode until it answers.
func newStore(cfg RateLimitConfig, log *slog.Logger) (ratelimit.Store, func(), error) {
	if cfg.Store != "redis" {
		m, err := ratelimit.NewMemory(ratelimit.MemoryConfig{})
		return m, func() {}, err
	}
	rlog := log.With("component", "ratelimit")
	redis.SetLogger(redisLogger{rlog})
	r, err := ratelimit.NewRedis(cfg.Redis.store())
	if err != nil {
		return nil, nil, err
	}
	if err := r.Ping(context.Background()); err != nil {
		rlog.Warn("redis store not reachable yet; answering per failure mode until it is",
			"address", cfg.Redis.Address, "failure_mode", cfg.FailureMode, "error", err)
	} else {
		rlog.Info("redis store connected", "address", cfg.Redis.Address, "tls", cfg.Redis.TLS)
	}
	return r, func() { _ = r.Close() }, nil
}

// redisLogger sends go-redis's own messages (connection failures, already
// counted and logged by the service) to the debug level.
type redisLogger struct{ log *slog.Logger }

func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.DebugContext(ctx, "go-redis: "+fmt.Sprintf(format, v...))
}

// run serves until ctx is done, reloading the config files when they change.
func (r *rateLimit) run(ctx context.Context, errc chan<- error) {
	if r.cfg.Config != "" {
		go func() { _ = r.svc.Watch(ctx, r.cfg.ReloadInterval) }()
	}
	go func() {
		if err := r.grpc.Serve(r.lis); err != nil {
			errc <- fmt.Errorf("ratelimit: %w", err)
		}
	}()
}

// stop ends the rate-limit service gracefully until ctx is done.
func (r *rateLimit) stop(ctx context.Context) {
	done := make(chan struct{})
	go func() { r.grpc.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		r.grpc.Stop()
	}
	r.closeStore()
}
