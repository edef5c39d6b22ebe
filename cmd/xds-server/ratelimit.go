package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	"google.golang.org/grpc"

	"github.com/xds-server/xds-server/ratelimit"
)

// RateLimitConfig configures the rate-limit service (the ratelimit:
// section).
type RateLimitConfig struct {
	Address        string        `mapstructure:"address"`         // host:port of the RLS gRPC listener
	Config         string        `mapstructure:"config"`          // envoyproxy/ratelimit YAML file or directory; "" = no domains
	FailureMode    string        `mapstructure:"failure_mode"`    // allow | deny, when the store fails
	Store          string        `mapstructure:"store"`           // memory
	Headers        bool          `mapstructure:"headers"`         // RateLimit-* response headers
	ReloadInterval time.Duration `mapstructure:"reload_interval"` // how often the config files are checked for changes
}

// validateRateLimit checks the ratelimit section, the config files included.
func (c Config) validateRateLimit(bad func(key, format string, args ...any)) {
	r := c.RateLimit
	checkAddr(bad, "ratelimit.address", r.Address)
	if _, err := ratelimit.ParseFailureMode(r.FailureMode); err != nil {
		bad("ratelimit.failure_mode", "%v", err)
	}
	switch r.Store {
	case "memory":
	case "redis":
		bad("ratelimit.store", "redis is not available yet; use memory")
	default:
		bad("ratelimit.store", "%q is not one of memory, redis", r.Store)
	}
	if r.ReloadInterval <= 0 {
		bad("ratelimit.reload_interval", "%v must be positive", r.ReloadInterval)
	}
	if r.Config != "" {
		if _, err := ratelimit.LoadPath(r.Config); err != nil {
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
}

func newRateLimit(cfg RateLimitConfig, log *slog.Logger, reg prometheus.Registerer) (*rateLimit, error) {
	mode, err := ratelimit.ParseFailureMode(cfg.FailureMode)
	if err != nil {
		return nil, err
	}
	store, err := ratelimit.NewMemory(ratelimit.MemoryConfig{})
	if err != nil {
		return nil, err
	}
	var rules *ratelimit.Config
	if cfg.Config != "" {
		if rules, err = ratelimit.LoadPath(cfg.Config); err != nil {
			return nil, err
		}
	}
	svc, err := ratelimit.NewService(ratelimit.ServiceConfig{Store: store, Config: rules, Path: cfg.Config,
		FailureMode: mode, Headers: cfg.Headers, Registerer: reg, Logger: log})
	if err != nil {
		return nil, err
	}
	lis, err := net.Listen("tcp", cfg.Address)
	if err != nil {
		return nil, fmt.Errorf("ratelimit listener: %w", err)
	}
	g := grpc.NewServer()
	svc.Register(g)
	return &rateLimit{svc: svc, grpc: g, lis: lis, cfg: cfg}, nil
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
}

// rateLimitCheck is `xds-server ratelimit check --config PATH`: it loads an
// envoyproxy/ratelimit config file or directory and reports every error.
func rateLimitCheck(args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("xds-server ratelimit check", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "envoyproxy/ratelimit YAML file, or a directory of them (one domain per file)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *path == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "usage: xds-server ratelimit check --config FILE_OR_DIR")
		return 2
	}
	cfg, err := ratelimit.LoadPath(*path)
	if err != nil {
		fmt.Fprintf(stderr, "xds-server: invalid rate-limit configuration:\n%s\n", indent(err))
		return 1
	}
	fmt.Fprintf(stdout, "rate-limit configuration is valid: %d domain(s), %d rule(s)\n", len(cfg.Domains()), len(cfg.Rules()))
	return 0
}
