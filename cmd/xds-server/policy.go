package main

import (
	"context"
	"fmt"
	"maps"

	"github.com/xds-server/xds-server/policy"
)

// wirePolicy builds the watcher of Consul's config entries (package
// policy) on the one Consul client, with discovery.source consul and
// discovery.consul.config_entries; its metrics go on the process
// registry. The effective policies (the file's merged with the entries,
// policy.Merge) go to the xDS server now and after each change of the
// entries.
func (a *app) wirePolicy(context.Context, *closers) error {
	file := a.cfg.FilePolicies()
	cc := a.cfg.Discovery.Consul
	if a.cfg.Discovery.Source != "consul" || !cc.ConfigEntries {
		a.setPolicies(effectivePolicies(file, nil))
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
		Metrics: m, Logger: a.log.With("component", "policy"),
		OnChange: func(string, policy.Update) { a.setPolicies(effectivePolicies(file, a.pol.All())) }})
	if err == nil {
		a.setPolicies(effectivePolicies(file, nil))
	}
	return err
}

// setPolicies hands the policies to the xDS server, once it is built.
func (a *app) setPolicies(p map[string]policy.Policy) {
	if a.srv != nil {
		a.srv.SetPolicies(p)
	}
}

// effectivePolicies merges the file's policies with the config entries'
// (policy.Merge), service by service; services left with none are
// absent.
func effectivePolicies(file, entries map[string]policy.Policy) map[string]policy.Policy {
	out := make(map[string]policy.Policy, len(file)+len(entries))
	names := maps.Clone(file)
	maps.Copy(names, entries)
	for name := range names {
		f, ok := file[name]
		if !ok {
			f = policy.Policy{Service: name}
		}
		e, ok := entries[name]
		if !ok {
			e = policy.Policy{Service: name}
		}
		if p, _ := policy.Merge(f, e); !p.IsDefault() {
			out[name] = p
		}
	}
	return out
}

// startPolicy runs the watcher under l (a background loop), when wired.
func (a *app) startPolicy(l *lifecycle) {
	if a.pol == nil {
		return
	}
	l.loop(func(ctx context.Context) { _ = a.pol.Run(ctx) }) // Run returns nil when ctx ends
}
