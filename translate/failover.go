package translate

import (
	"cmp"
	"slices"
	"strings"

	"github.com/xds-server/xds-server/envoy"
	"github.com/xds-server/xds-server/policy"
)

// DatacenterSep joins a target and a datacenter into the name of the
// target's cluster restricted to that datacenter's endpoints
// ("web~v2@dc2", "web@dc2"): a resolver failover's Datacenters. Consul
// names hold no '@'.
const DatacenterSep = "@"

// failoverChain is the targets t's traffic tries in order: t, then the
// failover of its resolver for its subset (or "*"; the default target's
// subset is the resolver's DefaultSubset): another service or subset,
// and with Datacenters that target in each datacenter in order, t itself
// then restricted to local (when known). A target without a failover is
// alone.
func failoverChain(t Target, pols map[string]policy.Policy, local string) []Target {
	r := pols[t.Service].Resolver
	if r == nil || len(r.Failover) == 0 {
		return []Target{t}
	}
	key := cmp.Or(t.Subset, r.DefaultSubset)
	i := slices.IndexFunc(r.Failover, func(f policy.Failover) bool { return f.Subset == key })
	if i < 0 {
		i = slices.IndexFunc(r.Failover, func(f policy.Failover) bool { return f.Subset == "*" })
	}
	if i < 0 {
		return []Target{t}
	}
	f := r.Failover[i]
	next := t
	switch {
	case f.Service != "" && f.Service != t.Service:
		next = Target{Service: f.Service, Subset: f.ServiceSubset}
	case f.ServiceSubset != "":
		next = Target{Service: t.Service, Subset: f.ServiceSubset}
	}
	if len(f.Datacenters) == 0 {
		if next == t {
			return []Target{t}
		}
		return []Target{t, next}
	}
	first := t
	if local != "" {
		first.Datacenter = local
	}
	out := []Target{first}
	for _, dc := range f.Datacenters {
		n := next
		n.Datacenter = dc
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// clusters names the targets' clusters.
func clusters(ts []Target) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Cluster()
	}
	return out
}

// aggregateRoutes points each live (weight above 0) cluster of the
// routes at an aggregate cluster of its failover chain (chainOf) when it
// has one, and with retryOther, for a split route that retries, of its
// chain then the other targets' chains (heaviest first) with retries
// leaving the clusters already tried; the aggregates are recorded in
// aggs.
func aggregateRoutes(routes []envoy.PolicyRoute, chainOf func(string) []string, retryOther bool, aggs map[string][]string) []envoy.PolicyRoute {
	out := slices.Clone(routes)
	for i, r := range out {
		live := slices.DeleteFunc(slices.Clone(r.Clusters), func(c envoy.WeightedCluster) bool { return c.Weight == 0 })
		others := retryOther && r.Retry != nil && len(live) > 1
		slices.SortStableFunc(live, func(a, b envoy.WeightedCluster) int {
			return cmp.Or(cmp.Compare(b.Weight, a.Weight), strings.Compare(a.Cluster, b.Cluster))
		})
		cs := make([]envoy.WeightedCluster, 0, len(r.Clusters))
		changed := false
		for _, c := range r.Clusters {
			if c.Weight == 0 && len(r.Clusters) > 1 {
				cs = append(cs, c)
				continue
			}
			children := slices.Clone(chainOf(c.Cluster))
			if others {
				for _, o := range live {
					for _, ch := range chainOf(o.Cluster) {
						if !slices.Contains(children, ch) {
							children = append(children, ch)
						}
					}
				}
			}
			if len(children) < 2 {
				cs = append(cs, c)
				continue
			}
			name := envoy.AggregateName(children)
			aggs[name], changed = children, true
			cs = append(cs, envoy.WeightedCluster{Cluster: name, Weight: c.Weight})
		}
		if !changed {
			continue
		}
		out[i].Clusters = cs
		if others {
			retry := *r.Retry
			retry.OtherCluster = true
			out[i].Retry = &retry
		}
	}
	return out
}
