package policy

import (
	"fmt"
	"maps"
	"slices"

	"github.com/hashicorp/consul/api"
)

// parseResolver reads a service-resolver entry. PrioritizeByLocality and
// Meta are ignored (xds-server always orders endpoints by locality,
// design §4; Meta is the operator's own).
func parseResolver(x *api.ServiceResolverConfigEntry) (*Resolver, *Rejection) {
	r := &Resolver{DefaultSubset: x.DefaultSubset, ConnectTimeout: x.ConnectTimeout, RequestTimeout: x.RequestTimeout}
	if x.ConnectTimeout < 0 || x.RequestTimeout < 0 {
		return nil, fieldErr("ConnectTimeout", ReasonBadValue, "negative timeout")
	}
	var rej *Rejection
	if r.Subsets, rej = parseSubsets(x.Subsets); rej != nil {
		return nil, rej
	}
	if x.DefaultSubset != "" {
		if _, ok := r.Subset(x.DefaultSubset); !ok {
			return nil, fieldErr("DefaultSubset", ReasonBadValue, "subset %q is not defined", x.DefaultSubset)
		}
	}
	if r.Redirect, rej = parseRedirect(x.Redirect); rej != nil {
		return nil, rej
	}
	if r.Failover, rej = parseFailover(x.Failover); rej != nil {
		return nil, rej
	}
	if r.LoadBalancer, rej = parseLoadBalancer(x.LoadBalancer); rej != nil {
		return nil, rej
	}
	return r, nil
}

// parseSubsets compiles each subset's filter, in name order.
func parseSubsets(in map[string]api.ServiceResolverSubset) ([]Subset, *Rejection) {
	if len(in) > MaxSubsets {
		return nil, fieldErr("Subsets", ReasonTooMany, "%d subsets, more than %d", len(in), MaxSubsets)
	}
	var out []Subset
	for _, name := range slices.Sorted(maps.Keys(in)) {
		field := fmt.Sprintf("Subsets[%s].Filter", name)
		if name == "" {
			return nil, fieldErr("Subsets", ReasonBadValue, "a subset has an empty name")
		}
		s := Subset{Name: name, OnlyPassing: in[name].OnlyPassing}
		if in[name].Filter != "" {
			f, err := CompileFilter(in[name].Filter)
			if err != nil {
				return nil, fieldErr(field, ReasonBadFilter, "%v", err)
			}
			s.Filter = f
		}
		out = append(out, s)
	}
	return out, nil
}

// parseRedirect reads a redirect within this datacenter or to another
// one; peers, sameness groups and other namespaces are not supported.
func parseRedirect(in *api.ServiceResolverRedirect) (*Redirect, *Rejection) {
	if in == nil {
		return nil, nil
	}
	if rej := checkTenancy("Redirect.", in.Namespace, in.Partition); rej != nil {
		return nil, rej
	}
	if in.Peer != "" {
		return nil, fieldErr("Redirect.Peer", ReasonUnsupported, "cluster peering is not supported")
	}
	if in.SamenessGroup != "" {
		return nil, fieldErr("Redirect.SamenessGroup", ReasonUnsupported, "sameness groups are not supported")
	}
	if in.Service == "" && in.ServiceSubset == "" && in.Datacenter == "" {
		return nil, fieldErr("Redirect", ReasonBadValue, "a redirect names no service, subset or datacenter")
	}
	return &Redirect{Service: in.Service, ServiceSubset: in.ServiceSubset, Datacenter: in.Datacenter}, nil
}

// parseFailover reads failover by service, subset and datacenters; the
// newer Targets and Policy forms are not supported yet.
func parseFailover(in map[string]api.ServiceResolverFailover) ([]Failover, *Rejection) {
	if len(in) > MaxFailovers {
		return nil, fieldErr("Failover", ReasonTooMany, "%d failover keys, more than %d", len(in), MaxFailovers)
	}
	var out []Failover
	for _, key := range slices.Sorted(maps.Keys(in)) {
		f, p := in[key], fmt.Sprintf("Failover[%s].", key)
		switch {
		case f.Namespace != "" && f.Namespace != "default":
			return nil, fieldErr(p+"Namespace", ReasonUnsupported, "only the default namespace is read")
		case len(f.Targets) > 0:
			return nil, fieldErr(p+"Targets", ReasonUnsupported, "failover targets are not supported yet; use Service, ServiceSubset, Datacenters")
		case f.Policy != nil && (f.Policy.Mode != "" || len(f.Policy.Regions) > 0):
			return nil, fieldErr(p+"Policy", ReasonUnsupported, "failover policies are not supported yet")
		case f.SamenessGroup != "":
			return nil, fieldErr(p+"SamenessGroup", ReasonUnsupported, "sameness groups are not supported")
		case len(f.Datacenters) > MaxDatacenters:
			return nil, fieldErr(p+"Datacenters", ReasonTooMany, "%d datacenters, more than %d", len(f.Datacenters), MaxDatacenters)
		case f.Service == "" && f.ServiceSubset == "" && len(f.Datacenters) == 0:
			return nil, fieldErr(p[:len(p)-1], ReasonBadValue, "a failover names no service, subset or datacenter")
		}
		out = append(out, Failover{Subset: key, Service: f.Service, ServiceSubset: f.ServiceSubset,
			Datacenters: slices.Clone(f.Datacenters)})
	}
	return out, nil
}

// lbPolicies are the load balancer policies Consul knows ("": Envoy's
// round robin).
var lbPolicies = []string{"", "round_robin", "least_request", "ring_hash", "maglev", "random"}

// hashFields are the HashPolicy fields Consul knows.
var hashFields = []string{"header", "cookie", "query_parameter"}

// parseLoadBalancer checks the policy, its config and the hash policies
// (which only ring_hash and maglev use).
func parseLoadBalancer(in *api.LoadBalancer) (*LoadBalancer, *Rejection) {
	if in == nil {
		return nil, nil
	}
	if !slices.Contains(lbPolicies, in.Policy) {
		return nil, fieldErr("LoadBalancer.Policy", ReasonBadValue, "policy %q is not one of %v", in.Policy, lbPolicies[1:])
	}
	lb := &LoadBalancer{Policy: in.Policy}
	if c := in.RingHashConfig; c != nil {
		if c.MaximumRingSize != 0 && c.MinimumRingSize > c.MaximumRingSize {
			return nil, fieldErr("LoadBalancer.RingHashConfig", ReasonBadValue, "minimum ring size above the maximum")
		}
		lb.MinimumRingSize, lb.MaximumRingSize = c.MinimumRingSize, c.MaximumRingSize
	}
	if c := in.LeastRequestConfig; c != nil {
		lb.ChoiceCount = c.ChoiceCount
	}
	if len(in.HashPolicies) > MaxHashPolicies {
		return nil, fieldErr("LoadBalancer.HashPolicies", ReasonTooMany, "%d hash policies, more than %d", len(in.HashPolicies), MaxHashPolicies)
	}
	if len(in.HashPolicies) > 0 && in.Policy != "ring_hash" && in.Policy != "maglev" {
		return nil, fieldErr("LoadBalancer.HashPolicies", ReasonBadValue, "hash policies need policy ring_hash or maglev, not %q", in.Policy)
	}
	for i, h := range in.HashPolicies {
		field := fmt.Sprintf("LoadBalancer.HashPolicies[%d]", i)
		switch {
		case h.SourceIP && h.Field != "":
			return nil, fieldErr(field, ReasonBadValue, "SourceIP and Field are exclusive")
		case !h.SourceIP && !slices.Contains(hashFields, h.Field):
			return nil, fieldErr(field+".Field", ReasonBadValue, "field %q is not one of %v", h.Field, hashFields)
		case h.Field != "" && h.FieldValue == "":
			return nil, fieldErr(field+".FieldValue", ReasonBadValue, "field %q needs a FieldValue", h.Field)
		case h.CookieConfig != nil && h.Field != "cookie":
			return nil, fieldErr(field+".CookieConfig", ReasonBadValue, "CookieConfig needs Field cookie")
		}
		lb.HashPolicies = append(lb.HashPolicies, h)
	}
	return lb, nil
}
