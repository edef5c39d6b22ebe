package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/xds-server/xds-server/internal/metricreg"
)

// Defaults of ServiceConfig.
const (
	DefaultAddress          = ":18081"
	DefaultNearLimitRatio   = 0.8
	DefaultMaxDescriptors   = 64
	DefaultMaxEntries       = 32
	DefaultMaxValueBytes    = 1024
	DefaultMaxMetricKeys    = 10_000
	DefaultErrorLogInterval = 10 * time.Second
)

// FailureMode is what the service answers when the store fails.
type FailureMode uint8

const (
	// FailOpen admits the descriptors the store could not decide (the
	// default).
	FailOpen FailureMode = iota
	// FailClosed refuses them.
	FailClosed
)

// String returns the configuration name: allow or deny.
func (f FailureMode) String() string {
	if f == FailClosed {
		return "deny"
	}
	return "allow"
}

// ParseFailureMode parses ratelimit.failure_mode: "allow" (or "") or
// "deny".
func ParseFailureMode(s string) (FailureMode, error) {
	switch s {
	case "", "allow":
		return FailOpen, nil
	case "deny":
		return FailClosed, nil
	}
	return FailOpen, fmt.Errorf("ratelimit: invalid failure mode %q (want allow or deny)", s)
}

// CriticalityConfig is the service-wide criticality setting.
type CriticalityConfig struct {
	// Key is the descriptor entry key carrying the criticality; "" means
	// DefaultCriticalityKey. Entries with this key are removed from every
	// descriptor before matching and keying.
	Key string
	// Enabled applies Shares to every rule that has no criticality
	// settings of its own (rules with `criticality: false` excepted).
	// Off by default, so that envoyproxy/ratelimit configurations give
	// the same answers.
	Enabled bool
	// Shares are the shares of rules with `criticality: true`, and of
	// every rule without criticality settings when Enabled; the zero
	// value means DefaultShares.
	Shares Shares
	// StaticOnly turns off the adaptive reserve: by default every rule
	// (but those with `criticality: false`) keeps for the classes above
	// each class the hits they asked for over the last unit of its limit
	// (this process's requests, refused ones included, scaled by its
	// share of the key's usage in the store), until the fixed
	// window ends (over a unit for the sliding windows, over the time the
	// buckets take to refill their burst). Lower classes are then refused
	// first whatever the mix, and requests without a criticality entry,
	// all CRITICAL, reserve nothing from each other: answers without
	// criticality entries are envoyproxy/ratelimit's. Static caps
	// (shares, limits) apply as well: a class gets the smaller cap.
	StaticOnly bool
}

// ServiceConfig configures NewService. Zero fields take the defaults
// named.
type ServiceConfig struct {
	// Store decides the checks; required.
	Store Store
	// Config is the initial configuration; nil serves no domains (every
	// descriptor is OK) until SetConfig or Reload.
	Config *Config
	// Path is the file or directory Reload and Watch read.
	Path string
	// MergeDomains is the LoadOptions.MergeDomains of Reload and Watch.
	MergeDomains bool
	// AllowEmpty is the LoadOptions.AllowEmpty of Reload and Watch: off,
	// a reload that finds no domain fails and keeps the previous config.
	AllowEmpty  bool
	FailureMode FailureMode
	// Headers adds RateLimit-Limit, RateLimit-Remaining and
	// RateLimit-Reset for the descriptor closest to its limit.
	Headers bool
	// ShadowMode puts every rule in shadow mode (envoyproxy/ratelimit's
	// SHADOW_MODE): hits over a limit are counted (over_limit and
	// shadow_mode) but every descriptor is answered OK; so is a store
	// failure in deny mode.
	ShadowMode bool
	// NearLimitRatio in (0, 1]: hits admitted above this share of a limit
	// count as near_limit; 0 means DefaultNearLimitRatio.
	NearLimitRatio float64
	Criticality    CriticalityConfig
	// OverLimitKeys bounds the local over-limit cache; 0 means
	// DefaultOverLimitKeys, negative disables the cache.
	OverLimitKeys int
	// MaxDescriptors, MaxEntries (per descriptor) and MaxValueBytes (of
	// the domain and of each key and value) bound requests; larger ones
	// are InvalidArgument. 0 means the defaults.
	MaxDescriptors, MaxEntries, MaxValueBytes int
	// MaxMetricKeys bounds the distinct rule keys of the per-rule metrics;
	// further keys are counted under rule="_other". 0 means the default.
	MaxMetricKeys int
	// ErrorLogInterval is the least time between two store error log
	// lines; 0 means DefaultErrorLogInterval.
	ErrorLogInterval time.Duration
	// Registerer receives the metrics; nil keeps them unregistered.
	Registerer prometheus.Registerer
	// Logger gets component=ratelimit; nil discards.
	Logger *slog.Logger
	// Now is the clock of decisions; nil means time.Now.
	Now func() time.Time
	// Observer, if set, sees every decided descriptor (the web console).
	Observer Observer
}

// Validate reports every invalid field.
func (c ServiceConfig) Validate() error {
	var errs []error
	if c.Store == nil {
		errs = append(errs, errors.New("store is required"))
	}
	if c.FailureMode > FailClosed {
		errs = append(errs, fmt.Errorf("failure mode %d unknown", c.FailureMode))
	}
	if !(c.NearLimitRatio >= 0 && c.NearLimitRatio <= 1) {
		errs = append(errs, fmt.Errorf("near limit ratio %v not in [0, 1]", c.NearLimitRatio))
	}
	if c.Criticality.Shares != (Shares{}) {
		if err := c.Criticality.Shares.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("criticality shares: %w", err))
		}
	}
	for name, v := range map[string]int{"max descriptors": c.MaxDescriptors, "max entries": c.MaxEntries,
		"max value bytes": c.MaxValueBytes, "max metric keys": c.MaxMetricKeys} {
		if v < 0 {
			errs = append(errs, fmt.Errorf("%s %d is negative", name, v))
		}
	}
	if c.ErrorLogInterval < 0 {
		errs = append(errs, fmt.Errorf("error log interval %v is negative", c.ErrorLogInterval))
	}
	if len(errs) > 0 {
		return fmt.Errorf("ratelimit: invalid service config: %w", errors.Join(errs...))
	}
	return nil
}

// withDefaults fills the zero fields.
func (c ServiceConfig) withDefaults() ServiceConfig {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.MaxDescriptors, DefaultMaxDescriptors)
	def(&c.MaxEntries, DefaultMaxEntries)
	def(&c.MaxValueBytes, DefaultMaxValueBytes)
	def(&c.MaxMetricKeys, DefaultMaxMetricKeys)
	def(&c.OverLimitKeys, DefaultOverLimitKeys)
	if c.NearLimitRatio == 0 {
		c.NearLimitRatio = DefaultNearLimitRatio
	}
	if c.Criticality.Key == "" {
		c.Criticality.Key = DefaultCriticalityKey
	}
	if c.Criticality.Shares == (Shares{}) {
		c.Criticality.Shares = DefaultShares
	}
	if c.ErrorLogInterval == 0 {
		c.ErrorLogInterval = DefaultErrorLogInterval
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Service is the RLS v3 service: it matches descriptors against the
// current Config, asks the Store, and answers. Safe for concurrent use.
type Service struct {
	rlsv3.UnimplementedRateLimitServiceServer

	cfg       ServiceConfig
	config    atomic.Pointer[Config]
	admission *Admission // of rules without criticality settings: shares when enabled, else nil
	shares    *Admission // CriticalityConfig.Shares: rules with `criticality: true`
	demand    *demand    // per-class demand, for the adaptive reserve; nil when off
	cache     *overLimitCache
	m         *metrics
	log       *slog.Logger
	errLog    logLimiter
	unknown   *unknownDomains // ratelimit_unknown_domain_total
}

// NewService returns a service over cfg.Store; its metrics are
// registered on cfg.Registerer.
func NewService(cfg ServiceConfig) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	s := &Service{cfg: cfg, log: cfg.Logger.With("component", "ratelimit"),
		errLog: logLimiter{every: cfg.ErrorLogInterval}}
	if !cfg.Criticality.StaticOnly {
		s.demand = newDemand(DefaultDemandKeys)
	}
	m, err := newMetrics(cfg.Registerer, cfg.MaxMetricKeys, func() float64 {
		if s.demand == nil {
			return 0
		}
		return float64(s.demand.size.Load())
	})
	if err != nil {
		return nil, err
	}
	s.m = m
	if s.unknown, err = newUnknownDomains(cfg.Registerer); err != nil {
		return nil, fmt.Errorf("ratelimit: registering metrics: %w", err)
	}
	if c, ok := cfg.Store.(prometheus.Collector); ok {
		if err := metricreg.Register(cfg.Registerer, c); err != nil {
			return nil, fmt.Errorf("ratelimit: registering store metrics: %w", err)
		}
	}
	s.shares = &Admission{Shares: cfg.Criticality.Shares}
	if cfg.Criticality.Enabled {
		s.admission = s.shares
	}
	if cfg.OverLimitKeys > 0 {
		s.cache = newOverLimitCache(cfg.OverLimitKeys)
	}
	s.SetConfig(cfg.Config)
	return s, nil
}

// Config returns the configuration in use (never nil).
func (s *Service) Config() *Config { return s.config.Load() }

// SetConfig swaps in c (nil: no domains) atomically; requests in flight
// finish with the previous one. The local over-limit cache is cleared.
func (s *Service) SetConfig(c *Config) {
	if c == nil {
		c = &Config{}
	}
	s.config.Store(c)
	s.m.byRule.Clear()
	if s.cache != nil {
		s.cache.clear()
	}
}

// ShouldRateLimit implements envoy.service.ratelimit.v3.RateLimitService.
// Malformed requests get InvalidArgument; everything else an answer (a
// store failure is answered per the failure mode).
func (s *Service) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	start := time.Now()
	resp, err := s.shouldRateLimit(ctx, req)
	s.m.decision.Observe(time.Since(start).Seconds())
	if err == nil {
		s.checkDomain(ctx, req.Domain)
	}
	return resp, err
}

func (s *Service) shouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	if err := s.validate(req); err != nil {
		s.m.requests.invalid.Inc()
		return nil, err
	}
	now := s.cfg.Now()
	p := s.plan(s.config.Load(), req, now)
	if len(p.checks) > 0 {
		s.decide(ctx, now, p)
	}
	resp := s.respond(req.Domain, p)
	if resp.OverallCode == rlsv3.RateLimitResponse_OVER_LIMIT {
		s.m.requests.overLimit.Inc()
	} else {
		s.m.requests.ok.Inc()
	}
	return resp, nil
}

// decide asks the store for p's checks and records the results (or the
// failure) in p.
func (s *Service) decide(ctx context.Context, now time.Time, p *plan) {
	start := time.Now()
	res, err := s.cfg.Store.Decide(ctx, now, p.checks)
	s.m.storeLatency.Observe(time.Since(start).Seconds())
	var part *PartialError
	if errors.As(err, &part) && (len(part.Failed) != len(p.checks) || len(res) != len(p.checks)) {
		part = nil // malformed: the whole call failed
	}
	if err == nil && len(res) != len(p.checks) {
		err = fmt.Errorf("ratelimit: store returned %d results for %d checks", len(res), len(p.checks))
	}
	if err != nil {
		failed := len(p.checks)
		if part != nil {
			failed = 0
			for i, f := range part.Failed {
				if f {
					p.items[p.checkItem[i]].failed = true
					failed++
				}
			}
		}
		s.m.storeErrors.Inc()
		s.m.failureMode.WithLabelValues(s.cfg.FailureMode.String()).Add(float64(failed))
		if ok, suppressed := s.errLog.allow(time.Now()); ok {
			s.log.Error("rate-limit store failed; answering per failure mode",
				"failure_mode", s.cfg.FailureMode.String(), "checks", failed,
				"errors_not_logged", suppressed, "error", err)
		}
		if part == nil {
			p.failed = true
			return
		}
	}
	t := now.UnixNano()
	for i, r := range res {
		it := &p.items[p.checkItem[i]]
		if it.failed {
			continue
		}
		it.res = r
		if s.cache != nil && r.Exhausted > 0 {
			s.cache.put(p.checks[i].Key, p.checks[i].Limit, t+int64(r.Exhausted), t)
		}
		if it.tracked {
			var admitted uint32
			if r.Allowed {
				admitted = it.hits
			}
			s.demand.observe(p.checks[i].Key, p.checks[i].Limit, admitted, r.Used, t)
		}
	}
}
