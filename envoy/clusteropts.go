package envoy

import (
	"cmp"
	"errors"
	"fmt"
	"strings"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Protocol is the protocol Envoy speaks to the endpoints of a cluster.
type Protocol string

// Upstream protocols. gRPC is HTTP/2; it is a name of its own so that a
// config says what the service is.
const (
	HTTP1 Protocol = "http1"
	HTTP2 Protocol = "http2"
	GRPC  Protocol = "grpc"
)

// ParseProtocol returns the protocol named s (case-insensitive); "" means HTTP1.
func ParseProtocol(s string) (Protocol, error) {
	switch p := Protocol(strings.ToLower(strings.TrimSpace(s))); p {
	case "":
		return HTTP1, nil
	case HTTP1, HTTP2, GRPC:
		return p, nil
	}
	return "", fmt.Errorf("envoy: unknown protocol %q (valid: http1, http2, grpc)", s)
}

// http2 reports whether p is spoken over HTTP/2.
func (p Protocol) http2() bool { return p == HTTP2 || p == GRPC }

// ClusterOptions are the optional settings of a service's cluster. The zero
// value adds nothing to the cluster. Every field is comparable, so that
// equal settings compare equal (the xds layer memoizes on them).
type ClusterOptions struct {
	Protocol         Protocol // "" means HTTP1; HTTP2 and GRPC send explicit HTTP/2 protocol options
	HealthCheck      HealthCheck
	OutlierDetection OutlierDetection
	CircuitBreakers  CircuitBreakers
	// LocalityWeightedLB makes Envoy honour the EDS locality weights
	// (common_lb_config.locality_weighted_lb_config); grpc-go always does.
	LocalityWeightedLB bool
	// NoPanic turns Envoy's panic mode off
	// (common_lb_config.healthy_panic_threshold 0), for clusters whose
	// priority 0 mixes zones (distribute, spill): when the zone of most of
	// its hosts is down, Envoy would otherwise spread requests over every
	// host, the down ones too. grpc-go has no panic mode.
	NoPanic  bool
	RingHash RingHashSize // used by ring_hash (and maglev's grpc-go fallback)
	// LoadReporting names this server as the cluster's LRS server
	// (lrs_server: {self: {}}), so that grpc-go clients send it their load
	// reports (LRS) on the same connection as xDS. Envoy ignores the field
	// (it reports with its bootstrap's cluster_manager.load_stats_config,
	// which Bootstrap points at xds-server).
	LoadReporting bool
}

// HealthCheck is Envoy's active health checking of the endpoints (grpc-go
// ignores it and relies on EDS health).
type HealthCheck struct {
	Enabled            bool
	GRPC               bool          // grpc.health.v1 check instead of HTTP GET; needs protocol http2 or grpc
	Path               string        // HTTP path; "" means /healthz
	Interval           time.Duration // > 0; 0 means 10s
	Timeout            time.Duration // > 0 and <= Interval; 0 means min(2s, Interval)
	UnhealthyThreshold uint32        // failed checks that mark a host unhealthy; 0 means 3
	HealthyThreshold   uint32        // passed checks that mark it healthy again; 0 means 2
}

// OutlierDetection is passive ejection of failing endpoints. grpc-go
// applies interval, base_ejection_time and max_ejection_percent, and
// ignores consecutive_5xx (it ejects by success rate, as Envoy also does by
// default).
type OutlierDetection struct {
	Enabled            bool
	Consecutive5xx     uint32        // 5xx responses in a row that eject a host; 0 means Envoy's default (5)
	Interval           time.Duration // ejection analysis period; 0 means 10s
	BaseEjectionTime   time.Duration // ejection time, times the ejection count; 0 means 30s
	MaxEjectionPercent uint32        // in [0, 100]; 0 means Envoy's default (10)
}

// CircuitBreakers are the default-priority thresholds of a cluster; 0
// leaves Envoy's default (1024 each, 3 retries). grpc-go applies
// max_requests only.
type CircuitBreakers struct {
	MaxConnections     uint32
	MaxPendingRequests uint32
	MaxRequests        uint32
	MaxRetries         uint32
}

// RingHashSize bounds the ring of ring_hash; 0 means the default (1024
// minimum, 8M maximum). Both are at most 8M (8388608) entries.
type RingHashSize struct {
	Min uint64
	Max uint64
}

const (
	defaultHCInterval            = 10 * time.Second
	defaultHCTimeout             = 2 * time.Second
	defaultHCPath                = "/healthz"
	defaultUnhealthyThreshold    = 3
	defaultHealthyThreshold      = 2
	defaultODInterval            = 10 * time.Second
	defaultODBaseEjectionTime    = 30 * time.Second
	httpProtocolOptionsExtension = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
)

// OptionError is a problem with one cluster option. Key is the option's
// configuration key, e.g. "health_check.interval".
type OptionError struct {
	Key    string
	Reason string
}

func (e *OptionError) Error() string { return "envoy: " + e.Key + ": " + e.Reason }

// Validate reports every problem of o, joined; each is an *OptionError.
func (o ClusterOptions) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, &OptionError{Key: key, Reason: fmt.Sprintf(format, args...)})
	}
	if _, err := ParseProtocol(string(o.Protocol)); err != nil {
		bad("protocol", "%q is not one of http1, http2, grpc", o.Protocol)
	}
	if hc := o.HealthCheck; hc.Enabled {
		interval, timeout := hc.durations()
		if hc.Interval < 0 {
			bad("health_check.interval", "%v is negative", hc.Interval)
		}
		if hc.Timeout < 0 {
			bad("health_check.timeout", "%v is negative", hc.Timeout)
		} else if timeout > interval {
			bad("health_check.timeout", "%v is longer than the interval %v", timeout, interval)
		}
		if hc.GRPC && !o.Protocol.http2() {
			bad("health_check.grpc", "needs protocol http2 or grpc (the cluster's protocol is %q)", string(o.Protocol))
		}
		if hc.GRPC && hc.Path != "" {
			bad("health_check.path", "is for HTTP checks; grpc checks have no path")
		}
		if hc.Path != "" && !strings.HasPrefix(hc.Path, "/") {
			bad("health_check.path", "%q does not start with /", hc.Path)
		}
	}
	if od := o.OutlierDetection; od.Enabled {
		if od.Interval < 0 {
			bad("outlier_detection.interval", "%v is negative", od.Interval)
		}
		if od.BaseEjectionTime < 0 {
			bad("outlier_detection.base_ejection_time", "%v is negative", od.BaseEjectionTime)
		}
		if od.MaxEjectionPercent > 100 {
			bad("outlier_detection.max_ejection_percent", "%d is above 100", od.MaxEjectionPercent)
		}
	}
	if r := o.RingHash; r.Min > ringHashMaxSize || r.Max > ringHashMaxSize {
		bad("ring_hash", "ring sizes are at most %d (minimum_ring_size %d, maximum_ring_size %d)", ringHashMaxSize, r.Min, r.Max)
	} else if r.Min > r.ringMax() {
		bad("ring_hash.minimum_ring_size", "%d is above maximum_ring_size %d", r.Min, r.ringMax())
	}
	return errors.Join(errs...)
}

func (r RingHashSize) ringMin() uint64 { return cmp.Or(r.Min, ringHashMinSize) }
func (r RingHashSize) ringMax() uint64 { return cmp.Or(r.Max, ringHashMaxSize) }

// durations returns the effective interval and timeout.
func (hc HealthCheck) durations() (interval, timeout time.Duration) {
	interval = cmp.Or(hc.Interval, defaultHCInterval)
	timeout = cmp.Or(hc.Timeout, min(defaultHCTimeout, interval))
	return interval, timeout
}

// applyClusterOptions sets the fields of c that o asks for. o must be valid.
func applyClusterOptions(c *clusterv3.Cluster, o ClusterOptions) error {
	opts, err := protocolOptions(o.Protocol)
	if err != nil {
		return err
	}
	c.TypedExtensionProtocolOptions = opts
	if o.HealthCheck.Enabled {
		c.HealthChecks = []*corev3.HealthCheck{healthCheck(o.HealthCheck, o.Protocol)}
	}
	if od := o.OutlierDetection; od.Enabled {
		c.OutlierDetection = &clusterv3.OutlierDetection{
			Consecutive_5Xx:    optUInt32(od.Consecutive5xx),
			Interval:           durationpb.New(cmp.Or(od.Interval, defaultODInterval)),
			BaseEjectionTime:   durationpb.New(cmp.Or(od.BaseEjectionTime, defaultODBaseEjectionTime)),
			MaxEjectionPercent: optUInt32(od.MaxEjectionPercent),
		}
	}
	c.CircuitBreakers = circuitBreakersProto(o.CircuitBreakers)
	if o.LoadReporting {
		c.LrsServer = &corev3.ConfigSource{ResourceApiVersion: corev3.ApiVersion_V3,
			ConfigSourceSpecifier: &corev3.ConfigSource_Self{Self: &corev3.SelfConfigSource{}}}
	}
	if o.LocalityWeightedLB && c.LoadBalancingPolicy == nil { // else in the policies (setLBPolicy)
		c.CommonLbConfig = &clusterv3.Cluster_CommonLbConfig{
			LocalityConfigSpecifier: &clusterv3.Cluster_CommonLbConfig_LocalityWeightedLbConfig_{
				LocalityWeightedLbConfig: &clusterv3.Cluster_CommonLbConfig_LocalityWeightedLbConfig{},
			},
			// Connections survive endpoint changes: a draining or new host
			// must not reset every connection of the cluster.
			CloseConnectionsOnHostSetChange: false,
		}
	}
	if o.NoPanic {
		if c.CommonLbConfig == nil {
			c.CommonLbConfig = &clusterv3.Cluster_CommonLbConfig{}
		}
		c.CommonLbConfig.HealthyPanicThreshold = &typev3.Percent{Value: 0}
	}
	return nil
}

// circuitBreakersProto is cb as a cluster's circuit_breakers; nil when
// cb leaves every threshold at Envoy's default.
func circuitBreakersProto(cb CircuitBreakers) *clusterv3.CircuitBreakers {
	if cb == (CircuitBreakers{}) {
		return nil
	}
	return &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{{
		Priority:           corev3.RoutingPriority_DEFAULT,
		MaxConnections:     optUInt32(cb.MaxConnections),
		MaxPendingRequests: optUInt32(cb.MaxPendingRequests),
		MaxRequests:        optUInt32(cb.MaxRequests),
		MaxRetries:         optUInt32(cb.MaxRetries),
	}}}
}

// protocolOptions returns the typed_extension_protocol_options for p: nil
// for HTTP/1.1 (Envoy's default), explicit HTTP/2 otherwise.
func protocolOptions(p Protocol) (map[string]*anypb.Any, error) {
	if !p.http2() {
		return nil, nil
	}
	a, err := marshalAny(&httpv3.HttpProtocolOptions{
		UpstreamProtocolOptions: &httpv3.HttpProtocolOptions_ExplicitHttpConfig_{
			ExplicitHttpConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig{
				ProtocolConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig_Http2ProtocolOptions{
					Http2ProtocolOptions: &corev3.Http2ProtocolOptions{},
				},
			},
		},
	})
	if err != nil {
		return nil, err
	}
	return map[string]*anypb.Any{httpProtocolOptionsExtension: a}, nil
}

func healthCheck(hc HealthCheck, p Protocol) *corev3.HealthCheck {
	interval, timeout := hc.durations()
	out := &corev3.HealthCheck{
		Interval:           durationpb.New(interval),
		Timeout:            durationpb.New(timeout),
		UnhealthyThreshold: wrapperspb.UInt32(cmp.Or(hc.UnhealthyThreshold, defaultUnhealthyThreshold)),
		HealthyThreshold:   wrapperspb.UInt32(cmp.Or(hc.HealthyThreshold, defaultHealthyThreshold)),
	}
	if hc.GRPC {
		out.HealthChecker = &corev3.HealthCheck_GrpcHealthCheck_{GrpcHealthCheck: &corev3.HealthCheck_GrpcHealthCheck{}}
		return out
	}
	http := &corev3.HealthCheck_HttpHealthCheck{Path: cmp.Or(hc.Path, defaultHCPath)}
	if p.http2() {
		http.CodecClientType = typev3.CodecClientType_HTTP2
	}
	out.HealthChecker = &corev3.HealthCheck_HttpHealthCheck_{HttpHealthCheck: http}
	return out
}

// optUInt32 is nil for 0 (the field's default applies) and v otherwise.
func optUInt32(v uint32) *wrapperspb.UInt32Value {
	if v == 0 {
		return nil
	}
	return wrapperspb.UInt32(v)
}
