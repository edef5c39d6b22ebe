package envoy

import (
	"errors"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
)

// caseCluster is the YAML form of ClusterOptions in testdata/<case>.in.yaml
// (the keys of services.<name> in xds-server's config); durations use
// time.ParseDuration syntax.
type caseCluster struct {
	Protocol    string `json:"protocol"`
	HealthCheck *struct {
		Path               string `json:"path"`
		GRPC               bool   `json:"grpc"`
		Interval           string `json:"interval"`
		Timeout            string `json:"timeout"`
		UnhealthyThreshold uint32 `json:"unhealthy_threshold"`
		HealthyThreshold   uint32 `json:"healthy_threshold"`
	} `json:"health_check"`
	OutlierDetection *struct {
		Consecutive5xx     uint32 `json:"consecutive_5xx"`
		Interval           string `json:"interval"`
		BaseEjectionTime   string `json:"base_ejection_time"`
		MaxEjectionPercent uint32 `json:"max_ejection_percent"`
	} `json:"outlier_detection"`
	CircuitBreakers struct {
		MaxConnections     uint32 `json:"max_connections"`
		MaxPendingRequests uint32 `json:"max_pending_requests"`
		MaxRequests        uint32 `json:"max_requests"`
		MaxRetries         uint32 `json:"max_retries"`
	} `json:"circuit_breakers"`
	LocalityWeightedLB bool `json:"locality_weighted_lb"`
	LoadReporting      bool `json:"load_reporting"`
	RingHash           struct {
		Min uint64 `json:"minimum_ring_size"`
		Max uint64 `json:"maximum_ring_size"`
	} `json:"ring_hash"`
}

func (cc caseCluster) options(t *testing.T, path string) ClusterOptions {
	t.Helper()
	dur := func(s string) time.Duration {
		if s == "" {
			return 0
		}
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		return d
	}
	o := ClusterOptions{
		Protocol: Protocol(cc.Protocol), CircuitBreakers: CircuitBreakers(cc.CircuitBreakers),
		LocalityWeightedLB: cc.LocalityWeightedLB, RingHash: RingHashSize(cc.RingHash),
		LoadReporting: cc.LoadReporting,
	}
	if hc := cc.HealthCheck; hc != nil {
		o.HealthCheck = HealthCheck{Enabled: true, Path: hc.Path, GRPC: hc.GRPC, Interval: dur(hc.Interval),
			Timeout: dur(hc.Timeout), UnhealthyThreshold: hc.UnhealthyThreshold, HealthyThreshold: hc.HealthyThreshold}
	}
	if od := cc.OutlierDetection; od != nil {
		o.OutlierDetection = OutlierDetection{Enabled: true, Consecutive5xx: od.Consecutive5xx,
			Interval: dur(od.Interval), BaseEjectionTime: dur(od.BaseEjectionTime), MaxEjectionPercent: od.MaxEjectionPercent}
	}
	return o
}

func TestClusterOptionsValidate(t *testing.T) {
	for name, tc := range map[string]struct {
		o    ClusterOptions
		keys []string // the OptionError keys, in order; none means valid
	}{
		"zero value":       {},
		"grpc everything":  {o: ClusterOptions{Protocol: GRPC, HealthCheck: HealthCheck{Enabled: true, GRPC: true}}},
		"unknown protocol": {o: ClusterOptions{Protocol: "spdy"}, keys: []string{"protocol"}},
		"grpc check over http1": {
			o: ClusterOptions{HealthCheck: HealthCheck{Enabled: true, GRPC: true}}, keys: []string{"health_check.grpc"},
		},
		"timeout above interval": {
			o:    ClusterOptions{HealthCheck: HealthCheck{Enabled: true, Interval: time.Second, Timeout: 2 * time.Second}},
			keys: []string{"health_check.timeout"},
		},
		"default timeout fits a short interval": {
			o: ClusterOptions{HealthCheck: HealthCheck{Enabled: true, Interval: 500 * time.Millisecond}},
		},
		"negative durations and relative path": {
			o: ClusterOptions{HealthCheck: HealthCheck{Enabled: true, Interval: -time.Second, Path: "healthz"},
				OutlierDetection: OutlierDetection{Enabled: true, Interval: -1, BaseEjectionTime: -1}},
			keys: []string{"health_check.interval", "health_check.path", "outlier_detection.interval", "outlier_detection.base_ejection_time"},
		},
		"disabled sections are not checked": {
			o: ClusterOptions{HealthCheck: HealthCheck{Interval: -1}, OutlierDetection: OutlierDetection{MaxEjectionPercent: 200}},
		},
		"ejection percent above 100": {
			o:    ClusterOptions{OutlierDetection: OutlierDetection{Enabled: true, MaxEjectionPercent: 101}},
			keys: []string{"outlier_detection.max_ejection_percent"},
		},
		"ring too large":     {o: ClusterOptions{RingHash: RingHashSize{Max: 1 << 24}}, keys: []string{"ring_hash"}},
		"ring min above max": {o: ClusterOptions{RingHash: RingHashSize{Min: 4096, Max: 2048}}, keys: []string{"ring_hash.minimum_ring_size"}},
	} {
		t.Run(name, func(t *testing.T) {
			var got []string
			if err := tc.o.Validate(); err != nil {
				for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
					var oe *OptionError
					if !errors.As(e, &oe) {
						t.Fatalf("%v is not an *OptionError", e)
					}
					got = append(got, oe.Key)
				}
			}
			if strings.Join(got, ",") != strings.Join(tc.keys, ",") {
				t.Errorf("error keys = %v, want %v", got, tc.keys)
			}
		})
	}
}

func TestClusterOptionsApply(t *testing.T) {
	c, err := Cluster(Service{Name: "api", Cluster: ClusterOptions{
		Protocol:    HTTP2,
		HealthCheck: HealthCheck{Enabled: true, Interval: time.Second},
	}})
	if err != nil {
		t.Fatal(err)
	}
	po := &httpv3.HttpProtocolOptions{}
	if err := c.GetTypedExtensionProtocolOptions()[httpProtocolOptionsExtension].UnmarshalTo(po); err != nil {
		t.Fatal(err)
	}
	if po.GetExplicitHttpConfig().GetHttp2ProtocolOptions() == nil {
		t.Errorf("protocol options %v: not explicit HTTP/2", po)
	}
	hc := c.GetHealthChecks()[0]
	if hc.GetTimeout().AsDuration() != time.Second || hc.GetHttpHealthCheck().GetPath() != "/healthz" ||
		hc.GetHttpHealthCheck().GetCodecClientType() != typev3.CodecClientType_HTTP2 {
		t.Errorf("health check = %v", hc)
	}
	if c.GetCommonLbConfig() != nil || c.GetOutlierDetection() != nil || c.GetCircuitBreakers() != nil {
		t.Errorf("options not asked for were set: %v", c)
	}

	c, err = Cluster(Service{Name: "web", Cluster: ClusterOptions{
		LocalityWeightedLB: true, CircuitBreakers: CircuitBreakers{MaxRequests: 10},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if c.GetTypedExtensionProtocolOptions() != nil || c.GetCommonLbConfig().GetLocalityWeightedLbConfig() == nil ||
		c.GetCommonLbConfig().GetCloseConnectionsOnHostSetChange() {
		t.Errorf("http1 cluster with locality weights = %v", c)
	}
	th := c.GetCircuitBreakers().GetThresholds()[0]
	if th.GetPriority() != corev3.RoutingPriority_DEFAULT || th.GetMaxRequests().GetValue() != 10 || th.GetMaxConnections() != nil {
		t.Errorf("thresholds = %v", th)
	}
}
