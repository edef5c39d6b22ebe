package config

import (
	"fmt"
	"slices"
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
	OverloadPeriod   time.Duration `mapstructure:"overload_period"`           // the guard moves at most once per this, on the period's mean
	MaxRatio         float64       `mapstructure:"max_ratio"`                 // largest/smallest weight in a service
	ORCAInterval     time.Duration `mapstructure:"orca_interval"`             // report interval asked of backends
	LRSInterval      time.Duration `mapstructure:"lrs_interval"`              // load report interval asked of clients
	PerNodeDamping   float64       `mapstructure:"per_node_damping"`          // per_node: fraction of the way to the optimum per solve
	Balance          bool          `mapstructure:"balance"`                   // global: balance the one weight set with the nodes' LRS rates
}

// weightSources are the valid services.<name>.weights.sources.
var weightSources = []string{"orca", "lrs", "http"}

// Tracker is the weights.Config of the weights section.
func (w WeightsConfig) Tracker() weights.Config {
	return weights.Config{
		Penalty: w.Penalty, BlackoutPeriod: w.BlackoutPeriod, ExpirationPeriod: w.ExpirationPeriod,
		Smoothing: w.Smoothing, OverloadThreshold: w.OverloadThresh, OverloadRecover: w.OverloadRecover,
		OverloadFactor: weights.DefaultConfig().OverloadFactor, OverloadPeriod: w.OverloadPeriod, MaxRatio: w.MaxRatio,
	}
}

// Balancer is the weights.BalanceConfig of the weights section.
func (w WeightsConfig) Balancer() weights.BalanceConfig {
	c := weights.DefaultBalanceConfig()
	c.MaxRatio = w.MaxRatio
	return c
}

// Solver is the weights.SolveConfig of the weights section.
func (w WeightsConfig) Solver() weights.SolveConfig {
	c := weights.DefaultSolveConfig()
	c.Damping, c.MaxRatio = w.PerNodeDamping, w.MaxRatio
	return c
}

// validateWeights checks the weights section and every service's weights.
func (c Config) validateWeights(p *problems) {
	w := c.Weights
	inRange := func(key string, v, lo, hi float64, loOpen bool) {
		if v < lo || v > hi || (loOpen && v == lo) {
			open := "["
			if loOpen {
				open = "("
			}
			p.bad(key, v, fmt.Sprintf("is not in %s%v, %v]", open, lo, hi))
		}
	}
	inRange("weights.error_utilization_penalty", w.Penalty, 0, weights.MaxUtilization, false)
	inRange("weights.smoothing", w.Smoothing, 0, 1, true)
	inRange("weights.overload_threshold", w.OverloadThresh, 0, weights.MaxUtilization, true)
	inRange("weights.overload_recover", w.OverloadRecover, 0, max(w.OverloadThresh, 0), true)
	inRange("weights.max_ratio", w.MaxRatio, 1, 1e6, false)
	inRange("weights.per_node_damping", w.PerNodeDamping, 0, 1, true)
	if w.BlackoutPeriod < 0 {
		p.bad("weights.blackout_period", w.BlackoutPeriod, "is negative")
	}
	if w.ExpirationPeriod <= 0 {
		p.bad("weights.expiration_period", w.ExpirationPeriod, "must be positive")
	}
	if w.OverloadPeriod <= 0 || (w.ExpirationPeriod > 0 && w.OverloadPeriod > w.ExpirationPeriod) {
		p.bad("weights.overload_period", w.OverloadPeriod, "is not in (0, weights.expiration_period]")
	}
	for _, d := range []struct {
		key string
		v   time.Duration
	}{{"weights.update_period", w.UpdatePeriod}, {"weights.min_push_interval", w.MinPushInterval},
		{"weights.orca_interval", w.ORCAInterval}, {"weights.lrs_interval", w.LRSInterval}} {
		if d.v <= 0 {
			p.bad(d.key, d.v, "must be positive")
		}
	}
	if m := w.MinChange; m < 0 || m >= 1 {
		p.bad("weights.min_change", m, "is not in [0, 1)")
	}
	for name, s := range c.Services {
		switch s.Weights.Mode {
		case "global", "per_node":
		default:
			p.bad("services."+name+".weights.mode", s.Weights.Mode, "is not one of global, per_node")
		}
		for _, src := range s.Weights.Sources {
			if !slices.Contains(weightSources, src) {
				p.bad("services."+name+".weights.sources", src, "is not one of orca, lrs, http")
			}
		}
	}
}

// WeightsPipeline converts the weights section and each service's weights
// settings into the weight pipeline's config; the caller adds the
// publisher, the gRPC server, the ORCA sink, the logger and the
// registerer.
func (c Config) WeightsPipeline() weights.PipelineConfig {
	pc := weights.PipelineConfig{
		Tracker: c.Weights.Tracker(), Solve: c.Weights.Solver(),
		Services: func(service string) weights.ServiceConfig {
			set, on := c.WeightsOf(service)
			return weights.ServiceConfig{Enabled: on, Mode: set.Mode, Sources: set.Sources, ORCAPortMeta: set.ORCAPortMeta,
				Spill: c.Service(service).localityPolicy().Spill}
		},
		UpdatePeriod: c.Weights.UpdatePeriod, MinChange: c.Weights.MinChange, MinPushInterval: c.Weights.MinPushInterval,
		ORCAInterval: c.Weights.ORCAInterval, LRSInterval: c.Weights.LRSInterval,
	}
	if c.Weights.Balance {
		b := c.Weights.Balancer()
		pc.Balance = &b
	}
	return pc
}
