package config

import (
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/xds-server/xds-server/discovery"
	"github.com/xds-server/xds-server/envoy"
	"github.com/xds-server/xds-server/subsetting"
	"github.com/xds-server/xds-server/translate"
	"github.com/xds-server/xds-server/xds"
)

// Config is the whole configuration.
type Config struct {
	XDS        XDSConfig                `mapstructure:"xds"`
	Admin      AdminConfig              `mapstructure:"admin"`
	Discovery  DiscoveryConfig          `mapstructure:"discovery"`
	Services   map[string]ServiceConfig `mapstructure:"-"` // effective settings per entry (lower-cased names), "*" included
	Subsetting SubsettingConfig         `mapstructure:"subsetting"`
	Weights    WeightsConfig            `mapstructure:"weights"`
	Drain      DrainConfig              `mapstructure:"drain"`
	HA         HAConfig                 `mapstructure:"ha"`
	RateLimit  RateLimitSection         `mapstructure:"ratelimit"`
	Listeners  []ListenerConfig         `mapstructure:"-"` // file only; see listeners.go
	Log        LogConfig                `mapstructure:"log"`
	Runtime    RuntimeConfig            `mapstructure:"runtime"`
	Console    ConsoleSection           `mapstructure:"console"`
}

// RuntimeConfig tunes the Go runtime.
type RuntimeConfig struct {
	MemoryLimitMiB uint32 `mapstructure:"memory_limit_mib"` // soft memory limit (GOMEMLIMIT); 0 = none
	HeapFloorMiB   uint32 `mapstructure:"heap_floor_mib"`   // GC lets the heap reach this (or twice the live heap) before collecting; 0 = off
	// GCBetweenPushes collects garbage in the quiet after an xDS push
	// when the next push would likely start a collection mid-push.
	GCBetweenPushes bool `mapstructure:"gc_between_pushes"`
	// ReleaseFreeMemory returns a burst's garbage and free heap to the
	// system once the process is quiet (debug.FreeOSMemory).
	ReleaseFreeMemory bool `mapstructure:"release_free_memory"`
}

// SubsettingConfig configures client indices for subsetting.
type SubsettingConfig struct {
	IndexSource string        `mapstructure:"index_source"` // local | consul | metadata
	IndexTTL    time.Duration `mapstructure:"index_ttl"`    // reservation after a node leaves
	GroupBy     string        `mapstructure:"group_by"`     // cluster | zone | none | metadata.<key>
	MaxGroups   uint32        `mapstructure:"max_groups"`   // groups of known nodes; 0 = no cap
	Consul      struct {
		Prefix string `mapstructure:"prefix"` // KV prefix of the index table
	} `mapstructure:"consul"`
}

// XDSConfig configures the xDS gRPC listener and reconcile loop.
type XDSConfig struct {
	Address         string          `mapstructure:"address"`           // host:port of the ADS listener
	Debounce        time.Duration   `mapstructure:"debounce"`          // quiet time that ends a burst of changes
	MaxDelay        time.Duration   `mapstructure:"max_delay"`         // longest a burst may postpone a rebuild
	NodeGrace       time.Duration   `mapstructure:"node_grace"`        // keep a departed node's snapshot this long
	MaxStreams      uint32          `mapstructure:"max_streams"`       // concurrent streams per connection
	ReadBufferSize  uint32          `mapstructure:"read_buffer_size"`  // bytes per connection; 0 = none
	WriteBufferSize uint32          `mapstructure:"write_buffer_size"` // bytes per connection while writing; 0 = 32 KiB
	MaxPendingBytes uint32          `mapstructure:"max_pending_bytes"` // encoded responses not yet written, all connections; 0 = no bound
	MaxConnections  uint32          `mapstructure:"max_connections"`   // open connections of the listener; 0 = from the file limit
	SotWFullState   bool            `mapstructure:"sotw_full_state"`   // every SotW response carries every requested resource
	ShutdownTimeout time.Duration   `mapstructure:"shutdown_timeout"`  // graceful shutdown limit, after the grace
	ShutdownGrace   time.Duration   `mapstructure:"shutdown_grace"`    // existing streams keep being served this long after SIGTERM
	Keepalive       KeepaliveConfig `mapstructure:"keepalive"`
	TLS             TLSConfig       `mapstructure:"tls"`
	Authorization   XDSAuthzConfig  `mapstructure:"authorization"`

	// HandshakeTimeout bounds a new connection's TLS handshake and HTTP/2 preface.
	HandshakeTimeout        time.Duration `mapstructure:"handshake_timeout"`
	MaxResourceNames        uint32        `mapstructure:"max_resource_names"`         // names of one type per stream; 0 = no bound
	MaxUnknownResourceNames uint32        `mapstructure:"max_unknown_resource_names"` // names not in a node's config, per node; 0 = no bound
	MaxKnownNodes           uint32        `mapstructure:"max_known_nodes"`            // connected and disconnected nodes; 0 = no cap
}

// KeepaliveConfig are the gRPC keepalive settings of the xDS listener.
type KeepaliveConfig struct {
	Time    time.Duration `mapstructure:"time"`
	Timeout time.Duration `mapstructure:"timeout"`
	MinTime time.Duration `mapstructure:"min_time"`
}

// AdminConfig configures the admin HTTP listener.
type AdminConfig struct {
	Address        string        `mapstructure:"address"`
	AllowedHosts   []string      `mapstructure:"allowed_hosts"`   // Host names answered besides localhost, IPs and the address's host
	MaxConnections uint32        `mapstructure:"max_connections"` // open connections; 0 = from the file limit
	ReadTimeout    time.Duration `mapstructure:"read_timeout"`    // whole request, headers and body
	WriteTimeout   time.Duration `mapstructure:"write_timeout"`   // whole response
	IdleTimeout    time.Duration `mapstructure:"idle_timeout"`    // idle keep-alive connection
	TLS            TLSConfig     `mapstructure:"tls"`
	TokenFile      string        `mapstructure:"token_file"`     // bearer token for /v1/*, /json, /debug/*; "" = none
	AllowInsecure  bool          `mapstructure:"allow_insecure"` // a public address without TLS and token is allowed
}

// DiscoveryConfig selects and configures the discovery source.
type DiscoveryConfig struct {
	Source string `mapstructure:"source"` // static | consul
	// MassRemovalGuard: removals of more than this fraction of a service's
	// instances are held (that service's only), and an update removing more
	// than this fraction of all instances is held whole; in (0, 1]; 1 is off.
	MassRemovalGuard float64       `mapstructure:"mass_removal_guard"`
	MassRemovalHold  time.Duration `mapstructure:"mass_removal_hold"` // how long; 0 is off
	Static           StaticConfig  `mapstructure:"static"`
	Consul           ConsulConfig  `mapstructure:"consul"`

	// MassRemovalWindow: removals add up against each service's largest
	// instance count within it; 0 compares with the last update only.
	MassRemovalWindow time.Duration `mapstructure:"mass_removal_window"`
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
	Datacenters []string      `mapstructure:"datacenters"` // local first, then failover order
	Services    []string      `mapstructure:"services"`
	Tags        []string      `mapstructure:"tags"`
	Wait        time.Duration `mapstructure:"wait"`
	MinInterval time.Duration `mapstructure:"min_interval"`
	BackoffBase time.Duration `mapstructure:"backoff_base"`
	BackoffMax  time.Duration `mapstructure:"backoff_max"`
	WarningAs   string        `mapstructure:"warning_as"`
	TokenFile   string        `mapstructure:"token_file"`
	TLS         ConsulTLS     `mapstructure:"tls"`
	// ConfigEntries: read the traffic policy config entries (package policy).
	ConfigEntries bool `mapstructure:"config_entries"`
}

// LogConfig configures logging.
type LogConfig struct {
	Level  string `mapstructure:"level"`  // debug | info | warn | error
	Format string `mapstructure:"format"` // text | json
}

// maxConsulWait is Consul's own bound of a blocking query's wait.
const maxConsulWait = 10 * time.Minute

// validate checks every key and records each problem.
func (c Config) validate(p *problems) {
	c.validateServer(p)
	c.validateSubsetting(p)
	c.validateDiscovery(p)
	c.validateServices(p)
	c.validateClusters(p)
	c.validateWeights(p)
	c.validateDrain(p)
	c.validateHA(p)
	c.validateRateLimit(p)
	c.validateListeners(p)
	c.validateSecurity(p)
	c.validateConsole(p)
	c.validateLog(p)
}

// validateServer checks the xds.* and admin.* keys.
func (c Config) validateServer(p *problems) {
	checkAddr(p, "xds.address", c.XDS.Address)
	checkAddr(p, "admin.address", c.Admin.Address)
	for _, d := range []struct {
		key string
		v   time.Duration
	}{{"xds.debounce", c.XDS.Debounce}, {"xds.max_delay", c.XDS.MaxDelay}, {"xds.node_grace", c.XDS.NodeGrace},
		{"xds.shutdown_grace", c.XDS.ShutdownGrace}, {"xds.shutdown_timeout", c.XDS.ShutdownTimeout},
		{"xds.keepalive.time", c.XDS.Keepalive.Time}, {"xds.keepalive.timeout", c.XDS.Keepalive.Timeout},
		{"xds.keepalive.min_time", c.XDS.Keepalive.MinTime}, {"subsetting.index_ttl", c.Subsetting.IndexTTL}} {
		if d.v < 0 {
			p.bad(d.key, d.v, "is negative")
		}
	}
	for _, d := range []struct {
		key string
		v   time.Duration
	}{{"admin.read_timeout", c.Admin.ReadTimeout}, {"admin.write_timeout", c.Admin.WriteTimeout}, {"admin.idle_timeout", c.Admin.IdleTimeout}} {
		if d.v <= 0 {
			p.bad(d.key, d.v, "must be positive")
		}
	}
	if c.XDS.MaxDelay > 0 && c.XDS.Debounce > c.XDS.MaxDelay {
		p.bad("xds.debounce", c.XDS.Debounce, fmt.Sprintf("is longer than xds.max_delay (%v)", formatDuration(c.XDS.MaxDelay)))
	}
	for key, n := range map[string]uint32{"xds.read_buffer_size": c.XDS.ReadBufferSize, "xds.write_buffer_size": c.XDS.WriteBufferSize} {
		if n > 1<<20 {
			p.bad(key, n, "is more than 1048576 (1 MiB): larger buffers only cost memory per node")
		}
	}
}

// validateDiscovery checks the discovery.* keys.
func (c Config) validateDiscovery(p *problems) {
	switch c.Discovery.Source {
	case "static":
		if c.Discovery.Static.PollInterval < 0 {
			p.bad("discovery.static.poll_interval", c.Discovery.Static.PollInterval, "is negative")
		}
	case "consul":
		c.validateConsul(p)
	default:
		p.bad("discovery.source", c.Discovery.Source, "is not one of static, consul")
	}
	if g := c.Discovery.MassRemovalGuard; !(g > 0 && g <= 1) {
		p.bad("discovery.mass_removal_guard", g, "is not in (0, 1] (1 turns the guard off)")
	}
	if c.Discovery.MassRemovalHold < 0 {
		p.bad("discovery.mass_removal_hold", c.Discovery.MassRemovalHold, "is negative")
	}
	if c.Discovery.MassRemovalWindow < 0 {
		p.bad("discovery.mass_removal_window", c.Discovery.MassRemovalWindow, "is negative")
	}
}

// validateServices checks each services.<name>.* policy.
func (c Config) validateServices(p *problems) {
	c.validateServicePolicy(p)
	for name, s := range c.Services {
		if _, err := envoy.ParseLBPolicy(s.LBPolicy); err != nil {
			p.bad("services."+name+".lb_policy", s.LBPolicy, "is not one of round_robin, least_request, ring_hash, random, maglev")
		}
		if a := s.Subsetting; a != string(subsetting.Classic) && a != string(subsetting.Steady) {
			p.bad("services."+name+".subsetting", a, "is not one of classic, steady")
		}
		if _, err := translate.ParseFailover(s.Locality.Failover); err != nil {
			p.bad("services."+name+".locality.failover", s.Locality.Failover, strings.TrimPrefix(err.Error(), "translate: failover: "))
		}
		if d := s.Locality.Distribute; !(d >= 0 && d < 1) {
			p.bad("services."+name+".locality.distribute", d, "is not in [0, 1)")
		}
		if u := s.UnhealthySplit; u != UnhealthySplitRedistribute && u != UnhealthySplitKeep {
			p.bad("services."+name+".unhealthy_split", u, "is not one of redistribute, keep")
		}
		if f := s.OverprovisioningFactor; f != nil && *f == 0 {
			p.bad("services."+name+".overprovisioning_factor", *f, "would make every priority take no traffic (at least 1; Envoy's default is 140)")
		}
	}
}

// validateLog checks log.level and log.format.
func (c Config) validateLog(p *problems) {
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		p.bad("log.level", c.Log.Level, "is not one of debug, info, warn, error")
	}
	if f := c.Log.Format; f != "text" && f != "json" {
		p.bad("log.format", f, "is not one of text, json")
	}
}

func (c Config) validateSubsetting(p *problems) {
	switch c.Subsetting.IndexSource {
	case xds.IndexMetadata, xds.IndexLocal, xds.IndexConsul:
	default:
		p.bad("subsetting.index_source", c.Subsetting.IndexSource, "is not one of local, consul, metadata")
	}
	switch g := c.Subsetting.GroupBy; {
	case g == xds.GroupByCluster, g == xds.GroupByNone, g == xds.GroupByZone:
	case strings.HasPrefix(g, xds.GroupByMetadata) && len(g) > len(xds.GroupByMetadata):
	default:
		p.bad("subsetting.group_by", g, "is not one of cluster, zone, none, metadata.<key>")
	}
}

func (c Config) validateConsul(p *problems) {
	cc := c.Discovery.Consul
	if err := discovery.CheckConsulAddress(cc.Address); err != nil {
		p.badKey("discovery.consul.address", err.Error())
	}
	if cc.Wait < 0 || cc.Wait > maxConsulWait {
		p.bad("discovery.consul.wait", cc.Wait, "is not in [0s, 10m]")
	}
	for _, d := range []struct {
		key string
		v   time.Duration
	}{{"discovery.consul.min_interval", cc.MinInterval}, {"discovery.consul.backoff_base", cc.BackoffBase},
		{"discovery.consul.backoff_max", cc.BackoffMax}} {
		if d.v < 0 {
			p.bad(d.key, d.v, "is negative")
		}
	}
	if cc.BackoffBase >= 0 && cc.BackoffMax >= 0 && cc.BackoffMax < cc.BackoffBase {
		p.bad("discovery.consul.backoff_max", cc.BackoffMax,
			fmt.Sprintf("is below discovery.consul.backoff_base (%v)", formatDuration(cc.BackoffBase)))
	}
	if w := cc.WarningAs; w != "healthy" && w != "degraded" {
		p.bad("discovery.consul.warning_as", w, "is not one of healthy, degraded")
	}
	for _, reason := range discovery.DatacenterProblems(cc.Datacenter, cc.Datacenters) {
		p.bad("discovery.consul.datacenters", cc.Datacenters, reason)
	}
	for key, list := range map[string][]string{"discovery.consul.services": cc.Services, "discovery.consul.tags": cc.Tags} {
		for i, s := range list {
			if strings.TrimSpace(s) == "" {
				p.bad(key, list, fmt.Sprintf("entry %d is empty", i))
			}
		}
	}
}

func validPort(port string) bool {
	n := 0
	for _, r := range port {
		if r < '0' || r > '9' || n > 65535 {
			return false
		}
		n = n*10 + int(r-'0')
	}
	return port != "" && n >= 1 && n <= 65535
}

// checkAddr checks a listen address: host:port, where the port may be 0
// (any free port) and the host empty (every interface).
func checkAddr(p *problems, key, addr string) {
	if _, port, err := net.SplitHostPort(addr); err != nil {
		p.bad(key, addr, "is not host:port")
	} else if port == "" {
		p.bad(key, addr, "has no port")
	} else if port != "0" && !validPort(port) {
		p.bad(key, addr, "has a port outside [0, 65535]")
	}
}

// datacenters is the datacenter failover order the xDS server places
// nodes by: discovery.consul.datacenters, else discovery.consul.datacenter
// alone, else none (one datacenter, unnamed).
func (c Config) datacenters() []string {
	cc := c.Discovery.Consul
	switch {
	case len(cc.Datacenters) > 0:
		return cc.Datacenters
	case cc.Datacenter != "":
		return []string{cc.Datacenter}
	}
	return nil
}

// ServerConfig is the xds.Config of c; the caller adds the logger, the
// registerer and the index table.
func (c Config) ServerConfig() xds.Config {
	return xds.Config{
		Debounce:        c.XDS.Debounce,
		MaxDelay:        c.XDS.MaxDelay,
		NodeGrace:       c.XDS.NodeGrace,
		MaxStreams:      c.XDS.MaxStreams,
		Buffers:         xds.Buffers{Read: int(c.XDS.ReadBufferSize), Write: int(c.XDS.WriteBufferSize)},
		MaxPendingBytes: int64(c.XDS.MaxPendingBytes),
		Names:           xds.NameLimits{PerStream: int(c.XDS.MaxResourceNames), UnknownPerNode: int(c.XDS.MaxUnknownResourceNames)},
		MaxKnownNodes:   int(c.XDS.MaxKnownNodes),
		SotWFullState:   c.XDS.SotWFullState,
		Keepalive: xds.Keepalive{
			Time: c.XDS.Keepalive.Time, Timeout: c.XDS.Keepalive.Timeout, MinTime: c.XDS.Keepalive.MinTime,
		},
		Settings:         c.ServiceSettings,
		Datacenters:      c.datacenters(),
		RateLimitAddress: c.RateLimit.Advertised(),
		RateLimitTLS:     c.RateLimit.EnvoyTLS(),
		Listeners:        c.XDSListeners(&problems{}),
		Authorization:    c.XDSAuthorization(),
		Subsetting: xds.SubsetConfig{
			IndexSource: c.Subsetting.IndexSource, IndexTTL: c.Subsetting.IndexTTL, GroupBy: c.Subsetting.GroupBy,
			MaxGroups: int(c.Subsetting.MaxGroups),
		},
		HandshakeTimeout: c.XDS.HandshakeTimeout,
	}
}

// RemovalGuard is the discovery.GuardConfig of c; the caller adds the
// emit function, the logger and the metrics.
func (c Config) RemovalGuard() discovery.GuardConfig {
	return discovery.GuardConfig{Fraction: c.Discovery.MassRemovalGuard, Hold: c.Discovery.MassRemovalHold,
		Window: c.Discovery.MassRemovalWindow}
}

// ConsulSource is the discovery.ConsulConfig of c; the caller adds the
// logger and the metrics.
func (c Config) ConsulSource() discovery.ConsulConfig {
	cc := c.Discovery.Consul
	return discovery.ConsulConfig{
		Address: cc.Address, Token: cc.Token, Datacenter: cc.Datacenter, Datacenters: cc.Datacenters,
		Services: cc.Services, Tags: cc.Tags, Wait: cc.Wait, MinInterval: cc.MinInterval,
		BackoffBase: cc.BackoffBase, BackoffMax: cc.BackoffMax, WarningAs: cc.WarningAs,
		TokenFile: cc.TokenFile, TLS: cc.TLS.discovery(),
	}
}
