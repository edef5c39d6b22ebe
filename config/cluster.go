package config

import (
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/xds-server/xds-server/envoy"
)

// Per-service cluster options (services.<name>.*). A section
// (health_check, outlier_detection) that is present turns its feature on,
// unless it says enabled: false.

// HealthCheckConfig is services.<name>.health_check.
type HealthCheckConfig struct {
	Enabled            *bool         `mapstructure:"enabled"`             // nil: on (the section is present)
	Path               string        `mapstructure:"path"`                // HTTP GET path; default /healthz
	GRPC               bool          `mapstructure:"grpc"`                // grpc.health.v1 instead of HTTP (protocol http2 or grpc)
	Interval           time.Duration `mapstructure:"interval"`            // default 10s
	Timeout            time.Duration `mapstructure:"timeout"`             // <= interval; default min(2s, interval)
	UnhealthyThreshold uint32        `mapstructure:"unhealthy_threshold"` // default 3
	HealthyThreshold   uint32        `mapstructure:"healthy_threshold"`   // default 2
}

// OutlierDetectionConfig is services.<name>.outlier_detection.
type OutlierDetectionConfig struct {
	Enabled            *bool         `mapstructure:"enabled"`              // nil: on (the section is present)
	Consecutive5xx     uint32        `mapstructure:"consecutive_5xx"`      // default 5
	Interval           time.Duration `mapstructure:"interval"`             // default 10s
	BaseEjectionTime   time.Duration `mapstructure:"base_ejection_time"`   // default 30s
	MaxEjectionPercent uint32        `mapstructure:"max_ejection_percent"` // in [0, 100]; default 10 (100 with a locality policy)
}

// CircuitBreakersConfig is services.<name>.circuit_breakers; 0 keeps
// Envoy's default.
type CircuitBreakersConfig struct {
	MaxConnections     uint32 `mapstructure:"max_connections"`
	MaxPendingRequests uint32 `mapstructure:"max_pending_requests"`
	MaxRequests        uint32 `mapstructure:"max_requests"`
	MaxRetries         uint32 `mapstructure:"max_retries"`
}

// RingHashConfig is services.<name>.ring_hash (lb_policy ring_hash).
type RingHashConfig struct {
	MinimumRingSize uint32 `mapstructure:"minimum_ring_size"` // default 1024
	MaximumRingSize uint32 `mapstructure:"maximum_ring_size"` // default and limit 8388608
}

// clusterOptions converts settings into envoy.ClusterOptions. A protocol
// that does not parse is passed on as written, for validation to report.
func (s ServiceConfig) clusterOptions() envoy.ClusterOptions {
	p, err := envoy.ParseProtocol(s.Protocol)
	if err != nil {
		p = envoy.Protocol(s.Protocol)
	}
	o := envoy.ClusterOptions{
		Protocol:           p,
		LocalityWeightedLB: s.LocalityWeightedLB,
		RingHash:           envoy.RingHashSize{Min: uint64(s.RingHash.MinimumRingSize), Max: uint64(s.RingHash.MaximumRingSize)},
		// Weights from LRS: name this server as the cluster's LRS server,
		// or grpc-go clients send none.
		LoadReporting: s.Weights.Enabled && slices.Contains(s.Weights.Sources, "lrs"),
	}
	if hc := s.HealthCheck; hc != nil {
		o.HealthCheck = envoy.HealthCheck{Enabled: hc.Enabled == nil || *hc.Enabled,
			GRPC: hc.GRPC, Path: hc.Path, Interval: hc.Interval, Timeout: hc.Timeout,
			UnhealthyThreshold: hc.UnhealthyThreshold, HealthyThreshold: hc.HealthyThreshold}
	}
	if od := s.OutlierDetection; od != nil {
		o.OutlierDetection = envoy.OutlierDetection{Enabled: od.Enabled == nil || *od.Enabled,
			Consecutive5xx: od.Consecutive5xx, Interval: od.Interval, BaseEjectionTime: od.BaseEjectionTime,
			MaxEjectionPercent: od.MaxEjectionPercent}
	}
	if cb := s.CircuitBreakers; cb != nil {
		o.CircuitBreakers = envoy.CircuitBreakers{MaxConnections: cb.MaxConnections,
			MaxPendingRequests: cb.MaxPendingRequests, MaxRequests: cb.MaxRequests, MaxRetries: cb.MaxRetries}
	}
	return o
}

// validateClusters checks the effective cluster options of every service
// and reports each problem under services.<name>.<key>. A problem that a
// service only inherits from "*" is reported once, under "*".
func (c Config) validateClusters(p *problems) {
	star := optionErrors(c.Services["*"].clusterOptions().Validate())
	for name, s := range c.Services {
		errs := optionErrors(s.clusterOptions().Validate())
		for _, key := range slices.Sorted(maps.Keys(errs)) {
			reason := errs[key]
			if name != "*" && star[key] == reason {
				continue
			}
			p.badKey("services."+name+"."+key, reason)
		}
	}
}

// optionErrors maps the keys of the *envoy.OptionError in err to their reasons.
func optionErrors(err error) map[string]string {
	out := map[string]string{}
	for _, e := range unjoin(err) {
		var oe *envoy.OptionError
		if errors.As(e, &oe) {
			out[oe.Key] = oe.Reason
		} else {
			out["?"] = e.Error()
		}
	}
	return out
}

// unjoin flattens an errors.Join tree; nil is no errors.
func unjoin(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, unjoin(e)...)
		}
		return out
	}
	return []error{err}
}
