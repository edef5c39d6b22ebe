package policy

import (
	"fmt"
	"math"
	"regexp"
	"slices"

	"github.com/hashicorp/consul/api"
)

// parseSplitter reads a service-splitter: weights in [0, 100] summing to
// 100 (within 0.01, as Consul checks), to services and subsets of this
// datacenter. Header modifiers are not supported yet.
func parseSplitter(x *api.ServiceSplitterConfigEntry) ([]Split, *Rejection) {
	if len(x.Splits) == 0 {
		return nil, fieldErr("Splits", ReasonBadValue, "no splits")
	}
	if len(x.Splits) > MaxSplits {
		return nil, fieldErr("Splits", ReasonTooMany, "%d splits, more than %d", len(x.Splits), MaxSplits)
	}
	out := make([]Split, 0, len(x.Splits))
	var sum float64
	for i, s := range x.Splits {
		p := fmt.Sprintf("Splits[%d].", i)
		if rej := checkTenancy(p, s.Namespace, s.Partition); rej != nil {
			return nil, rej
		}
		if rej := headerMods(p, s.RequestHeaders, s.ResponseHeaders); rej != nil {
			return nil, rej
		}
		if !(s.Weight >= 0 && s.Weight <= 100) {
			return nil, fieldErr(p+"Weight", ReasonBadValue, "weight %v is not in [0, 100]", s.Weight)
		}
		sum += float64(s.Weight)
		out = append(out, Split{Weight: s.Weight, Service: s.Service, ServiceSubset: s.ServiceSubset})
	}
	if math.Abs(sum-100) > 0.01 {
		return nil, fieldErr("Splits", ReasonBadValue, "weights sum to %v, not 100", sum)
	}
	return out, nil
}

// parseRouter reads a service-router's routes, in order. A route without
// a match matches every request.
func parseRouter(x *api.ServiceRouterConfigEntry) ([]Route, *Rejection) {
	if len(x.Routes) > MaxRoutes {
		return nil, fieldErr("Routes", ReasonTooMany, "%d routes, more than %d", len(x.Routes), MaxRoutes)
	}
	out := make([]Route, 0, len(x.Routes))
	for i, in := range x.Routes {
		p := fmt.Sprintf("Routes[%d].", i)
		var r Route
		if in.Match != nil && in.Match.HTTP != nil {
			var rej *Rejection
			if r, rej = parseMatch(p+"Match.HTTP.", in.Match.HTTP); rej != nil {
				return nil, rej
			}
		}
		if d := in.Destination; d != nil {
			if rej := parseDestination(p+"Destination.", d); rej != nil {
				return nil, rej
			}
			r.Destination = Destination{Service: d.Service, ServiceSubset: d.ServiceSubset, PrefixRewrite: d.PrefixRewrite,
				RequestTimeout: d.RequestTimeout, IdleTimeout: d.IdleTimeout, NumRetries: d.NumRetries,
				RetryOnConnectFailure: d.RetryOnConnectFailure, RetryOnStatusCodes: slices.Clone(d.RetryOnStatusCodes),
				RetryOn: slices.Clone(d.RetryOn)}
		}
		out = append(out, r)
	}
	return out, nil
}

// parseMatch checks one HTTP match: at most one path form, regexes that
// compile (RE2, as Envoy's), bounded lists.
func parseMatch(p string, m *api.ServiceRouteHTTPMatch) (Route, *Rejection) {
	r := Route{PathExact: m.PathExact, PathPrefix: m.PathPrefix, PathRegex: m.PathRegex, CaseInsensitive: m.CaseInsensitive,
		Headers: slices.Clone(m.Header), QueryParams: slices.Clone(m.QueryParam), Methods: slices.Clone(m.Methods)}
	n := 0
	for _, s := range []string{m.PathExact, m.PathPrefix, m.PathRegex} {
		if s != "" {
			n++
		}
	}
	if n > 1 {
		return r, fieldErr(p+"PathExact", ReasonBadValue, "at most one of PathExact, PathPrefix, PathRegex")
	}
	if rej := checkRegex(p+"PathRegex", m.PathRegex); rej != nil {
		return r, rej
	}
	if len(m.Header) > MaxMatchItems || len(m.QueryParam) > MaxMatchItems || len(m.Methods) > MaxMatchItems {
		return r, fieldErr(p+"Header", ReasonTooMany, "more than %d headers, query parameters or methods", MaxMatchItems)
	}
	for i, h := range m.Header {
		if rej := checkNamed(fmt.Sprintf("%sHeader[%d]", p, i), "header", h.Name, h.Regex); rej != nil {
			return r, rej
		}
	}
	for i, q := range m.QueryParam {
		if rej := checkNamed(fmt.Sprintf("%sQueryParam[%d]", p, i), "query parameter", q.Name, q.Regex); rej != nil {
			return r, rej
		}
	}
	return r, nil
}

// parseDestination rejects what a destination may set but xds-server
// does not implement: other namespaces and header modifiers.
func parseDestination(p string, d *api.ServiceRouteDestination) *Rejection {
	if rej := checkTenancy(p, d.Namespace, d.Partition); rej != nil {
		return rej
	}
	if rej := headerMods(p, d.RequestHeaders, d.ResponseHeaders); rej != nil {
		return rej
	}
	if d.RequestTimeout < 0 || d.IdleTimeout < 0 {
		return fieldErr(p+"RequestTimeout", ReasonBadValue, "negative timeout")
	}
	if len(d.RetryOn) > MaxRetryItems || len(d.RetryOnStatusCodes) > MaxRetryItems {
		return fieldErr(p+"RetryOn", ReasonTooMany, "more than %d retry conditions", MaxRetryItems)
	}
	for i, c := range d.RetryOnStatusCodes {
		if c < 100 || c > 599 {
			return fieldErr(fmt.Sprintf("%sRetryOnStatusCodes[%d]", p, i), ReasonBadValue, "status %d is not in 100..599", c)
		}
	}
	return nil
}

// checkNamed checks a header or query parameter match: a name, and a
// regex that compiles.
func checkNamed(field, what, name, re string) *Rejection {
	if name == "" {
		return fieldErr(field+".Name", ReasonBadValue, "empty %s name", what)
	}
	return checkRegex(field+".Regex", re)
}

// checkRegex rejects a regex that Go's RE2 engine cannot compile.
func checkRegex(field, re string) *Rejection {
	if re == "" {
		return nil
	}
	if _, err := regexp.Compile(re); err != nil {
		return fieldErr(field, ReasonBadValue, "regex: %v", err)
	}
	return nil
}
