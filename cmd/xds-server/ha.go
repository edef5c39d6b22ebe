package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/hashicorp/consul/api"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/xds-server/xds-server/config"
	"github.com/xds-server/xds-server/drain"
	"github.com/xds-server/xds-server/ha"
	"github.com/xds-server/xds-server/weights"
)

// haParts are the HA pieces wired into serve (ha.enabled): the drain
// store in Consul KV and /debug/ha.
type haParts struct {
	drains  drain.Store       // nil when HA is off: drains in memory
	weights *ha.Weights       // nil when HA is off
	alive   *aliveCheck       // the replica's TTL check in the leader session; nil when HA is off
	wcfg    *weights.HAConfig // the pipeline's side of it; nil when HA is off
	debug   func(*http.ServeMux)
}

// newHA builds the HA parts of cfg; with ha.enabled false it returns the
// in-memory defaults (no store, no page). It registers the alive check;
// cl deregisters it unless start ran it.
func newHA(cfg config.Config, consul func() (*api.Client, error), log *slog.Logger, reg prometheus.Registerer, cl *closers) (haParts, error) {
	if !cfg.HA.Enabled {
		return haParts{debug: func(*http.ServeMux) {}}, nil
	}
	hc := cfg.HAConfig()
	if err := hc.Validate(); err != nil {
		return haParts{}, err
	}
	hc.Replica = ha.NewReplicaID()
	client, err := consul()
	if err != nil {
		return haParts{}, fmt.Errorf("ha: consul client: %w", err)
	}
	m, err := ha.NewMetrics(reg)
	if err != nil {
		return haParts{}, err
	}
	hlog := log.With("component", "ha")
	store, err := ha.NewDrainStore(ha.DrainStoreConfig{Client: client, Layout: ha.Layout{Prefix: hc.Prefix}, Metrics: m, Logger: hlog})
	if err != nil {
		return haParts{}, err
	}
	alive, err := ha.NewAlive(ha.AliveConfig{Client: client, Replica: hc.Replica, TTL: hc.AliveTTL, Logger: hlog,
		CountError: func(op string) { m.Errors.WithLabelValues(op).Inc() }})
	if err != nil {
		return haParts{}, err
	}
	check := &aliveCheck{Alive: alive}
	cl.push(check.release)
	if err := alive.Register(); err != nil { // Run registers it again once Consul answers
		m.Errors.WithLabelValues("alive").Inc()
		hlog.Warn("alive check not registered; the weights lead waits for it", "error", err)
	}
	hw, err := ha.NewWeights(ha.WeightsConfig{Client: client, Prefix: hc.Prefix, Replica: hc.Replica,
		PublishInterval: hc.PublishInterval, LockDelay: hc.LeaderLockDelay, SessionChecks: []string{alive.CheckID()},
		CountWrite: func(kind string) { m.Writes.WithLabelValues(kind).Inc() },
		CountError: func(op string) { m.Errors.WithLabelValues(op).Inc() },
		Logger:     hlog, Leader: m.Leader, SummaryAge: m.SummaryAge})
	if err != nil {
		return haParts{}, fmt.Errorf("serve: %w", err)
	}
	page := ha.DebugConfig{Replica: hc.Replica, Prefix: hc.Prefix, Drains: store.Seen,
		Leader: func() string { return hw.Status().Leader }, Summaries: hw.DebugSummaries}
	hlog.Info("high availability on: drains and weights shared through consul KV", "replica", hc.Replica, "prefix", hc.Prefix)
	return haParts{drains: store, weights: hw, wcfg: hw.PipelineHA(), alive: check,
		debug: func(mux *http.ServeMux) { mux.Handle("GET /debug/ha", page.Handler()) }}, nil
}

// start runs the weights exchange and the alive check under l (with HA).
// The alive check outlives the leader session: deregistering it first
// would invalidate the session, and Consul would hold the lead for the
// lock delay after a clean stop. So it stops when the exchange has.
func (h haParts) start(l *lifecycle) {
	if h.weights == nil {
		return
	}
	h.alive.running = true
	aliveCtx, stopAlive := context.WithCancel(context.Background())
	l.loopOn(aliveCtx, h.alive.Run) // deregisters its check on the way out
	l.loop(func(ctx context.Context) { h.weights.Run(ctx); stopAlive() })
}

// aliveCheck is the replica's alive check, registered by newHA: Run keeps
// it passing, then deregisters it.
type aliveCheck struct {
	*ha.Alive
	running bool // start runs it: Run deregisters it
}

// release deregisters the check unless it runs (a later step of wiring
// failed): Run with its context done deregisters it at once.
func (c *aliveCheck) release() {
	if c.running {
		return
	}
	done, cancel := context.WithCancel(context.Background())
	cancel()
	c.Run(done)
}
