package main

import (
	"log/slog"

	"github.com/xds-server/xds-server/config"
	"github.com/xds-server/xds-server/netlimit"
)

// The ceilings of the automatic connection caps (a <listener>.max_connections
// of 0): what each listener holds when the open-file limit has room.
const (
	xdsConnCeiling       = 20000
	rateLimitConnCeiling = 5000
	adminConnCeiling     = 512
)

// fitConnectionCaps raises the open-file limit to its hard limit and
// returns cfg with each automatic connection cap (0) set from it
// (netlimit.Fit: the listeners share what netlimit.Reserve leaves for
// Consul, Redis, ORCA streams and files). It warns only when the caps
// that were given explicitly do not fit.
func fitConnectionCaps(cfg config.Config, log *slog.Logger) config.Config {
	n, err := netlimit.RaiseFileLimit()
	if err != nil {
		log.Warn("could not raise the open file limit", "limit", n, "error", err)
	}
	return fitConnectionCapsTo(cfg, n, log)
}

// fitConnectionCapsTo is fitConnectionCaps for an open-file limit of n
// files (0: unknown).
func fitConnectionCapsTo(cfg config.Config, n uint64, log *slog.Logger) config.Config {
	caps := []*uint32{&cfg.XDS.MaxConnections, &cfg.RateLimit.MaxConnections, &cfg.Admin.MaxConnections}
	shares := []netlimit.Share{
		{Name: "xds", Max: int(cfg.XDS.MaxConnections)}, {Name: "ratelimit", Max: int(cfg.RateLimit.MaxConnections)},
		{Name: "admin", Max: int(cfg.Admin.MaxConnections)},
	}
	for i, ceiling := range []int{xdsConnCeiling, rateLimitConnCeiling, adminConnCeiling} {
		if shares[i].Max == 0 {
			shares[i] = netlimit.Share{Name: shares[i].Name, Max: ceiling, Auto: true}
		}
	}
	fitted, fits := netlimit.Fit(n, shares)
	for i, c := range fitted {
		*caps[i] = uint32(c)
	}
	attrs := []any{"limit", n, "reserved", netlimit.Reserve(n), "xds.max_connections", fitted[0],
		"ratelimit.max_connections", fitted[1], "admin.max_connections", fitted[2]}
	if !fits {
		log.Warn("the connection caps given leave fewer open files than the reserve for Consul, Redis and files; lower them or raise the limit (ulimit -n)", attrs...)
		return cfg
	}
	log.Info("open file limit and connection caps", attrs...)
	return cfg
}
