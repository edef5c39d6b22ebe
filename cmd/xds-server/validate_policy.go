package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/xds-server/xds-server/config"
	"github.com/xds-server/xds-server/policy"
)

// configEntriesKey is the key validate files config entry problems under.
const configEntriesKey = "discovery.consul.config_entries"

// checkConfigEntries reads Consul's config entries once (policy.ReadOnce)
// and lists each entry the server would reject as a warning: the server
// keeps the entry's last good version (or Consul's defaults) and reports
// it, so a bad entry does not make the file invalid. When Consul does not
// answer, that is one unchecked warning, as for the catalog.
func checkConfigEntries(cfg config.Config) config.Errors {
	if !cfg.Discovery.Consul.ConfigEntries {
		return nil
	}
	addr := cfg.Discovery.Consul.Address
	client, err := cfg.ConsulSource().ConsulClient()
	if err != nil {
		return config.Errors{{Key: configEntriesKey, Warning: true, Reason: fmt.Sprintf("not checked: Consul at %s could not be asked: %v", addr, err)}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), catalogTimeout)
	defer cancel()
	set, err := policy.ReadOnce(ctx, client, cfg.Discovery.Consul.Datacenter)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return config.Errors{{Key: configEntriesKey, Warning: true, Reason: fmt.Sprintf("not checked: Consul at %s did not answer within %v", addr, catalogTimeout)}}
	case err != nil:
		return config.Errors{{Key: configEntriesKey, Warning: true, Reason: fmt.Sprintf("not checked: Consul at %s could not be asked: %v", addr, err)}}
	}
	out := precedenceWarnings(cfg, set)
	for _, r := range set.Rejections() {
		out = append(out, config.FieldError{Key: configEntriesKey, Value: r.Kind + " " + r.Name, Warning: true,
			Reason: fmt.Sprintf("rejected at %s: %s: %s (%s); its last good version, else Consul's defaults, is used", addr, r.Field, r.Detail, r.Reason)})
	}
	return out
}

// precedenceWarnings shows the precedence rule (policy.Merge) for each
// service whose resolver settings are both in the file (its own entry or
// services."*") and in a Consul service-resolver: the entry is used, the
// file's subsets, default_subset, redirect and hash_policies are not.
func precedenceWarnings(cfg config.Config, set *policy.Set) config.Errors {
	var out config.Errors
	for _, name := range set.Services() {
		file := cfg.FilePolicy(name)
		if _, src := policy.Merge(file, set.Policy(name)); src != policy.SourceEntries || file.Resolver == nil {
			continue
		}
		key := "services." + strings.ToLower(name)
		if _, own := cfg.Services[strings.ToLower(name)]; !own {
			key = `services."*"`
		}
		out = append(out, config.FieldError{Key: key, Value: "service-resolver " + name, Warning: true,
			Reason: "Consul's service-resolver is used for " + name + " (a config entry wins over the file, kind by kind); " +
				"the file's subsets, default_subset, redirect and hash_policies are ignored for it"})
	}
	return out
}
