package envoy

import (
	"cmp"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// PolicyRoute is one route of a service's traffic policy (a Consul
// service-router route, or the catch-all route to its splitter or
// resolver): what it matches, the clusters it sends to by weight, and how.
// At most one of Path, Prefix and Regex is set; none matches every path.
type PolicyRoute struct {
	Path, Prefix, Regex string
	CaseInsensitive     bool              // path and prefix ignore case
	Headers             []HeaderMatch     // all must match
	QueryParams         []QueryParamMatch // all must match (grpc-go skips a route that has any)
	// Methods: any of them, as one ":method" regex. grpc-go matches
	// headers against the call's metadata, which has no ":method": a route
	// with Methods never matches a proxyless gRPC call.
	Methods       []string
	Clusters      []WeightedCluster // one: the cluster; more: weighted_clusters
	PrefixRewrite string            // replaces the matched prefix
	Timeout       time.Duration     // whole request; 0: unset (see HTTPRouteConfig)
	IdleTimeout   time.Duration     // 0: unset
	Retry         *PolicyRetry      // nil: no retry policy
	HashPolicies  []RouteHashPolicy // used by ring_hash and maglev clusters
}

// SubsetSep joins a service and a subset into the name of the subset's
// cluster and load assignment: "<service>~<subset>". Consul service names
// are DNS labels and never hold '~'; Envoy and grpc-go take any string as
// a cluster or EDS resource name.
const SubsetSep = "~"

// TargetCluster is the name of the cluster of service's subset:
// "<service>~<subset>", or "<service>" for subset "" (the service's
// default target, named as without a policy).
func TargetCluster(service, subset string) string {
	if subset == "" {
		return service
	}
	return service + SubsetSep + subset
}

// WeightedCluster is one cluster of a route with its weight. Weights are
// relative: Envoy and grpc-go both pick a cluster with probability
// weight / sum of weights (total_weight, deprecated, is not sent). A
// weight of 0 is left out of weighted_clusters (grpc-go skips it too, and
// NACKs a route whose weights sum to 0 or above MaxUint32); at least one
// weight must be above 0.
type WeightedCluster struct {
	Cluster string
	Weight  uint32
}

// QueryParamMatch matches one query parameter; exactly one of Exact, Regex
// and Present is set.
type QueryParamMatch struct {
	Name, Exact, Regex string
	Present            bool
}

// PolicyRetry is a route's retry policy. NumRetries 0 leaves num_retries
// unset (Envoy's and grpc-go's default, 1). grpc-go (v1.85,
// generateRetryConfig) honors only the gRPC conditions of retry_on
// (cancelled, deadline-exceeded, internal, resource-exhausted,
// unavailable): a policy of only ConnectFailure and StatusCodes retries
// nothing for proxyless gRPC.
type PolicyRetry struct {
	NumRetries     uint32
	ConnectFailure bool     // retry_on connect-failure
	StatusCodes    []uint32 // retry_on retriable-status-codes with these codes
	RetryOn        []string // other retry_on conditions (see DefaultRetryOn)
	// OtherCluster sends each retry to a priority and host not tried yet:
	// with an aggregate cluster (AggregateCluster), to its next cluster.
	OtherCluster bool
}

// RouteHashPolicy is one hash policy of a route: exactly one of Header,
// Cookie, QueryParam and SourceIP. grpc-go uses only header hash policies
// and ignores the others.
type RouteHashPolicy struct {
	Header, Cookie, QueryParam string
	SourceIP                   bool
	Terminal                   bool
	CookieTTL                  time.Duration
	CookiePath                 string
}

// PolicyRouteConfig returns the RouteConfiguration named name with one
// virtual host for every domain and routes in order: the first that
// matches wins. A route timeout is sent as timeout and as
// max_stream_duration, as HTTPRouteConfig does.
func PolicyRouteConfig(name string, routes []PolicyRoute) (*routev3.RouteConfiguration, error) {
	if name == "" {
		return nil, errors.New("envoy: policy route configuration: empty name")
	}
	vh := &routev3.VirtualHost{Name: name, Domains: []string{"*"}}
	for i, r := range routes {
		pr, err := policyRouteProto(r)
		if err != nil {
			return nil, fmt.Errorf("envoy: route configuration %q: routes[%d]: %w", name, i, err)
		}
		vh.Routes = append(vh.Routes, pr)
	}
	return validated(&routev3.RouteConfiguration{Name: name, VirtualHosts: []*routev3.VirtualHost{vh}},
		"route configuration", name)
}

func policyRouteProto(r PolicyRoute) (*routev3.Route, error) {
	m, err := policyMatch(r)
	if err != nil {
		return nil, err
	}
	a, err := policyAction(r)
	if err != nil {
		return nil, err
	}
	return &routev3.Route{Match: m, Action: &routev3.Route_Route{Route: a}}, nil
}

// policyMatch builds the route match; methods become one ":method" regex,
// as Consul does.
func policyMatch(r PolicyRoute) (*routev3.RouteMatch, error) {
	m := &routev3.RouteMatch{}
	switch {
	case r.Path != "":
		m.PathSpecifier = &routev3.RouteMatch_Path{Path: r.Path}
	case r.Regex != "":
		if _, err := regexp.Compile(r.Regex); err != nil {
			return nil, fmt.Errorf("path regex: %w", err)
		}
		m.PathSpecifier = &routev3.RouteMatch_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: r.Regex}}
	default:
		m.PathSpecifier = &routev3.RouteMatch_Prefix{Prefix: cmp.Or(r.Prefix, "/")}
	}
	if r.CaseInsensitive {
		m.CaseSensitive = wrapperspb.Bool(false)
	}
	hs := r.Headers
	if len(r.Methods) > 0 {
		hs = append(hs[:len(hs):len(hs)], HeaderMatch{Name: ":method", Regex: strings.Join(r.Methods, "|")})
	}
	for i, h := range hs {
		var errs []error
		validateHeader(fmt.Sprintf("headers[%d]", i), h, func(f, format string, a ...any) {
			errs = append(errs, fmt.Errorf("%s: %s", f, fmt.Sprintf(format, a...)))
		})
		if err := errors.Join(errs...); err != nil {
			return nil, err
		}
	}
	m.Headers = headerMatchers(hs)
	for _, q := range r.QueryParams {
		qm := &routev3.QueryParameterMatcher{Name: q.Name}
		switch {
		case q.Present:
			qm.QueryParameterMatchSpecifier = &routev3.QueryParameterMatcher_PresentMatch{PresentMatch: true}
		case q.Regex != "":
			qm.QueryParameterMatchSpecifier = &routev3.QueryParameterMatcher_StringMatch{StringMatch: &matcherv3.StringMatcher{
				MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: q.Regex}}}}
		default:
			qm.QueryParameterMatchSpecifier = &routev3.QueryParameterMatcher_StringMatch{StringMatch: &matcherv3.StringMatcher{
				MatchPattern: &matcherv3.StringMatcher_Exact{Exact: q.Exact}}}
		}
		m.QueryParameters = append(m.QueryParameters, qm)
	}
	return m, nil
}

// policyAction builds the route action: cluster or weighted clusters,
// rewrite, timeouts, retries and hash policies.
func policyAction(r PolicyRoute) (*routev3.RouteAction, error) {
	a := &routev3.RouteAction{}
	if err := setClusters(a, r.Clusters); err != nil {
		return nil, err
	}
	a.PrefixRewrite = r.PrefixRewrite
	if r.Timeout < 0 || r.IdleTimeout < 0 {
		return nil, errors.New("negative timeout")
	}
	if r.Timeout > 0 {
		a.Timeout = durationpb.New(r.Timeout)
		a.MaxStreamDuration = &routev3.RouteAction_MaxStreamDuration{MaxStreamDuration: durationpb.New(r.Timeout)}
	}
	if r.IdleTimeout > 0 {
		a.IdleTimeout = durationpb.New(r.IdleTimeout)
	}
	var err error
	if a.RetryPolicy, err = retryProto(r.Retry); err != nil {
		return nil, err
	}
	for _, h := range r.HashPolicies {
		a.HashPolicy = append(a.HashPolicy, hashPolicyProto(h))
	}
	return a, nil
}

// setClusters sets a's cluster specifier: the cluster of a single
// WeightedCluster (whatever its weight), else weighted_clusters of those
// with a weight above 0 (the cluster alone when one is left).
func setClusters(a *routev3.RouteAction, cs []WeightedCluster) error {
	var wcs []*routev3.WeightedCluster_ClusterWeight
	for _, c := range cs {
		if c.Cluster == "" {
			return errors.New("a cluster has an empty name")
		}
		if c.Weight > 0 {
			wcs = append(wcs, &routev3.WeightedCluster_ClusterWeight{Name: c.Cluster, Weight: wrapperspb.UInt32(c.Weight)})
		}
	}
	switch {
	case len(cs) == 1:
		a.ClusterSpecifier = &routev3.RouteAction_Cluster{Cluster: cs[0].Cluster}
	case len(wcs) == 0:
		return errors.New("no cluster with a weight above 0")
	case len(wcs) == 1:
		a.ClusterSpecifier = &routev3.RouteAction_Cluster{Cluster: wcs[0].Name}
	default:
		a.ClusterSpecifier = &routev3.RouteAction_WeightedClusters{WeightedClusters: &routev3.WeightedCluster{Clusters: wcs}}
	}
	return nil
}

// retryProto builds a retry policy the way Consul does: connect-failure,
// retriable-status-codes and the other conditions joined in retry_on;
// unlike Consul's, its retries leave the hosts already tried.
func retryProto(p *PolicyRetry) (*routev3.RetryPolicy, error) {
	if p == nil {
		return nil, nil
	}
	var on []string
	if p.ConnectFailure {
		on = append(on, "connect-failure")
	}
	if len(p.StatusCodes) > 0 {
		on = append(on, "retriable-status-codes")
	}
	on = append(on, p.RetryOn...)
	rp := &routev3.RetryPolicy{RetryOn: strings.Join(on, ","), RetriableStatusCodes: p.StatusCodes}
	if rp.RetryOn == "" {
		rp.RetryOn = DefaultRetryOn
	}
	for _, c := range on {
		if !slices.Contains(retryConditions, c) {
			return nil, fmt.Errorf("retry_on %q is not one of %s", c, strings.Join(retryConditions, ", "))
		}
	}
	if p.NumRetries > 0 {
		rp.NumRetries = wrapperspb.UInt32(p.NumRetries)
	}
	if err := otherHostRetry(rp); err != nil {
		return nil, err
	}
	if p.OtherCluster {
		if err := otherClusterRetry(rp); err != nil {
			return nil, err
		}
	}
	return rp, nil
}

func hashPolicyProto(h RouteHashPolicy) *routev3.RouteAction_HashPolicy {
	hp := &routev3.RouteAction_HashPolicy{Terminal: h.Terminal}
	switch {
	case h.SourceIP:
		hp.PolicySpecifier = &routev3.RouteAction_HashPolicy_ConnectionProperties_{
			ConnectionProperties: &routev3.RouteAction_HashPolicy_ConnectionProperties{SourceIp: true}}
	case h.Cookie != "":
		c := &routev3.RouteAction_HashPolicy_Cookie{Name: h.Cookie, Path: h.CookiePath}
		if h.CookieTTL > 0 {
			c.Ttl = durationpb.New(h.CookieTTL)
		}
		hp.PolicySpecifier = &routev3.RouteAction_HashPolicy_Cookie_{Cookie: c}
	case h.QueryParam != "":
		hp.PolicySpecifier = &routev3.RouteAction_HashPolicy_QueryParameter_{
			QueryParameter: &routev3.RouteAction_HashPolicy_QueryParameter{Name: h.QueryParam}}
	default:
		hp.PolicySpecifier = &routev3.RouteAction_HashPolicy_Header_{Header: &routev3.RouteAction_HashPolicy_Header{HeaderName: h.Header}}
	}
	return hp
}
