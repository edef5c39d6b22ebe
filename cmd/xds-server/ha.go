package main

import (
	"fmt"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/xds-server/xds-server/config"
	"github.com/xds-server/xds-server/drain"
	"github.com/xds-server/xds-server/ha"
)

// haParts are the HA pieces wired into serve (ha.enabled): the drain
// store in Consul KV and /debug/ha.
type haParts struct {
	drains drain.Store // nil when HA is off: drains in memory
	debug  func(*http.ServeMux)
}

// newHA builds the HA parts of cfg; with ha.enabled false it returns the
// in-memory defaults (no store, no page).
func newHA(cfg config.Config, log *slog.Logger, reg prometheus.Registerer) (haParts, error) {
	if !cfg.HA.Enabled {
		return haParts{debug: func(*http.ServeMux) {}}, nil
	}
	hc := cfg.HAConfig()
	if err := hc.Validate(); err != nil {
		return haParts{}, err
	}
	hc.Replica = ha.NewReplicaID()
	client, err := cfg.ConsulSource().ConsulClient()
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
	page := ha.DebugConfig{Replica: hc.Replica, Prefix: hc.Prefix, Drains: store.Seen}
	hlog.Info("high availability on: drains shared through consul KV", "replica", hc.Replica, "prefix", hc.Prefix)
	return haParts{drains: store, debug: func(mux *http.ServeMux) { mux.Handle("GET /debug/ha", page.Handler()) }}, nil
}
