package config

import (
	"strings"
	"testing"
	"time"

	"github.com/xds-server/xds-server/envoy"
)

func TestClusterOptionsConfig(t *testing.T) {
	file := writeConfig(t, `
services:
  "*":
    outlier_detection: {consecutive_5xx: 3}
    circuit_breakers: {max_requests: 500}
    locality_weighted_lb: true
  api:
    protocol: GRPC
    health_check: {grpc: true, interval: 5s}
    circuit_breakers: {max_connections: 10}
  web:
    health_check: {enabled: true}
    outlier_detection: {enabled: false}
  sessions:
    lb_policy: ring_hash
    ring_hash: {minimum_ring_size: 128}
`)
	cfg, err := loadArgs(t, "--config", file)
	if err != nil {
		t.Fatal(err)
	}
	od := envoy.OutlierDetection{Enabled: true, Consecutive5xx: 3}
	for name, want := range map[string]envoy.ClusterOptions{
		"other": {Protocol: envoy.HTTP1, OutlierDetection: od, CircuitBreakers: envoy.CircuitBreakers{MaxRequests: 500},
			LocalityWeightedLB: true},
		"api": {Protocol: envoy.GRPC, HealthCheck: envoy.HealthCheck{Enabled: true, GRPC: true, Interval: 5 * time.Second},
			OutlierDetection: od, CircuitBreakers: envoy.CircuitBreakers{MaxConnections: 10, MaxRequests: 500},
			LocalityWeightedLB: true},
		"WEB": {Protocol: envoy.HTTP1, HealthCheck: envoy.HealthCheck{Enabled: true},
			OutlierDetection: envoy.OutlierDetection{Consecutive5xx: 3}, CircuitBreakers: envoy.CircuitBreakers{MaxRequests: 500},
			LocalityWeightedLB: true},
		"sessions": {Protocol: envoy.HTTP1, OutlierDetection: od, CircuitBreakers: envoy.CircuitBreakers{MaxRequests: 500},
			LocalityWeightedLB: true, RingHash: envoy.RingHashSize{Min: 128}},
	} {
		if got := cfg.ServiceSettings(name).Cluster; got != want {
			t.Errorf("%s:\n got %+v\nwant %+v", name, got, want)
		}
	}
}

func TestClusterOptionsErrorsNameTheKey(t *testing.T) {
	for name, tc := range map[string]struct {
		body string
		want []string // substrings of the error
	}{
		"bad protocol": {`services: {api: {protocol: spdy}}`, []string{`services.api.protocol: "spdy" is not one of http1, http2, grpc`}},
		"negative interval": {`services: {api: {health_check: {interval: -1s}}}`,
			[]string{"services.api.health_check.interval: -1s is negative"}},
		"timeout above the inherited interval": {`
services:
  "*": {health_check: {interval: 1s}}
  api: {health_check: {timeout: 3s}}`, []string{"services.api.health_check.timeout: 3s is longer than the interval 1s"}},
		"grpc check needs http2": {`services: {api: {health_check: {grpc: true}}}`,
			[]string{"services.api.health_check.grpc: needs protocol http2 or grpc"}},
		"ejection percent": {`services: {"*": {outlier_detection: {max_ejection_percent: 150}}, api: {protocol: http1}}`,
			[]string{"services.*.outlier_detection.max_ejection_percent: 150 is above 100"}},
		"ring sizes": {`services: {api: {ring_hash: {minimum_ring_size: 9000, maximum_ring_size: 4000}}}`,
			[]string{"services.api.ring_hash.minimum_ring_size: 9000 is above maximum_ring_size 4000"}},
		"unknown key":    {`services: {api: {health_check: {port: 80}}}`, []string{"services.api.health_check.port: unknown key"}},
		"bad duration":   {`services: {api: {outlier_detection: {interval: soon}}}`, []string{"services.api.outlier_detection.interval: soon: is not a duration (like 50ms, 5s or 1m)"}},
		"negative count": {`services: {api: {circuit_breakers: {max_requests: -1}}}`, []string{"services.api.circuit_breakers.max_requests: -1: is not in [0, 4294967295]"}},
		"unit-less duration": {`services: {api: {health_check: {interval: 10}}}`,
			[]string{"services.api.health_check.interval: 10: a duration needs a unit (like 50ms, 5s or 1m)"}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := loadArgs(t, "--config", writeConfig(t, tc.body))
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if name == "ejection percent" && strings.Contains(err.Error(), "services.api.") {
				t.Errorf("an error inherited from * is reported for api too: %v", err)
			}
		})
	}
}

// TestOutlierDetectionWithLocality: a service with a locality failover
// list or distribute share and outlier detection may eject every host (a
// dead zone must fail over: Envoy's default 10% ejects no host of a
// cluster of fewer than 10); an explicit max_ejection_percent stays, and
// so does 10 without a locality policy.
func TestOutlierDetectionWithLocality(t *testing.T) {
	cfg, err := loadArgs(t, "--config", writeConfig(t, `
services:
  "*": { outlier_detection: {} }
  zoned: { locality: { failover: [zone] } }
  shared: { locality: { distribute: 0.8 } }
  capped: { locality: { failover: [zone] }, outlier_detection: { max_ejection_percent: 50 } }
  off: { locality: { failover: [zone] }, outlier_detection: { enabled: false } }
`))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]uint32{"zoned": 100, "shared": 100, "capped": 50, "off": 0, "plain": 0} {
		if got := cfg.ServiceSettings(name).Cluster.OutlierDetection.MaxEjectionPercent; got != want {
			t.Errorf("%s: max_ejection_percent %d, want %d", name, got, want)
		}
	}
}

// TestNoPanicWithSharedPriority: a service whose zones share priority 0
// (distribute, or spill with weights and a failover list) turns Envoy's
// panic mode off; strict failover and no locality policy keep it.
func TestNoPanicWithSharedPriority(t *testing.T) {
	cfg, err := loadArgs(t, "--config", writeConfig(t, `
services:
  shared: { locality: { failover: [zone], distribute: 0.8 } }
  spilling: { locality: { failover: [zone] }, weights: { enabled: true } }
  strict: { locality: { failover: [zone] } }
`))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{"shared": true, "spilling": true, "strict": false, "plain": false} {
		if got := cfg.ServiceSettings(name).Cluster.NoPanic; got != want {
			t.Errorf("%s: NoPanic %v, want %v", name, got, want)
		}
	}
}
