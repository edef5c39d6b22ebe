package translate

import (
	"cmp"
	"fmt"
	"regexp"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/xds-server/xds-server/discovery"
	"github.com/xds-server/xds-server/envoy"
	"github.com/xds-server/xds-server/policy"
)

// plan returns the router's routes in order, then the catch-all route to
// the splitter or resolver (with the resolver's request timeout). Every
// route carries the resolver's hash policies.
func (p *policyPlan) plan() ([]envoy.PolicyRoute, error) {
	hash := hashPolicies(p.pol.Resolver)
	out := make([]envoy.PolicyRoute, 0, len(p.pol.Routes)+1)
	for i, r := range p.pol.Routes {
		pr, err := p.route(r)
		if err != nil {
			return nil, fmt.Errorf("routes[%d]: %w", i, err)
		}
		pr.HashPolicies = hash
		out = append(out, pr)
	}
	def, err := p.destination("", "")
	if err != nil {
		return nil, err
	}
	return append(out, envoy.PolicyRoute{Clusters: def, Timeout: p.resolverTimeout(), HashPolicies: hash}), nil
}

// resolverTimeout is the resolver's request timeout (0: none).
func (p *policyPlan) resolverTimeout() time.Duration {
	if r := p.pol.Resolver; r != nil {
		return r.RequestTimeout
	}
	return 0
}

// route translates one service-router route.
func (p *policyPlan) route(r policy.Route) (envoy.PolicyRoute, error) {
	d := r.Destination
	clusters, err := p.destination(d.Service, d.ServiceSubset)
	if err != nil {
		return envoy.PolicyRoute{}, err
	}
	pr := envoy.PolicyRoute{Path: r.PathExact, Prefix: r.PathPrefix, Regex: r.PathRegex, CaseInsensitive: r.CaseInsensitive,
		Methods: r.Methods, Clusters: clusters, PrefixRewrite: d.PrefixRewrite,
		Timeout: cmp.Or(d.RequestTimeout, p.resolverTimeout()), IdleTimeout: d.IdleTimeout}
	for _, h := range r.Headers {
		pr.Headers = append(pr.Headers, headerMatch(h))
	}
	for _, q := range r.QueryParams {
		pr.QueryParams = append(pr.QueryParams, envoy.QueryParamMatch{Name: q.Name, Exact: q.Exact, Regex: q.Regex,
			Present: q.Present || q.Exact == "" && q.Regex == ""})
	}
	if d.NumRetries > 0 || d.RetryOnConnectFailure || len(d.RetryOnStatusCodes) > 0 || len(d.RetryOn) > 0 {
		pr.Retry = &envoy.PolicyRetry{NumRetries: d.NumRetries, ConnectFailure: d.RetryOnConnectFailure,
			StatusCodes: d.RetryOnStatusCodes, RetryOn: d.RetryOn}
	}
	return pr, nil
}

// headerMatch translates a Consul header match; a suffix becomes a regex,
// and a match that names only the header means it is present.
func headerMatch(h api.ServiceRouteHTTPMatchHeader) envoy.HeaderMatch {
	m := envoy.HeaderMatch{Name: h.Name, Exact: h.Exact, Prefix: h.Prefix, Regex: h.Regex, Invert: h.Invert}
	if h.Suffix != "" && h.Exact == "" && h.Prefix == "" && h.Regex == "" {
		m.Regex = ".*" + regexp.QuoteMeta(h.Suffix)
	}
	if h.Present || m.Exact == "" && m.Prefix == "" && m.Regex == "" {
		present := true
		m = envoy.HeaderMatch{Name: h.Name, Present: &present, Invert: h.Invert}
	}
	return m
}

// hashPolicies are the resolver's load balancer hash policies as route
// hash policies.
func hashPolicies(r *policy.Resolver) []envoy.RouteHashPolicy {
	if r == nil || r.LoadBalancer == nil {
		return nil
	}
	var out []envoy.RouteHashPolicy
	for _, h := range r.LoadBalancer.HashPolicies {
		hp := envoy.RouteHashPolicy{SourceIP: h.SourceIP, Terminal: h.Terminal}
		switch h.Field {
		case "header":
			hp.Header = h.FieldValue
		case "cookie":
			hp.Cookie = h.FieldValue
			if c := h.CookieConfig; c != nil {
				hp.CookieTTL, hp.CookiePath = c.TTL, c.Path
			}
		case "query_parameter":
			hp.QueryParam = h.FieldValue
		}
		out = append(out, hp)
	}
	return out
}

// policyCluster is the translation input of target t of svc: the
// endpoints its subset's filter selects (the default target: the
// resolver's DefaultSubset, or every endpoint; see subsetService), and
// the resolver's connect timeout and load balancer over the service's
// settings.
func policyCluster(svc discovery.Service, set ServiceSettings, r *policy.Resolver, t Target) (envoy.Service, error) {
	var sub policy.Subset
	if r != nil {
		if name := cmp.Or(t.Subset, r.DefaultSubset); name != "" {
			var ok bool
			if sub, ok = r.Subset(name); !ok {
				return envoy.Service{}, fmt.Errorf("subset %q is not defined", name)
			}
		}
		if lb := r.LoadBalancer; lb != nil && lb.Policy != "" {
			if _, err := envoy.ParseLBPolicy(lb.Policy); err != nil {
				return envoy.Service{}, err
			}
		}
	}
	s := Service(subsetService(svc, sub, "", t.Cluster()), resolverSettings(set, r), nil)
	return s, nil
}

// Instance is what a subset filter sees of a discovered endpoint of the
// service named service.
func Instance(service string, ep discovery.Endpoint) policy.Instance {
	return policy.Instance{
		Node: policy.InstanceNode{Node: ep.Node, Datacenter: ep.Datacenter},
		Service: policy.InstanceService{ID: ep.ID, Service: service, Address: ep.Address, Port: ep.Port,
			Tags: ep.Tags, Meta: ep.Meta},
	}
}
