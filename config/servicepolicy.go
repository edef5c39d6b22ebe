package config

import (
	"fmt"
	"maps"
	"math"
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
// service, weights > 0 (in hundredths, as served: at least 0.005)
// summing to more than 0 and at most MaxUint32 hundredths, each subset
// defined in the file, unless Consul's config entries may define it.
func (c Config) validateSplit(p *problems, at string, rc ListenerRouteConfig) {
	if len(rc.Split) == 0 {
		return
	}
	if rc.Service != "" {
		p.badKey(at, "set service or split, not both")
	}
	var sum uint64
	entries := c.entriesRead()
	for k, s := range rc.Split {
		key := fmt.Sprintf("%s.split[%d]", at, k)
		switch h := hundredths(s.Weight); {
		case !(s.Weight > 0):
			p.bad(key+".weight", s.Weight, "is not above 0")
		case h == 0:
			p.bad(key+".weight", s.Weight, "is below 0.005 (weights are served in hundredths: 90 is 9000)")
		default:
			sum += uint64(h)
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
	if sum == 0 {
		p.badKey(at+".split", "weights sum to 0")
	} else if sum > math.MaxUint32 {
		p.badKey(at+".split", fmt.Sprintf("weights sum to %.2f, above %.2f", float64(sum)/100, float64(math.MaxUint32)/100))
	}
}

// hundredths is a split weight as served: relative weights in hundredths
// (90 is 9000, 0.01 is 1), rounded; 0 for a weight not above 0, at most
// MaxUint32.
func hundredths(w float64) uint32 {
	if !(w > 0) {
		return 0
	}
	return uint32(min(math.Round(w*100), math.MaxUint32))
}

// splitClusters is a route's split as envoy serves it: the cluster of
// each (service, subset) (subset names are lower-case, as the keys of
// services.<name>.subsets and Consul's), weight in hundredths.
func splitClusters(split []RouteSplitConfig) []envoy.WeightedCluster {
	var out []envoy.WeightedCluster
	for _, s := range split {
		out = append(out, envoy.WeightedCluster{Cluster: envoy.TargetCluster(s.Service, strings.ToLower(s.Subset)),
			Weight: hundredths(s.Weight)})
	}
	return out
}

// splitField reports whether field (from envoy's Validate) is about the
// split of routes[j] (routes[j].split...), which validateSplit reports
// with the file's keys.
func splitField(lc ListenerConfig, field string) bool {
	var j int
	if _, err := fmt.Sscanf(field, "routes[%d].split", &j); err != nil || !strings.HasPrefix(field, fmt.Sprintf("routes[%d].split", j)) {
		return false
	}
	return j < len(lc.Routes) && len(lc.Routes[j].Split) > 0
}
