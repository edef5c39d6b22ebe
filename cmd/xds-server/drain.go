package main

import (
	"fmt"
	"strings"
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

// drainWindow is a service's drain window: services.<name>.drain_window,
// else services."*".drain_window, else drain.window.
func (c Config) drainWindow(service string) time.Duration {
	w := c.Drain.Window
	for _, key := range []string{"*", strings.ToLower(service)} {
		if s, ok := c.Services[key]; ok && s.DrainWindow != "" {
			if d, err := time.ParseDuration(s.DrainWindow); err == nil {
				w = d
			}
		}
	}
	return w
}

// drainPolicy converts the drain section for package drain.
func (c Config) drainPolicy() drain.Policy {
	return drain.Policy{Window: c.drainWindow, MetaKey: c.Drain.MetaKey, Tag: c.Drain.Tag}
}

// validateDrain checks the drain section and the services' drain windows.
func (c Config) validateDrain(bad func(key, format string, args ...any)) {
	if c.Drain.Window < 0 {
		bad("drain.window", "%v is negative", c.Drain.Window)
	}
	for name, s := range c.Services {
		if s.DrainWindow == "" {
			continue
		}
		if d, err := time.ParseDuration(s.DrainWindow); err != nil || d < 0 {
			bad(fmt.Sprintf("services.%s.drain_window", name), "%q is not a duration >= 0 (like 30s)", s.DrainWindow)
		}
	}
}
