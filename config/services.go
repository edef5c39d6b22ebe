package config

import (
	"maps"
	"strings"
	"time"

	"github.com/xds-server/xds-server/envoy"
	"github.com/xds-server/xds-server/subsetting"
	"github.com/xds-server/xds-server/translate"
)

// ServiceConfig are a service's effective settings: the built-in
// defaults, overlaid with services."*", overlaid with the service's own
// entry, key by key (sections too).
type ServiceConfig struct {
	LBPolicy           string                  `mapstructure:"lb_policy"`
	ConnectTimeout     time.Duration           `mapstructure:"connect_timeout"`
	SubsetSize         uint32                  `mapstructure:"subset_size"` // endpoints per node; 0 = all
	Subsetting         string                  `mapstructure:"subsetting"`  // classic | steady
	Protocol           string                  `mapstructure:"protocol"`    // http1 | http2 | grpc
	LocalityWeightedLB bool                    `mapstructure:"locality_weighted_lb"`
	HealthCheck        *HealthCheckConfig      `mapstructure:"health_check"`      // nil: off
	OutlierDetection   *OutlierDetectionConfig `mapstructure:"outlier_detection"` // nil: off
	CircuitBreakers    *CircuitBreakersConfig  `mapstructure:"circuit_breakers"`  // nil: Envoy's defaults
	RingHash           RingHashConfig          `mapstructure:"ring_hash"`
	Weights            ServiceWeights          `mapstructure:"weights"`
	DrainWindow        *time.Duration          `mapstructure:"drain_window"` // nil: drain.window
	Locality           LocalityConfig          `mapstructure:"locality"`
	// OverprovisioningFactor is in percent; nil: Envoy's default (140).
	OverprovisioningFactor *uint32 `mapstructure:"overprovisioning_factor"`
	// Traffic policy (see servicepolicy.go): policy.FileService.
	Subsets       map[string]SubsetConfig `mapstructure:"subsets"`
	DefaultSubset string                  `mapstructure:"default_subset"`
	Redirect      RedirectConfig          `mapstructure:"redirect"`
	HashPolicies  []HashPolicyConfig      `mapstructure:"hash_policies"`
	// UnhealthySplit: redistribute (a split's share of a target without a
	// serving endpoint goes to its other targets) or keep.
	UnhealthySplit string `mapstructure:"unhealthy_split"`
	// RetryOtherSplit: a split route's retries go to the split's other
	// targets (aggregate clusters; Envoy only).
	RetryOtherSplit bool `mapstructure:"retry_other_split"`
}

// services.<name>.unhealthy_split values.
const (
	UnhealthySplitRedistribute = "redistribute"
	UnhealthySplitKeep         = "keep"
)

// LocalityConfig are services.<name>.locality.
type LocalityConfig struct {
	Failover   []string `mapstructure:"failover"`   // zone, region, datacenter; in order
	Distribute float64  `mapstructure:"distribute"` // share kept in the node's zone, [0, 1); 0: off
	Spill      bool     `mapstructure:"spill"`      // with weights on and a failover list
}

// localityPolicy is the service's translate.LocalityPolicy (an invalid
// failover list is reported by validateServices and ignored here).
func (s ServiceConfig) localityPolicy() translate.LocalityPolicy {
	f, _ := translate.ParseFailover(s.Locality.Failover)
	return translate.LocalityPolicy{Failover: f, Distribute: s.Locality.Distribute,
		Spill: s.Locality.Spill && s.Weights.Enabled && len(f.Levels()) > 0}
}

// ServiceWeights are services.<name>.weights.
type ServiceWeights struct {
	Enabled      bool     `mapstructure:"enabled"`
	Mode         string   `mapstructure:"mode"`           // global | per_node
	Sources      []string `mapstructure:"sources"`        // orca, lrs, http
	ORCAPortMeta string   `mapstructure:"orca_port_meta"` // meta key of the ORCA port
}

// builtinServices is the tree of the per-service defaults of Keys.
func builtinServices() map[string]any {
	tree := map[string]any{}
	for _, key := range Keys {
		if rel, ok := strings.CutPrefix(key.Name, ServicePrefix); ok && key.Default != nil {
			setPath(tree, rel, key.Default)
		}
	}
	return tree
}

// resolveServices is the one resolver of per-service settings: every
// entry (and "*") over the built-in defaults, each but "*" over "*".
func resolveServices(p *problems, raw map[string]map[string]any) map[string]ServiceConfig {
	star := overlayTree(builtinServices(), raw["*"])
	out := map[string]ServiceConfig{}
	for name, own := range raw {
		tree := star
		if name != "*" {
			tree = overlayTree(star, own)
		}
		var s ServiceConfig
		if err := decodeInto(tree, &s); err != nil {
			p.badKey("services."+name, err.Error())
		}
		out[name] = s
	}
	if _, ok := out["*"]; !ok {
		var s ServiceConfig
		_ = decodeInto(star, &s)
		out["*"] = s
	}
	return out
}

// overlayTree returns base with over's keys set on top, sections merged
// key by key; neither argument is modified.
func overlayTree(base, over map[string]any) map[string]any {
	out := maps.Clone(base)
	for k, v := range over {
		sub, isMap := v.(map[string]any)
		baseSub, baseIsMap := out[k].(map[string]any)
		if isMap && baseIsMap {
			out[k] = overlayTree(baseSub, sub)
		} else if isMap {
			out[k] = overlayTree(map[string]any{}, sub)
		} else {
			out[k] = v
		}
	}
	return out
}

// Service returns the effective settings of a service (names match
// case-insensitively); a service without an entry has the "*" ones.
func (c Config) Service(name string) ServiceConfig {
	if s, ok := c.Services[strings.ToLower(name)]; ok {
		return s
	}
	return c.Services["*"]
}

// ServiceSettings converts a service's settings for the xds package.
func (c Config) ServiceSettings(name string) translate.ServiceSettings {
	s := c.Service(name)
	p, _ := envoy.ParseLBPolicy(s.LBPolicy)
	set := translate.ServiceSettings{LBPolicy: p, ConnectTimeout: s.ConnectTimeout, Subsetting: subsetting.Algorithm(s.Subsetting),
		SubsetSize: int(s.SubsetSize), Cluster: s.clusterOptions(), Locality: s.localityPolicy(),
		KeepUnhealthySplits: s.UnhealthySplit == UnhealthySplitKeep, RetryOtherSplit: s.RetryOtherSplit}
	if s.OverprovisioningFactor != nil {
		set.OverprovisioningFactor = *s.OverprovisioningFactor
	}
	if set.Locality.Distribute > 0 || set.Locality.Spill {
		set.Cluster.LocalityWeightedLB = true // Envoy honours the shares only so
		set.Cluster.NoPanic = true            // zones share priority 0: a dead zone must not put Envoy in panic
	}
	if od := &set.Cluster.OutlierDetection; od.Enabled && od.MaxEjectionPercent == 0 &&
		(len(set.Locality.Failover.Levels()) > 0 || set.Locality.Distribute > 0) {
		od.MaxEjectionPercent = 100 // Envoy's 10 ejects no host of a small cluster: a dead zone would never fail over
	}
	return set
}

// DrainWindow is a service's drain window: services.<name>.drain_window,
// else services."*".drain_window, else drain.window.
func (c Config) DrainWindow(service string) time.Duration {
	if w := c.Service(service).DrainWindow; w != nil {
		return *w
	}
	return c.Drain.Window
}

// WeightsOf returns a service's weight settings and whether weights are
// on for it.
func (c Config) WeightsOf(service string) (ServiceWeights, bool) {
	w := c.Service(service).Weights
	return w, w.Enabled
}
