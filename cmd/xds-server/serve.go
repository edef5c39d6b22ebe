package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"google.golang.org/grpc/credentials"

	"github.com/xds-server/xds-server/config"
	"github.com/xds-server/xds-server/console"
	"github.com/xds-server/xds-server/discovery"
	"github.com/xds-server/xds-server/drain"
	"github.com/xds-server/xds-server/examples"
	"github.com/xds-server/xds-server/netlimit"
	"github.com/xds-server/xds-server/nodeindex"
	"github.com/xds-server/xds-server/weights"
	"github.com/xds-server/xds-server/xds"
)

// serve runs the server until SIGTERM or SIGINT, then shuts down gracefully.
func serve(cfg config.Config, logOut io.Writer) error {
	log := newLogger(cfg.Log, logOut)
	slog.SetDefault(log)
	setHeapFloor(cfg.Runtime.HeapFloorMiB)
	setMemoryLimit(cfg.Runtime.MemoryLimitMiB)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	cfg = fitConnectionCaps(cfg, log)
	reg := newRegistry()
	lm := netlimit.NewMetrics(reg)
	dm := discovery.NewMetrics(reg)
	src, err := newSource(cfg, log, dm)
	if err != nil {
		return err
	}
	sec := newSecurity(reg, log)
	xc := cfg.ServerConfig()
	xc.Logger, xc.Registerer = log, reg
	if tc, err := sec.serverTLS("xds", cfg.XDS.TLS); err != nil {
		return err
	} else if tc != nil {
		xc.Credentials = credentials.NewTLS(tc)
	}
	if cfg.Subsetting.IndexSource == xds.IndexConsul {
		table, err := newConsulIndex(ctx, cfg, log, reg)
		if err != nil {
			return err
		}
		defer table.Close()
		xc.Subsetting.Table = table
	}
	srv, err := xds.New(xc)
	if err != nil {
		return err
	}
	xdsLis, err := listen("xds", cfg.XDS.Address, cfg.XDS.MaxConnections, lm)
	if err != nil {
		return err
	}
	adminLis, err := listen("admin", cfg.Admin.Address, cfg.Admin.MaxConnections, lm)
	if err != nil {
		xdsLis.Close()
		return err
	}
	adminLis.ShedIdle() // a full admin cap sheds its idlest connection: /healthz stays answerable
	hap, err := newHA(cfg, log, reg)
	if err != nil {
		xdsLis.Close()
		adminLis.Close()
		return err
	}
	var drains *drain.Manager // the ORCA sink's target, set below before any report can arrive
	var ui *console.Console   // sees the served snapshots; set below before discovery starts
	wc := cfg.WeightsPipeline()
	wc.Publisher, wc.GRPC, wc.Logger, wc.Registerer, wc.HA = srv, srv.GRPC(), log, reg, hap.wcfg
	if m := cfg.Drain.ORCAMetric; m != "" {
		wc.ORCASink = func(r weights.Report) { drains.SetORCA(r.Service, r.Endpoint, r.Named[m] >= 1) }
	}
	ws, err := weights.NewPipeline(wc)
	if err != nil {
		xdsLis.Close()
		adminLis.Close()
		return err
	}
	changes := discovery.NewChangeLog(log, cfg.Discovery.Source) // health and drain transitions, per service per update
	drains, err = drain.New(drain.Config{Policy: cfg.Drainer(), Registerer: reg, Store: hap.drains, Logger: log,
		Emit: func(snap discovery.Snapshot) {
			changes.Observe(snap)
			ws.Observe(snap)
			srv.Update(snap)
			ui.Observe(snap)
		}})
	if err != nil {
		xdsLis.Close()
		adminLis.Close()
		return err
	}
	gc := cfg.RemovalGuard()
	gc.Emit, gc.Logger, gc.Metrics = drains.Observe, log, dm
	guard, err := discovery.NewGuard(gc) // before the drain overlay: held removals start no drain windows
	if err != nil {
		xdsLis.Close()
		adminLis.Close()
		return err
	}
	rlStats, err := console.NewStats(reg)
	if err != nil {
		xdsLis.Close()
		adminLis.Close()
		return err
	}
	rl, err := newRateLimit(cfg.RateLimit.RateLimitConfig, log, reg, sec, lm, rlStats)
	if err != nil {
		xdsLis.Close()
		adminLis.Close()
		return err
	}
	drainAPI := func(mux *http.ServeMux) {
		mux.Handle("/v1/drain", drains.Handler())
		mux.Handle("/v1/ratelimit", rl.svc.HTTPHandler())
		mux.Handle("/json", rl.svc.HTTPHandler()) // envoyproxy/ratelimit's path
		hap.debug(mux)
	}
	uc := cfg.ConsoleConfig()
	uc.Fleet, uc.Weights, uc.Drains, uc.Rules, uc.Gatherer, uc.Stats = srv, ws, drains, rl.svc, reg, rlStats
	uc.TokenRequired, uc.Registerer, uc.Logger = cfg.Admin.TokenFile != "", reg, log
	ui, err = console.New(uc)
	if err != nil {
		xdsLis.Close()
		adminLis.Close()
		rl.lis.Close()
		rl.closeStore()
		return err
	}
	admin, err := newAdminServer(cfg.Admin, sec, adminHandler(srv, reg, ws.Handlers, drainAPI, ui.Handlers), reg)
	if err != nil {
		xdsLis.Close()
		adminLis.Close()
		rl.lis.Close()
		rl.closeStore()
		return err
	}
	admin.ConnState = adminLis.ConnState

	bg, cancelBG := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	errc := make(chan error, 4)
	wg.Go(func() { srv.Run(bg) })
	wg.Go(func() { ws.Run(bg) })
	if hap.weights != nil {
		// The alive check outlives the leader session: deregistering it
		// first would invalidate the session, and Consul would hold the
		// lead for the lock delay after a clean stop.
		aliveCtx, stopAlive := context.WithCancel(context.Background())
		wg.Go(func() { hap.alive.Run(aliveCtx) }) // deregisters its check on the way out
		wg.Go(func() { hap.weights.Run(bg); stopAlive() })
	}
	wg.Go(func() { drains.Run(bg) })
	wg.Go(func() { ui.Run(bg) })
	wg.Go(func() { drains.Watch(bg) }) // a no-op without HA
	wg.Go(func() {
		if err := src.Run(bg, guard.Observe); err != nil {
			errc <- fmt.Errorf("discovery: %w", err)
		}
	})
	go func() { errc <- srv.Serve(xdsLis) }()
	rl.run(bg, errc)
	go func() {
		if err := serveAdmin(admin, adminLis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errc <- fmt.Errorf("admin: %w", err)
		}
	}()
	log.Info("xds-server started", "xds_address", xdsLis.Addr().String(), "admin_address", adminLis.Addr().String(),
		"console", consoleURL(adminLis.Addr(), cfg.Admin.TLS.Enabled()),
		"discovery", cfg.Discovery.Source, "ratelimit_address", rl.lis.Addr().String(),
		"xds_tls", cfg.XDS.TLS.Enabled(), "ratelimit_tls", cfg.RateLimit.TLS.Enabled(), "admin_tls", cfg.Admin.TLS.Enabled(),
		"admin_token", cfg.Admin.TokenFile != "", "xds_authorization_rules", len(cfg.XDS.Authorization.Rules),
		"listeners", len(cfg.Listeners), "service_settings", len(cfg.Services),
		"ratelimit_domains", len(rl.svc.Config().Domains()), "ratelimit_rules", len(rl.svc.Config().Rules()))

	var runErr error
	select {
	case <-ctx.Done():
		log.Info("shutting down: refusing new streams, serving the open ones", "grace", cfg.XDS.ShutdownGrace, "timeout", cfg.XDS.ShutdownTimeout)
		srv.StopAccepting()
		waitGrace(cfg.XDS.ShutdownGrace, errc)
	case runErr = <-errc:
		log.Error("fatal error; shutting down", "error", runErr)
	}
	sctx, cancel := context.WithTimeout(context.Background(), cfg.XDS.ShutdownTimeout)
	defer cancel()
	ws.StopLRS() // LRS streams would hold the graceful stop until its deadline
	srv.Shutdown(sctx)
	rl.stop(sctx)
	_ = admin.Shutdown(sctx)
	guard.Close()
	drains.Close()
	cancelBG()
	wg.Wait()
	log.Info("stopped")
	return runErr
}

// listen opens a TCP listener named name (its metrics' label) holding at
// most max connections (0: no cap).
func listen(name, addr string, max uint32, m *netlimit.Metrics) (*netlimit.Listener, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s listener: %w", name, err)
	}
	return netlimit.Limit(l, name, int(max), m), nil
}

// waitGrace waits out the shutdown grace period, during which the open
// xDS streams are still served and updated; a fatal error ends it early.
func waitGrace(grace time.Duration, errc <-chan error) {
	if grace <= 0 {
		return
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-t.C:
	case <-errc:
	}
}

// newRegistry is the process's metrics registry, with the Go runtime and
// process collectors.
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

func newSource(cfg config.Config, log *slog.Logger, m *discovery.Metrics) (discovery.Source, error) {
	switch cfg.Discovery.Source {
	case "consul":
		cc := cfg.ConsulSource()
		cc.Logger, cc.Metrics = log, m
		return discovery.NewConsul(cc)
	default:
		sc := discovery.StaticConfig{
			File: cfg.Discovery.Static.File, PollInterval: cfg.Discovery.Static.PollInterval,
			Logger: log, Metrics: m,
		}
		if sc.File == config.DefaultStaticFile {
			if _, err := os.Stat(sc.File); errors.Is(err, os.ErrNotExist) {
				log.Info("default static file not found; serving the built-in example", "file", sc.File)
				sc.File, sc.Embedded = "", examples.Endpoints
			}
		}
		return discovery.NewStatic(sc)
	}
}

// newConsulIndex opens the client index table in Consul KV, with the
// Consul address, token and datacenter of discovery.consul.
func newConsulIndex(ctx context.Context, cfg config.Config, log *slog.Logger, reg prometheus.Registerer) (*nodeindex.Consul, error) {
	client, err := cfg.ConsulSource().ConsulClient()
	if err != nil {
		return nil, fmt.Errorf("subsetting: consul client: %w", err)
	}
	table, err := nodeindex.NewConsul(ctx, nodeindex.ConsulConfig{
		Client: client, Prefix: cfg.Subsetting.Consul.Prefix, TTL: cfg.Subsetting.IndexTTL,
		Logger: log.With("component", "xds.index"), Registerer: reg,
	})
	if err != nil {
		return nil, fmt.Errorf("subsetting: %w", err)
	}
	return table, nil
}
