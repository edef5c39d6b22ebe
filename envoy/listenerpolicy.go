package envoy

import (
	"errors"
	"fmt"
	"strings"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/proto"
)

// ApplyPolicyRoutes returns a copy of rc (a listener's RouteConfiguration,
// see HTTPRouteConfig) in which every route whose action is the single
// cluster S, with policies[S] not empty, is replaced by S's policy routes
// in order, each merged with the listener route (mergePolicyRoute): the
// listener route still decides which requests reach S, and S's policy
// decides, among those, where they go and how. Routes to other clusters,
// and split routes (weighted_clusters), are kept as they are. A policy
// route whose path cannot be narrowed to the listener route's is left
// out; when every one is, the listener route stays as it was (to S's
// default target). The result has passed ValidateAll; rc is not modified.
func ApplyPolicyRoutes(rc *routev3.RouteConfiguration, policies map[string][]PolicyRoute) (*routev3.RouteConfiguration, error) {
	if rc == nil {
		return nil, errors.New("envoy: apply policy routes: no route configuration")
	}
	out := proto.CloneOf(rc)
	for _, vh := range out.GetVirtualHosts() {
		routes := make([]*routev3.Route, 0, len(vh.GetRoutes()))
		for i, r := range vh.GetRoutes() {
			service := r.GetRoute().GetCluster()
			prs := policies[service]
			if service == "" || len(prs) == 0 {
				routes = append(routes, r)
				continue
			}
			merged, err := policyRoutesFor(r, prs)
			if err != nil {
				return nil, fmt.Errorf("envoy: route configuration %q: virtual host %q: routes[%d] to %q: %w",
					rc.GetName(), vh.GetName(), i, service, err)
			}
			if len(merged) == 0 {
				merged = append(merged, r)
			}
			routes = append(routes, merged...)
		}
		vh.Routes = routes
	}
	return validated(out, "route configuration", out.GetName())
}

// policyRoutesFor merges each policy route with lr, leaving out those
// whose path cannot be expressed within lr's.
func policyRoutesFor(lr *routev3.Route, prs []PolicyRoute) ([]*routev3.Route, error) {
	var out []*routev3.Route
	for j, p := range prs {
		m, err := mergePolicyRoute(lr, p)
		if err != nil {
			return nil, fmt.Errorf("policy routes[%d]: %w", j, err)
		}
		if m != nil {
			out = append(out, m)
		}
	}
	return out, nil
}

// mergePolicyRoute is the policy route p within the listener route lr, or
// nil when its path cannot be expressed within lr's (see mergePath).
//   - match: the path of mergePath; lr's headers and query parameters,
//     then p's (all must match); lr's other match fields;
//   - action: lr's, with p's cluster or weighted clusters, prefix
//     rewrite (lr's rewrites are dropped), and p's timeouts, retry policy
//     and hash policies where p sets them (lr's where it does not); lr's
//     rate_limits are kept;
//   - the route's other fields (typed_per_filter_config, headers to add,
//     metadata, ...) are lr's.
func mergePolicyRoute(lr *routev3.Route, p PolicyRoute) (*routev3.Route, error) {
	pr, err := policyRouteProto(p)
	if err != nil {
		return nil, err
	}
	m, rewrite, ok := mergePath(lr.GetMatch(), pr.GetMatch(), p)
	if !ok {
		return nil, nil
	}
	m.Headers = append(m.Headers, pr.GetMatch().GetHeaders()...)
	m.QueryParameters = append(m.QueryParameters, pr.GetMatch().GetQueryParameters()...)
	pa := pr.GetRoute()
	a := proto.CloneOf(lr.GetRoute())
	a.ClusterSpecifier = pa.ClusterSpecifier
	a.PrefixRewrite, a.RegexRewrite, a.PathRewritePolicy = rewrite, nil, nil
	if p.Timeout > 0 {
		a.Timeout, a.MaxStreamDuration = pa.GetTimeout(), pa.GetMaxStreamDuration()
	}
	if p.IdleTimeout > 0 {
		a.IdleTimeout = pa.GetIdleTimeout()
	}
	if p.Retry != nil {
		a.RetryPolicy = pa.GetRetryPolicy()
	}
	if len(p.HashPolicies) > 0 {
		a.HashPolicy = pa.GetHashPolicy()
	}
	out := proto.CloneOf(lr)
	out.Match, out.Action = m, &routev3.Route_Route{Route: a}
	return out, nil
}

// mergePath returns a copy of the listener route's match lm whose path
// matches what both lm's and the policy route's (pm, built from p) match,
// with p's prefix rewrite restated for that path, or false when that
// cannot be expressed:
//   - p without a path (or prefix "/"): lm's path;
//   - lm prefix "/": p's path (path, prefix or regex);
//   - p's path or prefix within lm's prefix: p's;
//   - lm's path or prefix within p's prefix: lm's;
//   - anything else (p's regex under another lm path, lm's regex under
//     a p path, disjoint paths): false.
//
// "within" honors case: a case-sensitive prefix contains only
// case-sensitive paths. A rewrite replaces the prefix matched: where lm's
// path L is kept instead of p's prefix Q, p's rewrite R becomes R +
// L[len(Q):] (not expressible for lm's regex).
func mergePath(lm, pm *routev3.RouteMatch, p PolicyRoute) (*routev3.RouteMatch, string, bool) {
	m := proto.CloneOf(lm)
	if m == nil {
		m = &routev3.RouteMatch{}
	}
	usePolicy := func() (*routev3.RouteMatch, string, bool) {
		m.PathSpecifier, m.CaseSensitive = pm.GetPathSpecifier(), pm.GetCaseSensitive()
		return m, p.PrefixRewrite, true
	}
	lSensitive, pSensitive := lm.GetCaseSensitive().GetValue() || lm.GetCaseSensitive() == nil, !p.CaseInsensitive
	lPath := lm.GetPrefix() + lm.GetPath() // at most one is set
	pPath := p.Prefix + p.Path
	switch {
	case p.Regex == "" && (pPath == "" || p.Prefix == "/"):
		return keepListener(m, lm, "/", p.PrefixRewrite)
	case lm.GetPrefix() == "/":
		return usePolicy()
	case p.Regex == "" && lm.GetPrefix() != "" && within(pPath, pSensitive, lm.GetPrefix(), lSensitive):
		return usePolicy()
	case p.Path != "" && lm.GetPath() != "" && within(p.Path, pSensitive, lm.GetPath(), lSensitive) && len(p.Path) == len(lPath):
		return usePolicy()
	case p.Prefix != "" && lPath != "" && within(lPath, lSensitive, p.Prefix, pSensitive):
		return keepListener(m, lm, p.Prefix, p.PrefixRewrite)
	}
	return nil, "", false
}

// keepListener returns m (lm's path kept) with the rewrite R of policy
// prefix q restated for lm's path: R + L[len(q):]; false for a rewrite
// under lm's regex (or another path specifier).
func keepListener(m, lm *routev3.RouteMatch, q, rewrite string) (*routev3.RouteMatch, string, bool) {
	if rewrite == "" {
		return m, "", true
	}
	l := lm.GetPrefix() + lm.GetPath()
	if l == "" || len(l) < len(q) {
		return nil, "", false
	}
	return m, rewrite + l[len(q):], true
}

// within reports whether every path that n (a prefix or an exact path,
// case-sensitive when nSensitive) matches also starts with the prefix w
// (case-sensitive when wSensitive).
func within(n string, nSensitive bool, w string, wSensitive bool) bool {
	if wSensitive {
		return nSensitive && strings.HasPrefix(n, w)
	}
	return strings.HasPrefix(strings.ToLower(n), strings.ToLower(w))
}
