package translate

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"

	"github.com/xds-server/xds-server/discovery"
	"github.com/xds-server/xds-server/envoy"
	"github.com/xds-server/xds-server/policy"
)

// SubsetSep joins a service and a subset into the name of the subset's
// cluster and load assignment: "<service>~<subset>". Consul service names
// are DNS labels and never hold '~'; Envoy and grpc-go take any string as
// a cluster or EDS resource name.
const SubsetSep = envoy.SubsetSep

// Target is one (service, subset) a policy sends traffic to. Subset ""
// is the service's default target: its resolver's DefaultSubset, or every
// instance; its cluster is named after the service alone, as without a
// policy.
type Target struct {
	Service, Subset string
	Datacenter      string // "": every datacenter read; else that one's endpoints alone
}

// Cluster is the target's cluster and load assignment name:
// "<service>[~<subset>][@<datacenter>]".
func (t Target) Cluster() string {
	name := envoy.TargetCluster(t.Service, t.Subset)
	if t.Datacenter != "" {
		name += DatacenterSep + t.Datacenter
	}
	return name
}

// PolicyResources are what a service's traffic policy adds up to: a
// cluster and load assignment per target of the service itself, the
// service's RouteConfiguration, and the targets of other services that
// the route sends to (their clusters are theirs to serve: translate them
// with PolicyService(other, ..., demanded)).
type PolicyResources struct {
	Clusters, LoadAssignments []types.Resource // by cluster name
	Route                     types.Resource   // named after the service
	Targets                   []Target         // the service's own targets, sorted
	External                  []Target         // other services' targets, sorted
}

// PolicyService translates a service under its traffic policy: the
// resolver's subsets (endpoints chosen by the subset's filter, OnlyPassing
// counting warning instances unhealthy), redirect, connect and request
// timeouts and load balancer; the splitter's weights (percent x 100, so
// 90/10 is 9000/1000); the router's routes, in order, before a catch-all
// route to the splitter or resolver. demanded are subsets other services'
// policies send to ("" the default target); the default target is always
// served. Endpoint weights are discovery's.
func PolicyService(svc discovery.Service, set ServiceSettings, pol policy.Policy, demanded []string) (PolicyResources, error) {
	out, err := policyService(svc, set, pol, demanded)
	if err != nil {
		return PolicyResources{}, fmt.Errorf("translate: service %q: %w", svc.Name, err)
	}
	return out, nil
}

func policyService(svc discovery.Service, set ServiceSettings, pol policy.Policy, demanded []string) (PolicyResources, error) {
	var out PolicyResources
	p := policyPlan{svc: svc.Name, pol: pol, own: map[string]bool{"": true}, ext: map[Target]bool{}}
	for _, sub := range demanded {
		if _, err := p.resolve(sub); err != nil {
			return out, err
		}
	}
	routes, err := p.plan()
	if err != nil {
		return out, err
	}
	if out.Route, err = envoy.PolicyRouteConfig(svc.Name, routes); err != nil {
		return out, err
	}
	for _, sub := range slices.Sorted(maps.Keys(p.own)) {
		t := Target{Service: svc.Name, Subset: sub}
		s, err := policyCluster(svc, set, pol.Resolver, t)
		if err != nil {
			return out, err
		}
		c, err := envoy.Cluster(s)
		if err != nil {
			return out, err
		}
		cla, err := envoy.LoadAssignment(s)
		if err != nil {
			return out, err
		}
		out.Clusters, out.LoadAssignments = append(out.Clusters, c), append(out.LoadAssignments, cla)
		out.Targets = append(out.Targets, t)
	}
	out.External = slices.SortedFunc(maps.Keys(p.ext), func(a, b Target) int {
		return cmp.Or(strings.Compare(a.Service, b.Service), strings.Compare(a.Subset, b.Subset))
	})
	return out, nil
}

// policyPlan resolves a policy's destinations to targets, recording the
// service's own subsets in use and other services' targets.
type policyPlan struct {
	svc string
	pol policy.Policy
	own map[string]bool
	ext map[Target]bool

	routes []envoy.PolicyRoute // what plan returned
}

// resolve returns the target of the service's subset sub ("": default),
// following the resolver's redirect.
func (p *policyPlan) resolve(sub string) (Target, error) {
	r := p.pol.Resolver
	if r != nil && r.Redirect != nil {
		rd := r.Redirect
		if rd.Datacenter != "" { // that datacenter's endpoints alone: a target of its own
			return p.other(Target{Service: cmp.Or(rd.Service, p.svc), Subset: rd.ServiceSubset, Datacenter: rd.Datacenter}), nil
		}
		if rd.Service != "" && rd.Service != p.svc {
			return p.other(Target{Service: rd.Service, Subset: rd.ServiceSubset}), nil
		}
		sub = rd.ServiceSubset
	}
	if sub != "" {
		if r == nil {
			return Target{}, fmt.Errorf("subset %q: the service has no resolver", sub)
		}
		if _, ok := r.Subset(sub); !ok {
			return Target{}, fmt.Errorf("subset %q is not defined", sub)
		}
	}
	p.own[sub] = true
	return Target{Service: p.svc, Subset: sub}, nil
}

// other records and returns a target of another service.
func (p *policyPlan) other(t Target) Target {
	p.ext[t] = true
	return t
}

// destination resolves a split's or route's (service, subset); the
// service's own default goes through its splitter when it has one.
func (p *policyPlan) destination(service, subset string) ([]envoy.WeightedCluster, error) {
	if service != "" && service != p.svc {
		return []envoy.WeightedCluster{{Cluster: p.other(Target{Service: service, Subset: subset}).Cluster(), Weight: 1}}, nil
	}
	if subset == "" && p.pol.Splits != nil {
		return p.splits()
	}
	t, err := p.resolve(subset)
	if err != nil {
		return nil, err
	}
	return []envoy.WeightedCluster{{Cluster: t.Cluster(), Weight: 1}}, nil
}

// splits resolves the splitter: weights in hundredths of a percent.
func (p *policyPlan) splits() ([]envoy.WeightedCluster, error) {
	var out []envoy.WeightedCluster
	for _, s := range p.pol.Splits {
		var t Target
		var err error
		if s.Service != "" && s.Service != p.svc {
			t = p.other(Target{Service: s.Service, Subset: s.ServiceSubset})
		} else if t, err = p.resolve(s.ServiceSubset); err != nil {
			return nil, err
		}
		w := uint32(math.Round(float64(s.Weight) * 100))
		if k := slices.IndexFunc(out, func(c envoy.WeightedCluster) bool { return c.Cluster == t.Cluster() }); k >= 0 {
			out[k].Weight += w // two splits to one target: one weighted cluster
			continue
		}
		out = append(out, envoy.WeightedCluster{Cluster: t.Cluster(), Weight: w})
	}
	return out, nil
}
