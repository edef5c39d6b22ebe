package main

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/xds-server/xds-server/weights"
)

// WeightsConfig configures EDS weights from utilization reports (the
// weights: section); services opt in with services.<name>.weights.enabled.
type WeightsConfig struct {
	UpdatePeriod     time.Duration `mapstructure:"update_period"`             // recompute this often
	MinChange        float64       `mapstructure:"min_change"`                // relative share change that warrants a push
	MinPushInterval  time.Duration `mapstructure:"min_push_interval"`         // at most one weight-driven push per this
	BlackoutPeriod   time.Duration `mapstructure:"blackout_period"`           // a new endpoint's reports count after this
	ExpirationPeriod time.Duration `mapstructure:"expiration_period"`         // reports older than this are ignored
	Smoothing        float64       `mapstructure:"smoothing"`                 // EWMA factor in (0, 1]; 1 = no smoothing
	Penalty          float64       `mapstructure:"error_utilization_penalty"` // eps/qps cost in utilization units
	OverloadThresh   float64       `mapstructure:"overload_threshold"`        // shed weight above this utilization
	OverloadRecover  float64       `mapstructure:"overload_recover"`          // regain it only below this
	MaxRatio         float64       `mapstructure:"max_ratio"`                 // largest/smallest weight in a service
	ORCAInterval     time.Duration `mapstructure:"orca_interval"`             // report interval asked of backends
	LRSInterval      time.Duration `mapstructure:"lrs_interval"`              // load report interval asked of clients
	PerNodeDamping   float64       `mapstructure:"per_node_damping"`          // per_node: fraction of the way to the optimum per solve
	Balance          bool          `mapstructure:"balance"`                   // global: balance the one weight set with the nodes' LRS rates
}

// ServiceWeights are the per-service weight settings (services.<name>.weights).
type ServiceWeights struct {
	Enabled      *bool    `mapstructure:"enabled"`        // nil = inherit; default false
	Mode         string   `mapstructure:"mode"`           // global or per_node
	Sources      []string `mapstructure:"sources"`        // orca, lrs, http
	ORCAPortMeta string   `mapstructure:"orca_port_meta"` // meta key holding the ORCA port (else the service port)
}

// weightSources are the valid services.<name>.weights.sources.
var weightSources = []string{"orca", "lrs", "http"}

// merge overlays own on top of w, field by field.
func (w ServiceWeights) merge(own ServiceWeights) ServiceWeights {
	if own.Enabled != nil {
		w.Enabled = own.Enabled
	}
	if own.Mode != "" {
		w.Mode = own.Mode
	}
	if own.Sources != nil {
		w.Sources = own.Sources
	}
	if own.ORCAPortMeta != "" {
		w.ORCAPortMeta = own.ORCAPortMeta
	}
	return w
}

// weightsOf returns a service's effective weight settings and whether
// weights are on for it.
func (c Config) weightsOf(service string) (ServiceWeights, bool) {
	eff := c.Services["*"].Weights
	if own, ok := c.Services[strings.ToLower(service)]; ok {
		eff = eff.merge(own.Weights)
	}
	return eff, eff.Enabled != nil && *eff.Enabled
}

func (w WeightsConfig) tracker() weights.Config {
	return weights.Config{
		Penalty: w.Penalty, BlackoutPeriod: w.BlackoutPeriod, ExpirationPeriod: w.ExpirationPeriod,
		Smoothing: w.Smoothing, OverloadThreshold: w.OverloadThresh, OverloadRecover: w.OverloadRecover,
		OverloadFactor: weights.DefaultConfig().OverloadFactor, MaxRatio: w.MaxRatio,
	}
}

func (w WeightsConfig) balancer() weights.BalanceConfig {
	c := weights.DefaultBalanceConfig()
	c.MaxRatio = w.MaxRatio
	return c
}

func (w WeightsConfig) solver() weights.SolveConfig {
	c := weights.DefaultSolveConfig()
	c.Damping, c.MaxRatio = w.PerNodeDamping, w.MaxRatio
	return c
}

// validateWeights checks the weights section and every service's weights.
func (c Config) validateWeights(bad func(key, format string, args ...any)) {
	if err := c.Weights.tracker().Validate(); err != nil {
		bad("weights", "%v", err)
	}
	for key, d := range map[string]time.Duration{"weights.update_period": c.Weights.UpdatePeriod,
		"weights.min_push_interval": c.Weights.MinPushInterval, "weights.orca_interval": c.Weights.ORCAInterval,
		"weights.lrs_interval": c.Weights.LRSInterval} {
		if d <= 0 {
			bad(key, "%v must be positive", d)
		}
	}
	if err := c.Weights.solver().Validate(); err != nil {
		bad("weights.per_node_damping", "%v", err)
	}
	if m := c.Weights.MinChange; m < 0 || m >= 1 {
		bad("weights.min_change", "%v is not in [0, 1)", m)
	}
	for name, s := range c.Services {
		w := s.Weights
		switch w.Mode {
		case "", "global", "per_node":
		default:
			bad(fmt.Sprintf("services.%s.weights.mode", name), "%q is not one of global, per_node", w.Mode)
		}
		for _, src := range w.Sources {
			if !slices.Contains(weightSources, src) {
				bad(fmt.Sprintf("services.%s.weights.sources", name), "%q is not one of orca, lrs, http", src)
			}
		}
	}
}
