package config

import (
	"time"

	"github.com/xds-server/xds-server/console"
)

// ConsoleSection configures the web console (the console: section).
type ConsoleSection struct {
	History struct {
		Interval  time.Duration `mapstructure:"interval"`   // between two samples
		Points    uint32        `mapstructure:"points"`     // samples kept per series
		MaxSeries uint32        `mapstructure:"max_series"` // services plus endpoints kept
	} `mapstructure:"history"`
}

// ConsoleConfig is the console's config; cmd adds its sources.
func (c Config) ConsoleConfig() console.Config {
	h := c.Console.History
	return console.Config{HistoryInterval: h.Interval, HistoryPoints: int(h.Points), MaxSeries: int(h.MaxSeries)}
}

// validateConsole checks the console section.
func (c Config) validateConsole(p *problems) {
	h := c.Console.History
	if h.Interval < time.Second || h.Interval > time.Hour {
		p.bad("console.history.interval", h.Interval, "is not in [1s, 1h]")
	}
	if h.Points < 2 || h.Points > 100_000 {
		p.bad("console.history.points", h.Points, "is not in [2, 100000]")
	}
	if h.MaxSeries < 1 || h.MaxSeries > 1_000_000 {
		p.bad("console.history.max_series", h.MaxSeries, "is not in [1, 1000000]")
	}
}
