package main

import (
	"context"
	"fmt"

	"github.com/xds-server/xds-server/policy"
)

// wirePolicy builds the watcher of Consul's config entries (package
// policy) on the one Consul client, with discovery.source consul and
// discovery.consul.config_entries; its metrics go on the process registry.
func (a *app) wirePolicy(context.Context, *closers) error {
	cc := a.cfg.Discovery.Consul
	if a.cfg.Discovery.Source != "consul" || !cc.ConfigEntries {
		return nil
	}
	client, err := a.consul()
	if err != nil {
		return fmt.Errorf("policy: consul client: %w", err)
	}
	m, err := policy.NewMetrics(a.reg)
	if err != nil {
		return err
	}
	a.pol, err = policy.NewWatcher(policy.WatcherConfig{Client: client, Datacenter: cc.Datacenter, Wait: cc.Wait,
		MinInterval: cc.MinInterval, BackoffBase: cc.BackoffBase, BackoffMax: cc.BackoffMax,
		Metrics: m, Logger: a.log.With("component", "policy")})
	return err
}

// startPolicy runs the watcher under l (a background loop), when wired.
func (a *app) startPolicy(l *lifecycle) {
	if a.pol == nil {
		return
	}
	l.loop(func(ctx context.Context) { _ = a.pol.Run(ctx) }) // Run returns nil when ctx ends
}
