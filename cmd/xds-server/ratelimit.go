package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/xds-server/xds-server/config"
	"github.com/xds-server/xds-server/h2rpc"
	"github.com/xds-server/xds-server/netlimit"
	"github.com/xds-server/xds-server/ratelimit"
)

// rateLimit is the running rate-limit service and its listener.
type rateLimit struct {
	svc  *ratelimit.Service
	grpc *grpc.Server  // ratelimit.server grpc; else nil
	lean *h2rpc.Server // ratelimit.server lean; else nil
	lis  net.Listener
	cfg  config.RateLimitConfig

	closeStore func()
}

// newRateLimit builds the rate-limit service of cfg and opens its
// listener; cl closes both.
func newRateLimit(cl *closers, cfg config.RateLimitConfig, log *slog.Logger, reg prometheus.Registerer, sec security, lm *netlimit.Metrics, obs ratelimit.Observer) (*rateLimit, error) {
	mode, err := ratelimit.ParseFailureMode(cfg.FailureMode)
	if err != nil {
		return nil, err
	}
	var rules *ratelimit.Config
	if cfg.Config != "" {
		if rules, err = cfg.LoadOptions().LoadPath(cfg.Config); err != nil {
			return nil, err
		}
	}
	store, closeStore, err := newStore(cfg, log)
	if err != nil {
		return nil, err
	}
	closeStore = sync.OnceFunc(closeStore) // by stop, and by cl
	cl.push(closeStore)
	sc := cfg.Service()
	sc.Store, sc.Config, sc.FailureMode, sc.Registerer, sc.Logger, sc.Observer = store, rules, mode, reg, log, obs
	svc, err := ratelimit.NewService(sc)
	if err != nil {
		return nil, err
	}
	lis, err := listen(cl, "ratelimit", cfg.Address, cfg.MaxConnections, lm)
	if err != nil {
		return nil, err
	}
	r := &rateLimit{svc: svc, lis: lis, cfg: cfg, closeStore: closeStore}
	if cfg.Server == "lean" {
		r.lean, err = newLeanServer(cfg, svc, log, reg, sec)
	} else {
		r.grpc, err = newGRPCServer(cfg, svc, log, reg, sec)
	}
	if err != nil {
		return nil, err
	}
	return r, nil
}

// newGRPCServer is ratelimit.server grpc: grpc-go with the service
// registered.
func newGRPCServer(cfg config.RateLimitConfig, svc *ratelimit.Service, log *slog.Logger, reg prometheus.Registerer, sec security) (*grpc.Server, error) {
	opts, err := rateLimitSecurity(cfg, log, reg, sec)
	if err != nil {
		return nil, err
	}
	// Stream workers: handlers run on long-lived goroutines whose stacks are
	// already grown (a goroutine per call grows its stack every time).
	// Handlers wait on the store, so there are many. Fixed flow-control
	// windows turn off grpc-go's bandwidth estimation, whose pings (and
	// their acks, from every client) buy nothing for messages of a few
	// hundred bytes: about 2 µs of server CPU per decision less.
	opts = append(opts, grpc.ConnectionTimeout(10*time.Second)) // TLS and HTTP/2 preface, as the lean server's
	g := grpc.NewServer(append(append(opts, ratelimit.ServerOptions()...), grpc.NumStreamWorkers(128),
		grpc.InitialWindowSize(1<<20), grpc.InitialConnWindowSize(4<<20), grpc.MaxConcurrentStreams(cfg.MaxStreams))...)
	svc.Register(g)
	return g, nil
}

// rateLimitSecurity are the gRPC options of ratelimit.tls and
// ratelimit.authorization.identities.
func rateLimitSecurity(cfg config.RateLimitConfig, log *slog.Logger, reg prometheus.Registerer, sec security) ([]grpc.ServerOption, error) {
	tc, err := sec.serverTLS("ratelimit", cfg.TLS)
	if err != nil || tc == nil {
		return nil, err
	}
	opts := []grpc.ServerOption{grpc.Creds(credentials.NewTLS(tc))}
	if ids := cfg.Authorization.Identities; len(ids) > 0 {
		opts = append(opts, grpc.UnaryInterceptor(identityInterceptor(newIdentityCheck(ids, reg, log.With("component", "ratelimit")))))
	}
	return opts, nil
}

// newStore returns the store of cfg.Store and the function that closes
// it: with ratelimit.redis.per_second, a Split over the two Redis. An
// unreachable Redis is not an error: it is logged, decisions follow the
// failure mode until it answers.
func newStore(cfg config.RateLimitConfig, log *slog.Logger) (ratelimit.Store, func(), error) {
	if cfg.Store != "redis" {
		m, err := ratelimit.NewMemory(cfg.Memory.Store())
		if err != nil {
			return nil, nil, err
		}
		return m, m.Close, nil
	}
	rlog := log.With("component", "ratelimit")
	redis.SetLogger(redisLogger{rlog})
	// open returns the Redis store of sc, pinged once (name: main or
	// per_second, in the logs as in the metrics' store label).
	open := func(sc ratelimit.RedisConfig, name string) (*ratelimit.Redis, error) {
		r, err := ratelimit.NewRedis(sc)
		if err != nil {
			return nil, err
		}
		where := []any{"store", name, "mode", sc.Mode, "address", sc.Address, "addresses", sc.Addresses, "master_name", sc.MasterName}
		if err := r.Ping(context.Background()); err != nil {
			rlog.Warn("redis store not reachable yet; answering per failure mode until it is",
				append(where, "failure_mode", cfg.FailureMode, "error", err)...)
		} else {
			rlog.Info("redis store connected", append(where, "tls", sc.TLS)...)
		}
		return r, nil
	}
	r, err := open(cfg.Redis.Store(), "main")
	if err != nil {
		return nil, nil, err
	}
	psc, ok := cfg.Redis.PerSecondStore()
	if !ok {
		return r, func() { _ = r.Close() }, nil
	}
	ps, err := open(psc, "per_second")
	if err != nil {
		_ = r.Close()
		return nil, nil, err
	}
	return ratelimit.NewSplit(r, ps), func() { _ = r.Close(); _ = ps.Close() }, nil
}

// redisLogger sends go-redis's own messages (connection failures, already
// counted and logged by the service) to the debug level.
type redisLogger struct{ log *slog.Logger }

func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.DebugContext(ctx, "go-redis: "+fmt.Sprintf(format, v...))
}

// start serves the service under l, reloading the config files when
// they change until the background loops end; the shutdown calls stop.
func (r *rateLimit) start(l *lifecycle) {
	if r.cfg.Config != "" {
		l.loop(func(ctx context.Context) { _ = r.svc.Watch(ctx, r.cfg.ReloadInterval) })
	}
	l.serve(r.serve, r.stop)
}

// serve accepts connections on the listener until stop.
func (r *rateLimit) serve() error {
	var err error
	if r.lean != nil {
		err = r.lean.Serve(r.lis)
	} else {
		err = r.grpc.Serve(r.lis)
	}
	if err != nil && !errors.Is(err, h2rpc.ErrServerClosed) {
		return fmt.Errorf("ratelimit: %w", err)
	}
	return nil
}

// stop ends the rate-limit service gracefully until ctx is done.
func (r *rateLimit) stop(ctx context.Context) {
	if r.lean != nil {
		if err := r.lean.Shutdown(ctx); err != nil {
			_ = r.lean.Close()
		}
		r.closeStore()
		return
	}
	done := make(chan struct{})
	go func() { r.grpc.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		r.grpc.Stop()
	}
	r.closeStore()
}
