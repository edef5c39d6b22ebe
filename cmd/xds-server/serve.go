package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os/signal"
	"syscall"

	"github.com/xds-server/xds-server/config"
)

// serve runs the server until SIGTERM or SIGINT, then shuts down gracefully.
func serve(cfg config.Config, logOut io.Writer) error {
	log := newLogger(cfg.Log, logOut)
	slog.SetDefault(log)
	setHeapFloor(cfg.Runtime.HeapFloorMiB)
	setMemoryLimit(cfg.Runtime.MemoryLimitMiB)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	var cl closers
	defer cl.close() // on every path: what wiring acquired (the client index table last)
	a, err := wire(ctx, fitConnectionCaps(cfg, log), log, &cl)
	if err != nil {
		return err
	}
	l := newLifecycle()
	a.start(l)
	a.logStarted()
	runErr := a.await(ctx, l.failed)
	l.shutdown(a.cfg.XDS.ShutdownTimeout)
	log.Info("stopped")
	return runErr
}

// start starts the components under l. The shutdown stops them in
// reverse order: the xDS server (its LRS streams first), the rate-limit
// service, the admin server, the removal guard, the drain overlay, then
// the background loops together (the HA alive check last of all).
func (a *app) start(l *lifecycle) {
	l.loop(a.srv.Run)
	l.loop(a.ws.Run)
	if a.gc != nil {
		l.loop(a.gc.run)
	}
	if a.mem != nil {
		l.loop(a.mem.run)
	}
	a.ha.start(l)
	l.loop(a.ui.Run)
	l.loop(a.drains.Watch) // a no-op without HA
	a.startPolicy(l)
	l.run(func(ctx context.Context) error {
		if err := a.src.Run(ctx, a.guard.Observe); err != nil {
			return fmt.Errorf("discovery: %w", err)
		}
		return nil
	})
	l.onStop(func(context.Context) { a.drains.Close() })
	l.onStop(func(context.Context) { a.guard.Close() })
	l.serve(func() error {
		if err := serveAdmin(a.admin, a.adminLis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("admin: %w", err)
		}
		return nil
	}, func(ctx context.Context) { _ = a.admin.Shutdown(ctx) })
	a.rl.start(l)
	l.serve(func() error { return a.srv.Serve(a.xdsLis) }, func(ctx context.Context) {
		a.ws.StopLRS() // LRS streams would hold the graceful stop until its deadline
		a.srv.Shutdown(ctx)
	})
}

// await waits for a signal (ctx done) or the first fatal error. On a
// signal the xDS server refuses new streams and serves the open ones for
// the grace period (a fatal error ends it early); await returns nil then,
// else the fatal error.
func (a *app) await(ctx, failed context.Context) error {
	select {
	case <-ctx.Done():
		a.log.Info("shutting down: refusing new streams, serving the open ones", "grace", a.cfg.XDS.ShutdownGrace, "timeout", a.cfg.XDS.ShutdownTimeout)
		a.srv.StopAccepting()
		waitGrace(a.cfg.XDS.ShutdownGrace, failed.Done())
		return nil
	case <-failed.Done():
		err := context.Cause(failed)
		a.log.Error("fatal error; shutting down", "error", err)
		return err
	}
}

// logStarted logs the start-up line (e2e/harness reads the addresses
// from it).
func (a *app) logStarted() {
	cfg := a.cfg
	a.log.Info("xds-server started", "xds_address", a.xdsLis.Addr().String(), "admin_address", a.adminLis.Addr().String(),
		"console", consoleURL(a.adminLis.Addr(), cfg.Admin.TLS.Enabled()),
		"discovery", cfg.Discovery.Source, "ratelimit_address", a.rl.lis.Addr().String(),
		"xds_tls", cfg.XDS.TLS.Enabled(), "ratelimit_tls", cfg.RateLimit.TLS.Enabled(), "admin_tls", cfg.Admin.TLS.Enabled(),
		"admin_token", cfg.Admin.TokenFile != "", "xds_authorization_rules", len(cfg.XDS.Authorization.Rules),
		"listeners", len(cfg.Listeners), "service_settings", len(cfg.Services),
		"ratelimit_domains", len(a.rl.svc.Config().Domains()), "ratelimit_rules", len(a.rl.svc.Config().Rules()))
}
