package config

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/xds-server/xds-server/envoy"
	"github.com/xds-server/xds-server/policy"
)

// SubsetConfig is services.<name>.subsets.<subset>: the instances whose
// tags and meta match filter (Consul's filter language; "" = all), only
// the passing ones with only_passing.
type SubsetConfig struct {
	Filter      string `mapstructure:"filter"`
	OnlyPassing bool   `mapstructure:"only_passing"`
}

// RedirectConfig is services.<name>.redirect: every request for the
// service goes to service (and its subset) instead.
type RedirectConfig struct {
	Service string `mapstructure:"service"`
	Subset  string `mapstructure:"subset"`
}

// HashPolicyConfig is one services.<name>.hash_policies item (for
// lb_policy ring_hash or maglev): field (header, cookie or
// query_parameter) and field_value, or source_ip.
type HashPolicyConfig struct {
	Field      string `mapstructure:"field"`
	FieldValue string `mapstructure:"field_value"`
	SourceIP   bool   `mapstructure:"source_ip"`
	Terminal   bool   `mapstructure:"terminal"`
}

// shapes of the structured per-service keys (subsets: of each subset).
var (
	subsetKeys     = leaves("filter", "only_passing")
	hashPolicyKeys = list(leaves("field", "field_value", "source_ip", "terminal"))
)

// checkStructured checks the shape of a Subsets or HashPolicies value.
func checkStructured(at string, kind Kind, v any) []FieldError {
	if v == nil {
		return nil
	}
	if kind == HashPolicies {
		return checkShape(at, v, hashPolicyKeys)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return []FieldError{{Key: at, Value: render(v), Reason: "must be a mapping of subset names to {filter, only_passing}"}}
	}
	var errs []FieldError
	for _, name := range slices.Sorted(maps.Keys(m)) {
		errs = append(errs, checkShape(at+"."+name, m[name], subsetKeys)...)
	}
	return errs
}

// fileService is the policy.FileService of s.
func (s ServiceConfig) fileService() policy.FileService {
	f := policy.FileService{DefaultSubset: s.DefaultSubset, LBPolicy: s.LBPolicy}
	if len(s.Subsets) > 0 {
		f.Subsets = map[string]policy.FileSubset{}
		for name, sub := range s.Subsets {
			f.Subsets[name] = policy.FileSubset{Filter: sub.Filter, OnlyPassing: sub.OnlyPassing}
		}
	}
	if r := s.Redirect; r.Service != "" || r.Subset != "" {
		f.Redirect = &policy.Redirect{Service: r.Service, ServiceSubset: r.Subset}
	}
	for _, h := range s.HashPolicies {
		f.HashPolicies = append(f.HashPolicies, policy.FileHashPolicy{Field: h.Field, FieldValue: h.FieldValue,
			SourceIP: h.SourceIP, Terminal: h.Terminal})
	}
	return f
}

// FilePolicy is the traffic policy the file gives a service (its
// subsets, default_subset, redirect and hash_policies, as a
// policy.Policy whose Resolver carries them; none: IsDefault). A part
// with a problem (reported by Validate) is left out.
func (c Config) FilePolicy(service string) policy.Policy {
	p, _ := policy.FromFile(service, c.Service(service).fileService())
	return p
}

// FilePolicies are the file's policies of the services.<name> entries
// (not "*") that say something, by name.
func (c Config) FilePolicies() map[string]policy.Policy {
	out := map[string]policy.Policy{}
	for name := range c.Services {
		if p := c.FilePolicy(name); name != "*" && !p.IsDefault() {
			out[name] = p
		}
	}
	return out
}

// validateServicePolicy reports the problems of every entry's traffic
// policy (see policy.FromFile) under services.<name>.<field>.
func (c Config) validateServicePolicy(p *problems) {
	for _, name := range slices.Sorted(maps.Keys(c.Services)) {
		_, err := policy.FromFile(name, c.Services[name].fileService())
		for _, e := range unjoin(err) {
			field, reason, _ := strings.Cut(e.Error(), ": ")
			p.badKey("services."+name+"."+field, reason)
		}
		c.checkRedirectTarget(p, name)
	}
}

// checkRedirectTarget checks that a redirect to another service names a
// known one, and a subset the file defines for it (unless Consul's
// config entries are read: a service-resolver may define it).
func (c Config) checkRedirectTarget(p *problems, name string) {
	r := c.Services[name].Redirect
	if r.Service == "" || strings.EqualFold(r.Service, name) || name == "*" {
		return
	}
	if known, err := c.knownServices(); err == nil && !c.openCatalog() && !known[strings.ToLower(r.Service)] {
		p.bad("services."+name+".redirect.service", r.Service, "is not a known service (known: "+strings.Join(sortedKeys(known), ", ")+")")
		return
	}
	subs := c.Service(r.Service).Subsets
	if _, ok := subs[strings.ToLower(r.Subset)]; r.Subset != "" && !ok && !c.entriesRead() {
		p.bad("services."+name+".redirect.subset", r.Subset, fmt.Sprintf("is not a subset of %s (services.%s.subsets: %s)", r.Service,
			r.Service, strings.Join(slices.Sorted(maps.Keys(subs)), ", ")))
	}
}

// entriesRead reports whether Consul's config entries are read (and may
// define subsets the file does not).
func (c Config) entriesRead() bool {
	return c.Discovery.Source == "consul" && c.Discovery.Consul.ConfigEntries
}

// RouteSplitConfig is one item of a route's split: a share of the
// route's requests for service (its subset, when set).
type RouteSplitConfig struct {
	Service string  `mapstructure:"service"`
	Subset  string  `mapstructure:"subset"`
	Weight  float64 `mapstructure:"weight"`
}

// validateSplit checks one route's split (at is its key): not with
// service, weights > 0 summing to more than 0, each subset defined in
// the file, unless Consul's config entries may define it.
func (c Config) validateSplit(p *problems, at string, rc ListenerRouteConfig) {
	if len(rc.Split) == 0 {
		return
	}
	if rc.Service != "" {
		p.badKey(at, "set service or split, not both")
	}
	sum := 0.0
	entries := c.entriesRead()
	for k, s := range rc.Split {
		key := fmt.Sprintf("%s.split[%d]", at, k)
		if !(s.Weight > 0) {
			p.bad(key+".weight", s.Weight, "is not above 0")
		} else {
			sum += s.Weight
		}
		if s.Service == "" {
			p.badKey(key+".service", "is empty")
			continue
		}
		if s.Subset == "" || entries {
			continue // a subset may be in the service's service-resolver
		}
		subs := c.Service(s.Service).Subsets
		if _, ok := subs[strings.ToLower(s.Subset)]; !ok {
			p.bad(key+".subset", s.Subset, fmt.Sprintf("is not a subset of %s (services.%s.subsets: %s)", s.Service, s.Service,
				strings.Join(slices.Sorted(maps.Keys(subs)), ", ")))
		}
	}
	if !(sum > 0) {
		p.badKey(at+".split", "weights sum to 0")
	}
	p.errs = append(p.errs, FieldError{Key: at + ".split", Warning: true,
		Reason: "not served yet: the route is left out of the listener until split routes are translated"})
}

// unsplit leaves out the routes with a split (rcs[j] is routes[j]'s
// config), which translation does not serve yet: a route without a
// cluster would make Envoy reject the whole listener.
func unsplit(routes []envoy.Route, rcs []ListenerRouteConfig) []envoy.Route {
	out := routes[:0:0]
	for j, r := range routes {
		if j >= len(rcs) || len(rcs[j].Split) == 0 {
			out = append(out, r)
		}
	}
	return out
}

// splitService reports whether field (routes[j].service, from envoy's
// Validate) is the empty service of a route with a split.
func splitService(lc ListenerConfig, field string) bool {
	var j int
	if _, err := fmt.Sscanf(field, "routes[%d].service", &j); err != nil || field != fmt.Sprintf("routes[%d].service", j) {
		return false
	}
	return j < len(lc.Routes) && len(lc.Routes[j].Split) > 0
}
