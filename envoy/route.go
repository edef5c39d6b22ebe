package envoy

import (
	"fmt"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// HTTPRouteConfig returns the RouteConfiguration of l, named l.Name, that
// both Envoy (through the listener's RDS) and proxyless gRPC (through the
// api_listener of the same name) fetch: one virtual host for every domain
// ("*"), l.Routes in order, and l.RateLimit's actions as the virtual
// host's rate limits.
//
// A route timeout is sent twice: as RouteAction.timeout, which Envoy
// enforces, and as max_stream_duration.max_stream_duration, which grpc-go
// (v1.85, unmarshal_rds.go) turns into the RPC's deadline; grpc-go ignores
// RouteAction.timeout. Retries are a retry_policy with num_retries; grpc-go
// honors only its gRPC status conditions and ignores per_try_timeout.
func HTTPRouteConfig(l HTTPListener) (*routev3.RouteConfiguration, error) {
	if err := l.Validate(); err != nil {
		return nil, fmt.Errorf("envoy: listener %q: %w", l.Name, err)
	}
	vh := &routev3.VirtualHost{Name: l.Name, Domains: []string{"*"}}
	for _, r := range l.Routes {
		vh.Routes = append(vh.Routes, routeProto(r))
	}
	if l.RateLimit != nil {
		vh.RateLimits = rateLimitsProto(l.RateLimit.Actions)
	}
	return validated(&routev3.RouteConfiguration{Name: l.Name, VirtualHosts: []*routev3.VirtualHost{vh}},
		"route configuration", l.Name)
}

func routeProto(r Route) *routev3.Route {
	m := &routev3.RouteMatch{}
	switch {
	case r.Prefix != "":
		m.PathSpecifier = &routev3.RouteMatch_Prefix{Prefix: r.Prefix}
	case r.Path != "":
		m.PathSpecifier = &routev3.RouteMatch_Path{Path: r.Path}
	default:
		m.PathSpecifier = &routev3.RouteMatch_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: r.Regex}}
	}
	m.Headers = headerMatchers(r.Headers)
	a := &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: r.Service}}
	if len(r.Split) > 0 {
		_ = setClusters(a, r.Split) // checked by Validate
	}
	if r.Timeout > 0 {
		a.Timeout = durationpb.New(r.Timeout)
		a.MaxStreamDuration = &routev3.RouteAction_MaxStreamDuration{MaxStreamDuration: durationpb.New(r.Timeout)}
	}
	if r.Retries > 0 {
		p := &routev3.RetryPolicy{RetryOn: r.RetryOn, NumRetries: wrapperspb.UInt32(r.Retries)}
		if p.RetryOn == "" {
			p.RetryOn = DefaultRetryOn
		}
		if r.PerTryTimeout > 0 {
			p.PerTryTimeout = durationpb.New(r.PerTryTimeout)
		}
		a.RetryPolicy = p
	}
	return &routev3.Route{Match: m, Action: &routev3.Route_Route{Route: a}}
}

// headerMatchers translates header matches into Envoy's form (string_match
// and present_match, which grpc-go also understands).
func headerMatchers(hs []HeaderMatch) []*routev3.HeaderMatcher {
	var out []*routev3.HeaderMatcher
	for _, h := range hs {
		hm := &routev3.HeaderMatcher{Name: h.Name, InvertMatch: h.Invert}
		switch {
		case h.Present != nil:
			hm.HeaderMatchSpecifier = &routev3.HeaderMatcher_PresentMatch{PresentMatch: *h.Present}
		case h.Exact != "":
			hm.HeaderMatchSpecifier = stringMatch(&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: h.Exact}})
		case h.Prefix != "":
			hm.HeaderMatchSpecifier = stringMatch(&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: h.Prefix}})
		default:
			hm.HeaderMatchSpecifier = stringMatch(&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_SafeRegex{
				SafeRegex: &matcherv3.RegexMatcher{Regex: h.Regex}}})
		}
		out = append(out, hm)
	}
	return out
}

func stringMatch(m *matcherv3.StringMatcher) *routev3.HeaderMatcher_StringMatch {
	return &routev3.HeaderMatcher_StringMatch{StringMatch: m}
}

// rateLimitsProto translates descriptors of actions into the virtual
// host's rate_limits (stage 0, which the ratelimit filter uses by default).
func rateLimitsProto(descriptors [][]RateLimitAction) []*routev3.RateLimit {
	out := make([]*routev3.RateLimit, 0, len(descriptors))
	for _, d := range descriptors {
		rl := &routev3.RateLimit{}
		for _, a := range d {
			rl.Actions = append(rl.Actions, actionProto(a))
		}
		out = append(out, rl)
	}
	return out
}

func actionProto(a RateLimitAction) *routev3.RateLimit_Action {
	switch {
	case a.RemoteAddress:
		return &routev3.RateLimit_Action{ActionSpecifier: &routev3.RateLimit_Action_RemoteAddress_{
			RemoteAddress: &routev3.RateLimit_Action_RemoteAddress{}}}
	case a.GenericKey != nil:
		return &routev3.RateLimit_Action{ActionSpecifier: &routev3.RateLimit_Action_GenericKey_{
			GenericKey: &routev3.RateLimit_Action_GenericKey{DescriptorValue: a.GenericKey.Value, DescriptorKey: a.GenericKey.DescriptorKey}}}
	case a.RequestHeaders != nil:
		r := a.RequestHeaders
		return &routev3.RateLimit_Action{ActionSpecifier: &routev3.RateLimit_Action_RequestHeaders_{
			RequestHeaders: &routev3.RateLimit_Action_RequestHeaders{HeaderName: r.HeaderName, DescriptorKey: r.DescriptorKey, SkipIfAbsent: r.SkipIfAbsent}}}
	default:
		m := a.HeaderValueMatch
		hvm := &routev3.RateLimit_Action_HeaderValueMatch{DescriptorKey: m.DescriptorKey, DescriptorValue: m.DescriptorValue,
			Headers: headerMatchers(m.Headers)}
		if m.ExpectMatch != nil {
			hvm.ExpectMatch = wrapperspb.Bool(*m.ExpectMatch)
		}
		return &routev3.RateLimit_Action{ActionSpecifier: &routev3.RateLimit_Action_HeaderValueMatch_{HeaderValueMatch: hvm}}
	}
}

// RateLimitActions reads rate_limits (as HTTPRouteConfig generates them,
// e.g. from a served RouteConfiguration's virtual host) back into actions,
// the input of Descriptors: with it a test can compute the descriptors
// Envoy sends from what xds-server actually serves. Rate limits on other
// stages, and actions or header matchers HTTPRouteConfig never generates,
// are errors.
func RateLimitActions(rls []*routev3.RateLimit) ([][]RateLimitAction, error) {
	out := make([][]RateLimitAction, 0, len(rls))
	for i, rl := range rls {
		if rl.GetStage().GetValue() != 0 || rl.GetDisableKey() != "" || rl.GetLimit() != nil {
			return nil, fmt.Errorf("envoy: rate_limits[%d]: stage, disable_key or limit set", i)
		}
		var d []RateLimitAction
		for j, a := range rl.GetActions() {
			act, err := actionFromProto(a)
			if err != nil {
				return nil, fmt.Errorf("envoy: rate_limits[%d].actions[%d]: %w", i, j, err)
			}
			d = append(d, act)
		}
		out = append(out, d)
	}
	return out, nil
}

func actionFromProto(a *routev3.RateLimit_Action) (RateLimitAction, error) {
	switch s := a.GetActionSpecifier().(type) {
	case *routev3.RateLimit_Action_RemoteAddress_:
		return RateLimitAction{RemoteAddress: true}, nil
	case *routev3.RateLimit_Action_GenericKey_:
		return RateLimitAction{GenericKey: &GenericKey{Value: s.GenericKey.GetDescriptorValue(), DescriptorKey: s.GenericKey.GetDescriptorKey()}}, nil
	case *routev3.RateLimit_Action_RequestHeaders_:
		r := s.RequestHeaders
		return RateLimitAction{RequestHeaders: &RequestHeaders{HeaderName: r.GetHeaderName(), DescriptorKey: r.GetDescriptorKey(),
			SkipIfAbsent: r.GetSkipIfAbsent()}}, nil
	case *routev3.RateLimit_Action_HeaderValueMatch_:
		m := s.HeaderValueMatch
		hs, err := headerMatchesFromProto(m.GetHeaders())
		if err != nil {
			return RateLimitAction{}, err
		}
		hvm := &HeaderValueMatch{DescriptorKey: m.GetDescriptorKey(), DescriptorValue: m.GetDescriptorValue(), Headers: hs}
		if m.GetExpectMatch() != nil {
			v := m.GetExpectMatch().GetValue()
			hvm.ExpectMatch = &v
		}
		return RateLimitAction{HeaderValueMatch: hvm}, nil
	}
	return RateLimitAction{}, fmt.Errorf("unsupported action %T", a.GetActionSpecifier())
}

func headerMatchesFromProto(hs []*routev3.HeaderMatcher) ([]HeaderMatch, error) {
	var out []HeaderMatch
	for _, h := range hs {
		m := HeaderMatch{Name: h.GetName(), Invert: h.GetInvertMatch()}
		switch s := h.GetHeaderMatchSpecifier().(type) {
		case *routev3.HeaderMatcher_PresentMatch:
			p := s.PresentMatch
			m.Present = &p
		case *routev3.HeaderMatcher_StringMatch:
			switch p := s.StringMatch.GetMatchPattern().(type) {
			case *matcherv3.StringMatcher_Exact:
				m.Exact = p.Exact
			case *matcherv3.StringMatcher_Prefix:
				m.Prefix = p.Prefix
			case *matcherv3.StringMatcher_SafeRegex:
				m.Regex = p.SafeRegex.GetRegex()
			default:
				return nil, fmt.Errorf("header %q: unsupported string matcher %T", h.GetName(), p)
			}
		default:
			return nil, fmt.Errorf("header %q: unsupported matcher %T", h.GetName(), s)
		}
		out = append(out, m)
	}
	return out, nil
}
