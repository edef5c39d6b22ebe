package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"

	"github.com/hashicorp/consul/api"
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
	"github.com/xds-server/xds-server/policy"
	"github.com/xds-server/xds-server/weights"
	"github.com/xds-server/xds-server/xds"
)

// app is the server's components, wired by wire, started by start.
type app struct {
	cfg config.Config
	log *slog.Logger
	reg *prometheus.Registry
	lm  *netlimit.Metrics
	dm  *discovery.Metrics
	sec security
	// consul is the one Consul client of ha and the index table (made on
	// first use, from discovery.consul's address, token and TLS).
	consul func() (*api.Client, error)

	src      discovery.Source
	srv      *xds.Server
	xdsLis   *netlimit.Listener
	adminLis *netlimit.Listener
	ha       haParts
	ws       *weights.Pipeline
	fan      *fanOut
	drains   *drain.Manager
	guard    *discovery.Guard
	pol      *policy.Watcher // nil: config entries not read
	rlStats  *console.Stats
	rl       *rateLimit
	ui       *console.Console
	admin    *http.Server
	gc       *pushCollector // nil: runtime.gc_between_pushes off
	mem      *memReleaser   // nil: runtime.release_free_memory off
}

// wire builds the components of cfg in order; what a step acquires goes
// on cl, so that a failed step leaves nothing held once cl is closed.
func wire(ctx context.Context, cfg config.Config, log *slog.Logger, cl *closers) (*app, error) {
	a := &app{cfg: cfg, log: log, reg: newRegistry(), fan: &fanOut{}}
	a.consul = sync.OnceValues(cfg.ConsulSource().ConsulClient)
	a.lm, a.dm = netlimit.NewMetrics(a.reg), discovery.NewMetrics(a.reg)
	for _, step := range []func(context.Context, *closers) error{
		a.wireXDS, a.wireListeners, a.wireHA, a.wireSnapshots, a.wirePolicy, a.wireRateLimit, a.wireAdmin,
	} {
		if err := step(ctx, cl); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// wireXDS builds the discovery source and the xDS server, with its client
// index table in Consul KV under subsetting.index_source consul.
func (a *app) wireXDS(ctx context.Context, cl *closers) error {
	src, err := newSource(a.cfg, a.log, a.dm, a.sourceRead)
	if err != nil {
		return err
	}
	a.src, a.sec = src, newSecurity(a.reg, a.log)
	xc := a.cfg.ServerConfig()
	xc.Logger, xc.Registerer, xc.OnSubsets = a.log, a.reg, a.fan.subsets
	if a.cfg.Runtime.GCBetweenPushes {
		a.gc = newPushCollector(a.reg)
		xc.Passes = a.gc
	}
	if a.cfg.Runtime.ReleaseFreeMemory {
		a.mem = newMemReleaser(a.reg)
	}
	if tc, err := a.sec.serverTLS("xds", a.cfg.XDS.TLS); err != nil {
		return err
	} else if tc != nil {
		xc.Credentials = credentials.NewTLS(tc)
	}
	if a.cfg.Subsetting.IndexSource == xds.IndexConsul {
		table, err := newConsulIndex(ctx, a.cfg, a.consul, a.log, a.reg)
		if err != nil {
			return err
		}
		cl.push(func() { _ = table.Close() })
		xc.Subsetting.Table = table
	}
	a.srv, err = xds.New(xc)
	return err
}

// wireListeners opens the xDS and admin listeners.
func (a *app) wireListeners(_ context.Context, cl *closers) error {
	var err error
	if a.xdsLis, err = listen(cl, "xds", a.cfg.XDS.Address, a.cfg.XDS.MaxConnections, a.lm); err != nil {
		return err
	}
	if a.adminLis, err = listen(cl, "admin", a.cfg.Admin.Address, a.cfg.Admin.MaxConnections, a.lm); err != nil {
		return err
	}
	a.adminLis.ShedIdle() // a full admin cap sheds its idlest connection: /healthz stays answerable
	return nil
}

// wireHA builds the HA parts (ha.enabled), registering the alive check.
func (a *app) wireHA(_ context.Context, cl *closers) (err error) {
	a.ha, err = newHA(a.cfg, a.consul, a.log, a.reg, cl)
	return err
}

// wireSnapshots builds the weights pipeline, the drain overlay and the
// removal guard, joined by the snapshot fan-out; the drains subscribe to
// the pipeline's lame-duck transitions.
func (a *app) wireSnapshots(context.Context, *closers) error {
	a.fan.changes, a.fan.xds = discovery.NewChangeLog(a.log, a.cfg.Discovery.Source), a.srv
	wc := a.cfg.WeightsPipeline()
	wc.Publisher, wc.GRPC, wc.Logger, wc.Registerer, wc.HA = spillPublisher{a.srv}, a.srv.GRPC(), a.log, a.reg, a.ha.wcfg
	wc.LameDuckMetric = a.cfg.Drain.ORCAMetric
	var err error
	if a.ws, err = weights.NewPipeline(wc); err != nil {
		return err
	}
	a.fan.weights = a.ws
	a.drains, err = drain.New(drain.Config{Policy: a.cfg.Drainer(), Registerer: a.reg, Store: a.ha.drains, Logger: a.log, Emit: a.fan.Observe})
	if err != nil {
		return err
	}
	a.ws.SubscribeLameDuck(a.drains.SetORCA) // drain.orca_metric: ORCA reports' lame-duck transitions
	gc := a.cfg.RemovalGuard()
	gc.Emit, gc.Logger, gc.Metrics = a.drains.Observe, a.log, a.dm
	a.guard, err = discovery.NewGuard(gc) // before the drain overlay: held removals start no drain windows
	return err
}

// wireRateLimit builds the rate-limit service and opens its listener.
func (a *app) wireRateLimit(_ context.Context, cl *closers) error {
	var err error
	if a.rlStats, err = console.NewStats(a.reg); err != nil {
		return err
	}
	a.rl, err = newRateLimit(cl, a.cfg.RateLimit.RateLimitConfig, a.log, a.reg, a.sec, a.lm, a.rlStats)
	return err
}

// wireAdmin builds the web console and the admin server.
func (a *app) wireAdmin(context.Context, *closers) error {
	uc := a.cfg.ConsoleConfig()
	uc.Fleet, uc.Weights, uc.Drains, uc.Rules, uc.Gatherer, uc.Stats = a.srv, a.ws, a.drains, a.rl.svc, a.reg, a.rlStats
	uc.TokenRequired, uc.Registerer, uc.Logger = a.cfg.Admin.TokenFile != "", a.reg, a.log
	if a.pol != nil {
		uc.Policies = a.pol
	}
	var err error
	if a.ui, err = console.New(uc); err != nil {
		return err
	}
	a.fan.console = a.ui
	h := adminHandler(a.srv, a.reg, a.ws.Handlers, a.drainAPI, a.ui.Handlers)
	if a.admin, err = newAdminServer(a.cfg.Admin, a.sec, h, a.reg); err != nil {
		return err
	}
	a.admin.ConnState = a.adminLis.ConnState
	return nil
}

// drainAPI adds the drain and rate-limit APIs and /debug/ha to the admin
// mux.
func (a *app) drainAPI(mux *http.ServeMux) {
	mux.Handle("/v1/drain", a.drains.Handler())
	mux.Handle("/v1/ratelimit", a.rl.svc.HTTPHandler())
	mux.Handle("/json", a.rl.svc.HTTPHandler()) // envoyproxy/ratelimit's path
	a.ha.debug(mux)
}

// listen opens a TCP listener named name (its metrics' label) holding at
// most max connections (0: no cap); cl closes it.
func listen(cl *closers, name, addr string, max uint32, m *netlimit.Metrics) (*netlimit.Listener, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s listener: %w", name, err)
	}
	cl.push(func() { _ = l.Close() })
	return netlimit.Limit(l, name, int(max), m), nil
}

// newRegistry is the process's metrics registry, with the Go runtime and
// process collectors.
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

func newSource(cfg config.Config, log *slog.Logger, m *discovery.Metrics, onRead func(discovery.Read)) (discovery.Source, error) {
	switch cfg.Discovery.Source {
	case "consul":
		cc := cfg.ConsulSource()
		cc.Logger, cc.Metrics, cc.OnRead = log, m, onRead
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

// sourceRead hands the read of each Consul change to the xDS server, for
// its stage metrics (xds_change_stage_seconds{stage="discovery"}).
func (a *app) sourceRead(r discovery.Read) {
	if a.srv != nil {
		a.srv.SourceRead(xds.SourceRead{At: r.At, Emitted: r.Emitted, IndexFrom: r.IndexFrom, IndexTo: r.IndexTo})
	}
}

// newConsulIndex opens the client index table in Consul KV, with the
// Consul address, token and datacenter of discovery.consul.
func newConsulIndex(ctx context.Context, cfg config.Config, consul func() (*api.Client, error), log *slog.Logger, reg prometheus.Registerer) (*nodeindex.Consul, error) {
	client, err := consul()
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
