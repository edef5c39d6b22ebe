package main

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/xds-server/xds-server/envoy"
)

// Per-service cluster options (services.<name>.*). A section
// (health_check, outlier_detection) that is present turns its feature on,
// unless it says enabled: false; a service's own section overlays the
// "*" one field by field.

// HealthCheckConfig is services.<name>.health_check.
type HealthCheckConfig struct {
	Enabled            *bool         `mapstructure:"enabled"`             // nil: on (the section is present)
	Path               string        `mapstructure:"path"`                // HTTP GET path; default /healthz
	GRPC               *bool         `mapstructure:"grpc"`                // grpc.health.v1 instead of HTTP (protocol http2 or grpc)
	Interval           time.Duration `mapstructure:"interval"`            // default 10s
	Timeout            time.Duration `mapstructure:"timeout"`             // <= interval; default min(2s, interval)
	UnhealthyThreshold int           `mapstructure:"unhealthy_threshold"` // default 3
	HealthyThreshold   int           `mapstructure:"healthy_threshold"`   // default 2
}

// OutlierDetectionConfig is services.<name>.outlier_detection.
type OutlierDetectionConfig struct {
	Enabled            *bool         `mapstructure:"enabled"`              // nil: on (the section is present)
	Consecutive5xx     int           `mapstructure:"consecutive_5xx"`      // default 5
	Interval           time.Duration `mapstructure:"interval"`             // default 10s
	BaseEjectionTime   time.Duration `mapstructure:"base_ejection_time"`   // default 30s
	MaxEjectionPercent int           `mapstructure:"max_ejection_percent"` // in [0, 100]; default 10
}

// CircuitBreakersConfig is services.<name>.circuit_breakers; 0 keeps
// Envoy's default.
type CircuitBreakersConfig struct {
	MaxConnections     int `mapstructure:"max_connections"`
	MaxPendingRequests int `mapstructure:"max_pending_requests"`
	MaxRequests        int `mapstructure:"max_requests"`
	MaxRetries         int `mapstructure:"max_retries"`
}

// RingHashConfig is services.<name>.ring_hash (lb_policy ring_hash).
type RingHashConfig struct {
	MinimumRingSize int `mapstructure:"minimum_ring_size"` // default 1024
	MaximumRingSize int `mapstructure:"maximum_ring_size"` // default and limit 8388608
}

// clusterServiceKeys are the keys of services.<name> that this file owns.
var clusterServiceKeys = []string{"protocol", "locality_weighted_lb",
	"health_check.enabled", "health_check.path", "health_check.grpc", "health_check.interval",
	"health_check.timeout", "health_check.unhealthy_threshold", "health_check.healthy_threshold",
	"outlier_detection.enabled", "outlier_detection.consecutive_5xx",
	"outlier_detection.interval", "outlier_detection.base_ejection_time", "outlier_detection.max_ejection_percent",
	"circuit_breakers.max_connections", "circuit_breakers.max_pending_requests",
	"circuit_breakers.max_requests", "circuit_breakers.max_retries",
	"ring_hash.minimum_ring_size", "ring_hash.maximum_ring_size"}

// mergeCluster overlays own's cluster options on eff's (the "*" ones).
func mergeCluster(eff, own ServiceConfig) ServiceConfig {
	if own.Protocol != "" {
		eff.Protocol = own.Protocol
	}
	if own.LocalityWeightedLB != nil {
		eff.LocalityWeightedLB = own.LocalityWeightedLB
	}
	eff.HealthCheck = overlay(eff.HealthCheck, own.HealthCheck, func(m *HealthCheckConfig, o HealthCheckConfig) {
		m.Enabled = or(o.Enabled, m.Enabled)
		m.GRPC = or(o.GRPC, m.GRPC)
		m.Path = or(o.Path, m.Path)
		m.Interval, m.Timeout = or(o.Interval, m.Interval), or(o.Timeout, m.Timeout)
		m.UnhealthyThreshold = or(o.UnhealthyThreshold, m.UnhealthyThreshold)
		m.HealthyThreshold = or(o.HealthyThreshold, m.HealthyThreshold)
	})
	eff.OutlierDetection = overlay(eff.OutlierDetection, own.OutlierDetection, func(m *OutlierDetectionConfig, o OutlierDetectionConfig) {
		m.Enabled = or(o.Enabled, m.Enabled)
		m.Consecutive5xx = or(o.Consecutive5xx, m.Consecutive5xx)
		m.Interval, m.BaseEjectionTime = or(o.Interval, m.Interval), or(o.BaseEjectionTime, m.BaseEjectionTime)
		m.MaxEjectionPercent = or(o.MaxEjectionPercent, m.MaxEjectionPercent)
	})
	eff.CircuitBreakers = overlay(eff.CircuitBreakers, own.CircuitBreakers, func(m *CircuitBreakersConfig, o CircuitBreakersConfig) {
		m.MaxConnections, m.MaxPendingRequests = or(o.MaxConnections, m.MaxConnections), or(o.MaxPendingRequests, m.MaxPendingRequests)
		m.MaxRequests, m.MaxRetries = or(o.MaxRequests, m.MaxRequests), or(o.MaxRetries, m.MaxRetries)
	})
	eff.RingHash.MinimumRingSize = or(own.RingHash.MinimumRingSize, eff.RingHash.MinimumRingSize)
	eff.RingHash.MaximumRingSize = or(own.RingHash.MaximumRingSize, eff.RingHash.MaximumRingSize)
	return eff
}

// or returns v unless it is the zero value, else def.
func or[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// overlay returns own over base: either alone when the other is nil, else
// a copy of base with own's set fields applied by set.
func overlay[T any](base, own *T, set func(merged *T, own T)) *T {
	if own == nil {
		return base
	}
	if base == nil {
		return own
	}
	m := *base
	set(&m, *own)
	return &m
}

// clusterOptions converts merged settings into envoy.ClusterOptions. A
// protocol that does not parse is passed on as written, for Validate to
// report.
func (s ServiceConfig) clusterOptions() envoy.ClusterOptions {
	p, err := envoy.ParseProtocol(s.Protocol)
	if err != nil {
		p = envoy.Protocol(s.Protocol)
	}
	o := envoy.ClusterOptions{
		Protocol:           p,
		LocalityWeightedLB: s.LocalityWeightedLB != nil && *s.LocalityWeightedLB,
		RingHash:           envoy.RingHashSize{Min: u64(s.RingHash.MinimumRingSize), Max: u64(s.RingHash.MaximumRingSize)},
	}
	if hc := s.HealthCheck; hc != nil {
		o.HealthCheck = envoy.HealthCheck{Enabled: hc.Enabled == nil || *hc.Enabled,
			GRPC: hc.GRPC != nil && *hc.GRPC, Path: hc.Path, Interval: hc.Interval, Timeout: hc.Timeout,
			UnhealthyThreshold: u32(hc.UnhealthyThreshold), HealthyThreshold: u32(hc.HealthyThreshold)}
	}
	if od := s.OutlierDetection; od != nil {
		o.OutlierDetection = envoy.OutlierDetection{Enabled: od.Enabled == nil || *od.Enabled,
			Consecutive5xx: u32(od.Consecutive5xx), Interval: od.Interval, BaseEjectionTime: od.BaseEjectionTime,
			MaxEjectionPercent: u32(od.MaxEjectionPercent)}
	}
	if cb := s.CircuitBreakers; cb != nil {
		o.CircuitBreakers = envoy.CircuitBreakers{MaxConnections: u32(cb.MaxConnections),
			MaxPendingRequests: u32(cb.MaxPendingRequests), MaxRequests: u32(cb.MaxRequests), MaxRetries: u32(cb.MaxRetries)}
	}
	return o
}

// u32 and u64 convert a count; out-of-range counts are reported by
// validateCounts and sent as 0 (the default) meanwhile.
func u32(n int) uint32 {
	if n < 0 || n > math.MaxUint32 {
		return 0
	}
	return uint32(n)
}

func u64(n int) uint64 { return uint64(max(n, 0)) }

// counts returns the integer cluster options s sets, by key.
func (s ServiceConfig) counts() map[string]int {
	out := map[string]int{"ring_hash.minimum_ring_size": s.RingHash.MinimumRingSize,
		"ring_hash.maximum_ring_size": s.RingHash.MaximumRingSize}
	if hc := s.HealthCheck; hc != nil {
		out["health_check.unhealthy_threshold"] = hc.UnhealthyThreshold
		out["health_check.healthy_threshold"] = hc.HealthyThreshold
	}
	if od := s.OutlierDetection; od != nil {
		out["outlier_detection.consecutive_5xx"] = od.Consecutive5xx
		out["outlier_detection.max_ejection_percent"] = od.MaxEjectionPercent
	}
	if cb := s.CircuitBreakers; cb != nil {
		out["circuit_breakers.max_connections"] = cb.MaxConnections
		out["circuit_breakers.max_pending_requests"] = cb.MaxPendingRequests
		out["circuit_breakers.max_requests"] = cb.MaxRequests
		out["circuit_breakers.max_retries"] = cb.MaxRetries
	}
	return out
}

// validateClusters checks the effective cluster options of every service
// and reports each problem under services.<name>.<key>. A problem that a
// service only inherits from "*" is reported once, under "*".
func (c Config) validateClusters(bad func(key, format string, args ...any)) {
	star := optionErrors(c.settings("*").Cluster.Validate())
	for name, s := range c.Services {
		counts := s.counts()
		for _, key := range slices.Sorted(maps.Keys(counts)) {
			if n := counts[key]; n < 0 || n > math.MaxUint32 {
				bad(fmt.Sprintf("services.%s.%s", name, key), "%d is not in [0, %d]", n, uint32(math.MaxUint32))
			}
		}
		errs := optionErrors(c.settings(name).Cluster.Validate())
		for _, key := range slices.Sorted(maps.Keys(errs)) {
			reason := errs[key]
			if name != "*" && star[key] == reason {
				continue
			}
			bad(fmt.Sprintf("services.%s.%s", name, key), "%s", reason)
		}
	}
}

// optionErrors maps the keys of the *envoy.OptionError in err to their reasons.
func optionErrors(err error) map[string]string {
	out := map[string]string{}
	if err == nil {
		return out
	}
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else {
		errs = []error{err}
	}
	for _, e := range errs {
		var oe *envoy.OptionError
		if errors.As(e, &oe) {
			out[oe.Key] = oe.Reason
		} else {
			out["?"] = e.Error()
		}
	}
	return out
}
