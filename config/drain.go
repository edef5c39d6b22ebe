package config

import (
	"time"

	"github.com/xds-server/xds-server/drain"
)

// DrainConfig configures the lame-duck sources (the drain: section).
type DrainConfig struct {
	Window     time.Duration `mapstructure:"window"`      // departed endpoints stay DRAINING this long
	MetaKey    string        `mapstructure:"meta_key"`    // meta key whose true value drains; "" = off
	Tag        string        `mapstructure:"tag"`         // tag that drains; "" = off
	ORCAMetric string        `mapstructure:"orca_metric"` // ORCA named metric (>= 1) that drains; "" = off
}

// Drainer is the drain policy: windows per service, meta key and tag.
func (c Config) Drainer() drain.Policy {
	return drain.Policy{Window: c.DrainWindow, MetaKey: c.Drain.MetaKey, Tag: c.Drain.Tag}
}

// validateDrain checks the drain section and the services' drain windows.
func (c Config) validateDrain(p *problems) {
	if c.Drain.Window < 0 {
		p.bad("drain.window", c.Drain.Window, "is negative")
	}
	for name, s := range c.Services {
		if s.DrainWindow != nil && *s.DrainWindow < 0 {
			p.bad("services."+name+".drain_window", *s.DrainWindow, "is negative")
		}
	}
}
