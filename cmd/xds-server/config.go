package main

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/xds-server/xds-server/envoy"
	"github.com/xds-server/xds-server/subsetting"
	"github.com/xds-server/xds-server/xds"
)

// Config is the whole configuration: file, env and flags decode into it.
type Config struct {
	XDS        XDSConfig                `mapstructure:"xds"`
	Admin      AdminConfig              `mapstructure:"admin"`
	Discovery  DiscoveryConfig          `mapstructure:"discovery"`
	Services   map[string]ServiceConfig `mapstructure:"services"`
	Subsetting SubsettingConfig         `mapstructure:"subsetting"`
	Weights    WeightsConfig            `mapstructure:"weights"`
	Drain      DrainConfig              `mapstructure:"drain"`
	RateLimit  RateLimitSection         `mapstructure:"ratelimit"`
	Listeners  []ListenerConfig         `mapstructure:"listeners"` // file only; see listeners.go
	Log        LogConfig                `mapstructure:"log"`
	Runtime    RuntimeConfig            `mapstructure:"runtime"`
}

// RuntimeConfig tunes the Go runtime.
type RuntimeConfig struct {
	HeapFloorMiB uint32 `mapstructure:"heap_floor_mib"` // GC lets the heap reach this (or twice the live heap) before collecting; 0 = off
}

// SubsettingConfig configures client indices for subsetting.
type SubsettingConfig struct {
	IndexSource string        `mapstructure:"index_source"` // local | consul | metadata
	IndexTTL    time.Duration `mapstructure:"index_ttl"`    // reservation after a node leaves
	GroupBy     string        `mapstructure:"group_by"`     // cluster | zone | none | metadata.<key>
	Consul      struct {
		Prefix string `mapstructure:"prefix"` // KV prefix of the index table
	} `mapstructure:"consul"`
}

// XDSConfig configures the xDS gRPC listener and reconcile loop.
type XDSConfig struct {
	Address         string          `mapstructure:"address"`          // host:port of the ADS listener
	Debounce        time.Duration   `mapstructure:"debounce"`         // quiet time that ends a burst of changes
	MaxDelay        time.Duration   `mapstructure:"max_delay"`        // longest a burst may postpone a rebuild
	NodeGrace       time.Duration   `mapstructure:"node_grace"`       // keep a departed node's snapshot this long
	MaxStreams      uint32          `mapstructure:"max_streams"`      // concurrent streams per connection
	ShutdownTimeout time.Duration   `mapstructure:"shutdown_timeout"` // graceful shutdown limit, after the grace
	ShutdownGrace   time.Duration   `mapstructure:"shutdown_grace"`   // existing streams keep being served this long after SIGTERM
	Keepalive       KeepaliveConfig `mapstructure:"keepalive"`
}

// KeepaliveConfig are the gRPC keepalive settings of the xDS listener.
type KeepaliveConfig struct {
	Time    time.Duration `mapstructure:"time"`
	Timeout time.Duration `mapstructure:"timeout"`
	MinTime time.Duration `mapstructure:"min_time"`
}

// AdminConfig configures the admin HTTP listener.
type AdminConfig struct {
	Address string `mapstructure:"address"`
}

// DiscoveryConfig selects and configures the discovery source.
type DiscoveryConfig struct {
	Source string       `mapstructure:"source"` // static | consul
	Static StaticConfig `mapstructure:"static"`
	Consul ConsulConfig `mapstructure:"consul"`
}

// StaticConfig configures the static file source.
type StaticConfig struct {
	File         string        `mapstructure:"file"`
	PollInterval time.Duration `mapstructure:"poll_interval"`
}

// ConsulConfig configures the Consul source.
type ConsulConfig struct {
	Address     string        `mapstructure:"address"`
	Token       string        `mapstructure:"token"`
	Datacenter  string        `mapstructure:"datacenter"`
	Services    []string      `mapstructure:"services"`
	Tags        []string      `mapstructure:"tags"`
	Wait        time.Duration `mapstructure:"wait"`
	MinInterval time.Duration `mapstructure:"min_interval"`
	BackoffBase time.Duration `mapstructure:"backoff_base"`
	BackoffMax  time.Duration `mapstructure:"backoff_max"`
	WarningAs   string        `mapstructure:"warning_as"`
}

// ServiceConfig holds per-service settings; "*" gives the defaults.
type ServiceConfig struct {
	LBPolicy       string         `mapstructure:"lb_policy"`
	ConnectTimeout time.Duration  `mapstructure:"connect_timeout"`
	SubsetSize     *int           `mapstructure:"subset_size"`  // endpoints per node; 0 = off; nil = inherit
	Subsetting     string         `mapstructure:"subsetting"`   // classic | steady
	Weights        ServiceWeights `mapstructure:"weights"`      // EDS weights from utilization reports
	DrainWindow    string         `mapstructure:"drain_window"` // overrides drain.window; "" = inherit

	// Cluster options (cluster_config.go); nil or "" = inherit.
	Protocol           string                  `mapstructure:"protocol"` // http1 | http2 | grpc
	HealthCheck        *HealthCheckConfig      `mapstructure:"health_check"`
	OutlierDetection   *OutlierDetectionConfig `mapstructure:"outlier_detection"`
	CircuitBreakers    *CircuitBreakersConfig  `mapstructure:"circuit_breakers"`
	LocalityWeightedLB *bool                   `mapstructure:"locality_weighted_lb"` // Envoy honours EDS locality weights
	RingHash           RingHashConfig          `mapstructure:"ring_hash"`
}

// LogConfig configures logging.
type LogConfig struct {
	Level  string `mapstructure:"level"`  // debug | info | warn | error
	Format string `mapstructure:"format"` // text | json
}

// Validate checks every key and names the bad ones.
func (c Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
	}
	checkAddr(bad, "xds.address", c.XDS.Address)
	checkAddr(bad, "admin.address", c.Admin.Address)
	xc := c.xdsConfig()
	if err := xc.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.XDS.ShutdownGrace < 0 {
		bad("xds.shutdown_grace", "%v is negative", c.XDS.ShutdownGrace)
	}
	if c.XDS.ShutdownTimeout < 0 {
		bad("xds.shutdown_timeout", "%v is negative", c.XDS.ShutdownTimeout)
	}
	switch c.Discovery.Source {
	case "static":
		if c.Discovery.Static.PollInterval < 0 {
			bad("discovery.static.poll_interval", "%v is negative", c.Discovery.Static.PollInterval)
		}
	case "consul":
		if err := c.consulConfig(nil, nil).Validate(); err != nil {
			errs = append(errs, errors.New(consulKeys.Replace(err.Error())))
		}
	default:
		bad("discovery.source", "%q is not one of static, consul", c.Discovery.Source)
	}
	for name, s := range c.Services {
		if s.LBPolicy != "" {
			if _, err := envoy.ParseLBPolicy(s.LBPolicy); err != nil {
				bad(fmt.Sprintf("services.%s.lb_policy", name), "%v", err)
			}
		}
		if s.ConnectTimeout < 0 {
			bad(fmt.Sprintf("services.%s.connect_timeout", name), "%v is negative", s.ConnectTimeout)
		}
		if s.SubsetSize != nil && *s.SubsetSize < 0 {
			bad(fmt.Sprintf("services.%s.subset_size", name), "%d is negative (0 turns subsetting off)", *s.SubsetSize)
		}
		if a := s.Subsetting; a != "" && a != string(subsetting.Classic) && a != string(subsetting.Steady) {
			bad(fmt.Sprintf("services.%s.subsetting", name), "%q is not one of classic, steady", a)
		}
	}
	c.validateClusters(bad)
	c.validateWeights(bad)
	c.validateDrain(bad)
	c.validateRateLimit(bad)
	c.validateListeners(bad)
	if _, err := parseLevel(c.Log.Level); err != nil {
		bad("log.level", "%v", err)
	}
	if f := c.Log.Format; f != "text" && f != "json" {
		bad("log.format", "%q is not one of text, json", f)
	}
	return errors.Join(errs...)
}

// consulKeys renames the discovery package's field names to config keys.
var consulKeys = strings.NewReplacer(
	"discovery: consul: Address:", "discovery.consul.address:",
	"discovery: consul: Wait:", "discovery.consul.wait:",
	"discovery: consul: MinInterval:", "discovery.consul.min_interval:",
	"discovery: consul: BackoffBase:", "discovery.consul.backoff_base:",
	"discovery: consul: BackoffMax:", "discovery.consul.backoff_max:",
	"discovery: consul: WarningAs:", "discovery.consul.warning_as:",
	"discovery: consul: Services:", "discovery.consul.services:",
	"discovery: consul: Tags:", "discovery.consul.tags:",
	"BackoffBase", "discovery.consul.backoff_base",
)

func checkAddr(bad func(string, string, ...any), key, addr string) {
	if _, port, err := net.SplitHostPort(addr); err != nil {
		bad(key, "%q is not host:port: %v", addr, err)
	} else if port == "" {
		bad(key, "%q has no port", addr)
	}
}

// settings returns the effective settings of a service: the "*" entry
// overlaid with the service's own (names match case-insensitively, as the
// config loader lower-cases keys).
func (c Config) settings(service string) xds.ServiceSettings {
	eff := c.Services["*"]
	if own, ok := c.Services[strings.ToLower(service)]; ok {
		if own.LBPolicy != "" {
			eff.LBPolicy = own.LBPolicy
		}
		if own.ConnectTimeout != 0 {
			eff.ConnectTimeout = own.ConnectTimeout
		}
		if own.SubsetSize != nil {
			eff.SubsetSize = own.SubsetSize
		}
		if own.Subsetting != "" {
			eff.Subsetting = own.Subsetting
		}
		eff = mergeCluster(eff, own)
	}
	p, _ := envoy.ParseLBPolicy(eff.LBPolicy)
	set := xds.ServiceSettings{LBPolicy: p, ConnectTimeout: eff.ConnectTimeout, Subsetting: subsetting.Algorithm(eff.Subsetting),
		Cluster: eff.clusterOptions()}
	if eff.SubsetSize != nil {
		set.SubsetSize = *eff.SubsetSize
	}
	return set
}

func (c Config) xdsConfig() xds.Config {
	return xds.Config{
		Debounce:   c.XDS.Debounce,
		MaxDelay:   c.XDS.MaxDelay,
		NodeGrace:  c.XDS.NodeGrace,
		MaxStreams: c.XDS.MaxStreams,
		Keepalive: xds.Keepalive{
			Time: c.XDS.Keepalive.Time, Timeout: c.XDS.Keepalive.Timeout, MinTime: c.XDS.Keepalive.MinTime,
		},
		Settings:         c.settings,
		RateLimitAddress: c.RateLimit.advertised(),
		Subsetting: xds.SubsetConfig{
			IndexSource: c.Subsetting.IndexSource, IndexTTL: c.Subsetting.IndexTTL, GroupBy: c.Subsetting.GroupBy,
		},
	}
}
