package translate

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/xds-server/xds-server/discovery"
	"github.com/xds-server/xds-server/envoy"
	"github.com/xds-server/xds-server/policy"
)

// ExpandInput is a discovery snapshot and the traffic policies to serve
// it under.
type ExpandInput struct {
	Snapshot discovery.Snapshot
	Policies map[string]policy.Policy // by service; absent or default: no policy
	Settings SettingsFunc             // nil: defaults for all
	// Demanded are targets the configured listeners split to; their
	// clusters are served whatever the policies use.
	Demanded []Target
	// RouteServing, if set, is whether routes take a split's target as
	// serving, given whether it serves now (a server holds a change back
	// for a moment so that clients get it in a safe order); nil: as it
	// serves now.
	RouteServing func(cluster string, serving bool) bool
	// LocalDatacenter is the datacenter a failover to other datacenters
	// fails over from ("": the target is not restricted to one).
	LocalDatacenter string
	// Prev, if set, is the previous expansion: a target whose service
	// and subset definition (the same compiled filter) did not change
	// keeps its endpoints without evaluating the filter again.
	Prev *Expansion
}

// Expansion is a discovery snapshot as the services' traffic policies
// serve it: every (service, subset) target in use is a service of its
// own, named by its cluster ("<service>~<subset>", its subset's
// endpoints), so that subsetting, weights, localities and drains apply
// inside each target exactly as they do for a service; a service with a
// policy keeps its own name for its default target (the resolver's
// DefaultSubset, or every endpoint) and gets the routes of its policy.
type Expansion struct {
	Snapshot discovery.Snapshot
	// Routes are the routes of each service with a policy, in order (the
	// catch-all last); its RouteConfiguration is PolicyRouteConfig(name).
	Routes map[string][]envoy.PolicyRoute
	// Errors are the services whose policy cannot be served (they are
	// served as without one) and the listeners' demanded targets whose
	// subset is not defined (served empty), by service or cluster name.
	Errors map[string]error
	// Aggregates are the aggregate clusters of split routes whose retries
	// go to the split's other targets (retry_other_split): name -> its
	// clusters, the route's target first (envoy.AggregateCluster).
	Aggregates map[string][]string

	resolvers map[string]*policy.Resolver // service -> its resolver (planned services and demanded targets')
	settings  SettingsFunc
	picked    map[string]pickedTarget // cluster -> how its endpoints were picked (for the next Prev)
}

// pickedTarget is a subset's endpoints as picked from its service.
type pickedTarget struct {
	src discovery.Service
	sub policy.Subset
	out discovery.Service
}

// Parent is the service a cluster of the expansion belongs to: name
// itself unless it is a target's ("<service>~<subset>@<datacenter>").
func (e Expansion) Parent(name string) string { return targetOf(name).Service }

// Settings are the settings of each cluster of the expansion: its
// service's, with the resolver's connect timeout and load balancer.
func (e Expansion) Settings(name string) ServiceSettings {
	parent := e.Parent(name)
	set := ServiceSettings{}
	if e.settings != nil {
		set = e.settings(parent)
	}
	return resolverSettings(set, e.resolvers[parent])
}

// AggregateBreakers are the circuit breakers of aggregate cluster name
// (of Aggregates): its first child's service's (envoy.AggregateCluster).
func (e Expansion) AggregateBreakers(name string) envoy.CircuitBreakers {
	children := e.Aggregates[name]
	if len(children) == 0 {
		return envoy.CircuitBreakers{}
	}
	return e.Settings(children[0]).Cluster.CircuitBreakers
}

// Expand serves a snapshot under its traffic policies (see Expansion).
func Expand(in ExpandInput) Expansion {
	out := Expansion{Routes: map[string][]envoy.PolicyRoute{}, Errors: map[string]error{},
		Aggregates: map[string][]string{}, picked: map[string]pickedTarget{},
		resolvers: map[string]*policy.Resolver{}, settings: in.Settings}
	plans := planAll(in, out.Errors)
	want := map[Target]bool{}
	chains := map[string][]string{} // cluster -> its failover chain's clusters
	for name, p := range plans {
		out.resolvers[name] = p.pol.Resolver
		for sub := range p.own {
			want[Target{Service: name, Subset: sub}] = true
		}
		for t := range p.ext {
			want[t] = true
		}
	}
	for _, t := range in.Demanded {
		want[t] = true
	}
	for t := range maps.Clone(want) {
		chain := failoverChain(t, in.Policies, in.LocalDatacenter)
		chains[t.Cluster()] = clusters(chain)
		for _, c := range chain {
			want[c] = true
		}
	}
	chainOf := func(cluster string) []string {
		if c, ok := chains[cluster]; ok {
			return c
		}
		return []string{cluster}
	}
	out.Snapshot = expandServices(in, plans, want, &out)
	for name, p := range plans {
		var set ServiceSettings
		if in.Settings != nil {
			set = in.Settings(name)
		}
		routes := p.routes
		if !set.KeepUnhealthySplits {
			routes = redistribute(routes, out.Snapshot, in.RouteServing, chainOf)
		}
		out.Routes[name] = aggregateRoutes(routes, chainOf, set.RetryOtherSplit, out.Aggregates)
	}
	return out
}

// planAll plans the routes of every service of the snapshot with a
// routing policy; a service whose policy cannot be planned, or sends to
// a subset another service does not define, is left out with its error.
func planAll(in ExpandInput, errs map[string]error) map[string]*policyPlan {
	plans := map[string]*policyPlan{}
	for _, svc := range in.Snapshot.Services {
		pol, ok := in.Policies[svc.Name]
		if !ok || pol.Resolver == nil && pol.Splits == nil && pol.Routes == nil {
			continue
		}
		p := &policyPlan{svc: svc.Name, pol: pol, own: map[string]bool{"": true}, ext: map[Target]bool{}}
		var err error
		if p.routes, err = p.plan(); err == nil {
			err = definedTargets(p.ext, in.Policies)
		}
		if err == nil {
			err = definedFailovers(p, in.Policies)
		}
		if err != nil {
			errs[svc.Name] = fmt.Errorf("translate: service %q: %w", svc.Name, err)
			continue
		}
		plans[svc.Name] = p
	}
	return plans
}

// definedTargets checks that other services' subsets a policy sends to
// are defined by their resolvers.
func definedTargets(ext map[Target]bool, pols map[string]policy.Policy) error {
	for _, t := range slices.SortedFunc(maps.Keys(ext), compareTargets) {
		if t.Subset == "" {
			continue
		}
		r := pols[t.Service].Resolver
		if r == nil {
			return fmt.Errorf("subset %q of %s: %s has no resolver", t.Subset, t.Service, t.Service)
		}
		if _, ok := r.Subset(t.Subset); !ok {
			return fmt.Errorf("subset %q of %s is not defined", t.Subset, t.Service)
		}
	}
	return nil
}

// definedFailovers checks that the failover targets of the targets p
// sends to are defined.
func definedFailovers(p *policyPlan, pols map[string]policy.Policy) error {
	var ts []Target
	for sub := range p.own {
		ts = append(ts, Target{Service: p.svc, Subset: sub})
	}
	ts = append(ts, slices.Collect(maps.Keys(p.ext))...)
	ext := map[Target]bool{}
	for _, t := range ts {
		for _, f := range failoverChain(t, pols, "")[1:] {
			f.Datacenter = ""
			ext[f] = true
		}
	}
	if err := definedTargets(ext, pols); err != nil {
		return fmt.Errorf("failover: %w", err)
	}
	return nil
}

func compareTargets(a, b Target) int {
	return cmp.Or(strings.Compare(a.Service, b.Service), strings.Compare(a.Subset, b.Subset),
		strings.Compare(a.Datacenter, b.Datacenter))
}

// expandServices returns the snapshot's services with each planned
// service's default target, plus a service per wanted target, sorted.
func expandServices(in ExpandInput, plans map[string]*policyPlan, want map[Target]bool, out *Expansion) discovery.Snapshot {
	if len(plans) == 0 && len(want) == 0 {
		return in.Snapshot // no policy in use: every pass of a server without one comes here
	}
	have := make(map[string]bool, len(in.Snapshot.Services))
	svcs := make([]discovery.Service, 0, len(in.Snapshot.Services)+len(want))
	for _, svc := range in.Snapshot.Services {
		have[svc.Name] = true
		if p, ok := plans[svc.Name]; ok && p.pol.Resolver != nil && p.pol.Resolver.DefaultSubset != "" {
			sub, _ := p.pol.Resolver.Subset(p.pol.Resolver.DefaultSubset) // defined: checked by the plan
			svc = out.pick(in.Prev, svc, sub, "", svc.Name)
		}
		svcs = append(svcs, svc)
	}
	for _, t := range slices.SortedFunc(maps.Keys(want), compareTargets) {
		name := t.Cluster()
		if have[name] {
			continue
		}
		have[name] = true
		src, _ := in.Snapshot.Service(t.Service)
		r := in.Policies[t.Service].Resolver
		var sub policy.Subset
		if subName := cmp.Or(t.Subset, defaultSubset(r, plans[t.Service] != nil)); subName != "" {
			ok := r != nil
			if ok {
				sub, ok = r.Subset(subName)
			}
			if !ok {
				out.Errors[name] = fmt.Errorf("translate: subset %q of %s is not defined; its cluster is served empty", subName, t.Service)
				sub, src = policy.Subset{Name: subName}, discovery.Service{}
			}
		}
		if r != nil {
			out.resolvers[t.Service] = r
		}
		svcs = append(svcs, out.pick(in.Prev, src, sub, t.Datacenter, name))
	}
	slices.SortFunc(svcs, func(a, b discovery.Service) int { return strings.Compare(a.Name, b.Name) })
	return discovery.Snapshot{Services: svcs}
}

// defaultSubset is the resolver's default subset, when its service's
// policy is served.
func defaultSubset(r *policy.Resolver, planned bool) string {
	if r == nil || !planned {
		return ""
	}
	return r.DefaultSubset
}

// pick is subsetService(svc, sub, name), reused from prev when it picked
// the same from the same, and recorded.
func (e *Expansion) pick(prev *Expansion, svc discovery.Service, sub policy.Subset, dc, name string) discovery.Service {
	if prev != nil {
		if p, ok := prev.picked[name]; ok && p.sub == sub && p.src.Equal(svc) {
			e.picked[name] = p
			return p.out
		}
	}
	out := subsetService(svc, sub, dc, name)
	e.picked[name] = pickedTarget{src: svc, sub: sub, out: out}
	return out
}

// subsetService is svc's endpoints that sub's filter selects (of
// datacenter dc alone, unless ""), named name; under OnlyPassing, an
// instance with a warning is not serving.
func subsetService(svc discovery.Service, sub policy.Subset, dc, name string) discovery.Service {
	out := discovery.Service{Name: name}
	for _, ep := range svc.Endpoints {
		if dc != "" && ep.Datacenter != dc || !sub.Filter.Match(Instance(svc.Name, ep)) {
			continue
		}
		if sub.OnlyPassing && ep.Health == discovery.HealthDegraded {
			ep.Health = discovery.HealthUnhealthy
		}
		out.Endpoints = append(out.Endpoints, ep)
	}
	return out
}

// resolverSettings are set with the resolver's connect timeout and load
// balancer (a policy the resolver names that is not known is left out:
// Parse rejects it first).
func resolverSettings(set ServiceSettings, r *policy.Resolver) ServiceSettings {
	if r == nil {
		return set
	}
	set.ConnectTimeout = cmp.Or(r.ConnectTimeout, set.ConnectTimeout)
	if lb := r.LoadBalancer; lb != nil {
		if p, err := envoy.ParseLBPolicy(lb.Policy); lb.Policy != "" && err == nil {
			set.LBPolicy = p
		}
		if lb.MinimumRingSize != 0 || lb.MaximumRingSize != 0 {
			set.Cluster.RingHash = envoy.RingHashSize{Min: lb.MinimumRingSize, Max: lb.MaximumRingSize}
		}
	}
	return set
}

// redistribute gives a split's share of a target without a serving
// endpoint to the route's other targets, in proportion to their weights
// (equally when theirs are all 0), as long as one of them serves.
func redistribute(routes []envoy.PolicyRoute, snap discovery.Snapshot, hold func(string, bool) bool, chainOf func(string) []string) []envoy.PolicyRoute {
	serves := func(cluster string) bool {
		now := slices.ContainsFunc(chainOf(cluster), func(c string) bool {
			svc, _ := snap.Service(c)
			return slices.ContainsFunc(svc.Endpoints, func(ep discovery.Endpoint) bool { return ep.Health.Serving() })
		})
		if hold != nil {
			return hold(cluster, now)
		}
		return now
	}
	out := slices.Clone(routes)
	for i, r := range out {
		if len(r.Clusters) < 2 {
			continue
		}
		up, sum := 0, uint32(0)
		for _, c := range r.Clusters {
			if serves(c.Cluster) {
				up, sum = up+1, sum+c.Weight
			}
		}
		if up == 0 || up == len(r.Clusters) {
			continue
		}
		cs := make([]envoy.WeightedCluster, 0, up)
		for _, c := range r.Clusters {
			if serves(c.Cluster) {
				cs = append(cs, c)
			}
		}
		if sum == 0 {
			for k := range cs {
				cs[k].Weight = 1
			}
		}
		out[i].Clusters = cs
	}
	return out
}
