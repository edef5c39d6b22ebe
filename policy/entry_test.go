package policy

import (
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
)

func resolver(name string, mod func(*api.ServiceResolverConfigEntry)) *api.ServiceResolverConfigEntry {
	e := &api.ServiceResolverConfigEntry{Kind: KindResolver, Name: name, DefaultSubset: "v1", ModifyIndex: 10,
		Subsets: map[string]api.ServiceResolverSubset{
			"v1": {Filter: "Service.Meta.version == v1"},
			"v2": {Filter: "Service.Meta.version == v2", OnlyPassing: true},
		}}
	if mod != nil {
		mod(e)
	}
	return e
}

func splitter(name string, splits ...api.ServiceSplit) *api.ServiceSplitterConfigEntry {
	return &api.ServiceSplitterConfigEntry{Kind: KindSplitter, Name: name, Splits: splits, ModifyIndex: 11}
}

func router(name string, routes ...api.ServiceRoute) *api.ServiceRouterConfigEntry {
	return &api.ServiceRouterConfigEntry{Kind: KindRouter, Name: name, Routes: routes, ModifyIndex: 12}
}

func TestParseResolver(t *testing.T) {
	e, rej := Parse(resolver("web", func(r *api.ServiceResolverConfigEntry) {
		r.ConnectTimeout = 3 * time.Second
		r.Failover = map[string]api.ServiceResolverFailover{"*": {Datacenters: []string{"dc2"}}}
		r.LoadBalancer = &api.LoadBalancer{Policy: "ring_hash", RingHashConfig: &api.RingHashConfig{MinimumRingSize: 1024},
			HashPolicies: []api.HashPolicy{{Field: "header", FieldValue: "x-user"}, {SourceIP: true}}}
		r.PrioritizeByLocality = &api.ServiceResolverPrioritizeByLocality{Mode: "failover"} // ignored
		r.Meta = map[string]string{"owner": "team"}                                         // ignored
	}))
	if rej != nil {
		t.Fatalf("Parse: %v", rej)
	}
	r := e.Resolver
	if r.DefaultSubset != "v1" || len(r.Subsets) != 2 || r.Subsets[0].Name != "v1" || r.Subsets[1].Name != "v2" ||
		!r.Subsets[1].OnlyPassing || r.ConnectTimeout != 3*time.Second {
		t.Errorf("resolver = %+v", r)
	}
	if len(r.Failover) != 1 || r.Failover[0].Subset != "*" || r.Failover[0].Datacenters[0] != "dc2" {
		t.Errorf("failover = %+v", r.Failover)
	}
	if lb := r.LoadBalancer; lb.Policy != "ring_hash" || lb.MinimumRingSize != 1024 || len(lb.HashPolicies) != 2 {
		t.Errorf("load balancer = %+v", lb)
	}
	v2, _ := r.Subset("v2")
	if !v2.Filter.Match(inst("a", nil, map[string]string{"version": "v2"})) || v2.Filter.Match(inst("b", nil, nil)) {
		t.Error("subset v2's filter does not select by Service.Meta.version")
	}
	if e.Ref() != (EntryRef{Kind: KindResolver, Name: "web", ModifyIndex: 10}) {
		t.Errorf("ref = %+v", e.Ref())
	}
}

func TestParseRejects(t *testing.T) {
	many := map[string]api.ServiceResolverSubset{}
	for i := range MaxSubsets + 1 {
		many[strings.Repeat("s", i+1)] = api.ServiceResolverSubset{}
	}
	mods := &api.HTTPHeaderModifiers{Set: map[string]string{"x": "y"}}
	for name, tc := range map[string]struct {
		entry         api.ConfigEntry
		field, reason string
	}{
		"bad filter": {resolver("web", func(r *api.ServiceResolverConfigEntry) {
			r.Subsets["v2"] = api.ServiceResolverSubset{Filter: "Service.Meta.version =="}
		}), "Subsets[v2].Filter", ReasonBadFilter},
		"node meta filter": {resolver("web", func(r *api.ServiceResolverConfigEntry) {
			r.Subsets["v2"] = api.ServiceResolverSubset{Filter: "Node.Meta.rack == r1"}
		}), "Subsets[v2].Filter", ReasonBadFilter},
		"undefined default subset": {resolver("web", func(r *api.ServiceResolverConfigEntry) { r.DefaultSubset = "v9" }),
			"DefaultSubset", ReasonBadValue},
		"too many subsets": {resolver("web", func(r *api.ServiceResolverConfigEntry) { r.Subsets, r.DefaultSubset = many, "" }),
			"Subsets", ReasonTooMany},
		"redirect to a peer": {resolver("web", func(r *api.ServiceResolverConfigEntry) {
			r.Redirect = &api.ServiceResolverRedirect{Service: "api", Peer: "other"}
		}), "Redirect.Peer", ReasonUnsupported},
		"failover targets": {resolver("web", func(r *api.ServiceResolverConfigEntry) {
			r.Failover = map[string]api.ServiceResolverFailover{"v1": {Targets: []api.ServiceResolverFailoverTarget{{Service: "x"}}}}
		}), "Failover[v1].Targets", ReasonUnsupported},
		"unknown lb policy": {resolver("web", func(r *api.ServiceResolverConfigEntry) { r.LoadBalancer = &api.LoadBalancer{Policy: "fastest"} }),
			"LoadBalancer.Policy", ReasonBadValue},
		"hash policy on round robin": {resolver("web", func(r *api.ServiceResolverConfigEntry) {
			r.LoadBalancer = &api.LoadBalancer{Policy: "round_robin", HashPolicies: []api.HashPolicy{{SourceIP: true}}}
		}), "LoadBalancer.HashPolicies", ReasonBadValue},
		"namespace": {&api.ServiceConfigEntry{Kind: KindDefaults, Name: "web", Namespace: "team"}, "Namespace", ReasonUnsupported},
		"protocol":  {&api.ServiceConfigEntry{Kind: KindDefaults, Name: "web", Protocol: "udp"}, "Protocol", ReasonBadValue},
		"weights not 100": {splitter("web", api.ServiceSplit{Weight: 90, ServiceSubset: "v1"}, api.ServiceSplit{Weight: 9, ServiceSubset: "v2"}),
			"Splits", ReasonBadValue},
		"split header modifiers": {splitter("web", api.ServiceSplit{Weight: 100, RequestHeaders: mods}),
			"Splits[0].RequestHeaders", ReasonUnsupported},
		"route header modifiers": {router("web", api.ServiceRoute{Destination: &api.ServiceRouteDestination{ResponseHeaders: mods}}),
			"Routes[0].Destination.ResponseHeaders", ReasonUnsupported},
		"bad path regex": {router("web", api.ServiceRoute{Match: &api.ServiceRouteMatch{HTTP: &api.ServiceRouteHTTPMatch{PathRegex: "("}}}),
			"Routes[0].Match.HTTP.PathRegex", ReasonBadValue},
		"two path forms": {router("web", api.ServiceRoute{Match: &api.ServiceRouteMatch{HTTP: &api.ServiceRouteHTTPMatch{PathExact: "/a", PathPrefix: "/"}}}),
			"Routes[0].Match.HTTP.PathExact", ReasonBadValue},
		"bad header regex": {router("web", api.ServiceRoute{Match: &api.ServiceRouteMatch{HTTP: &api.ServiceRouteHTTPMatch{
			Header: []api.ServiceRouteHTTPMatchHeader{{Name: "x", Regex: "[a"}}}}}), "Routes[0].Match.HTTP.Header[0].Regex", ReasonBadValue},
		"empty query name": {router("web", api.ServiceRoute{Match: &api.ServiceRouteMatch{HTTP: &api.ServiceRouteHTTPMatch{
			QueryParam: []api.ServiceRouteHTTPMatchQueryParam{{Present: true}}}}}), "Routes[0].Match.HTTP.QueryParam[0].Name", ReasonBadValue},
		"bad retry status": {router("web", api.ServiceRoute{Destination: &api.ServiceRouteDestination{RetryOnStatusCodes: []uint32{42}}}),
			"Routes[0].Destination.RetryOnStatusCodes[0]", ReasonBadValue},
		"other kind": {&api.ProxyConfigEntry{Kind: api.ProxyDefaults, Name: "global"}, "Kind", ReasonBadKind},
	} {
		t.Run(name, func(t *testing.T) {
			_, rej := Parse(tc.entry)
			if rej == nil {
				t.Fatal("Parse accepted it")
			}
			if rej.Field != tc.field || rej.Reason != tc.reason || rej.Kind != tc.entry.GetKind() || rej.Name != tc.entry.GetName() {
				t.Errorf("rejection = %+v, want field %s reason %s", rej, tc.field, tc.reason)
			}
			if !strings.Contains(rej.Error(), tc.field) {
				t.Errorf("Error() = %q does not name the field", rej.Error())
			}
		})
	}
}

func TestParseSplitterAndRouter(t *testing.T) {
	e, rej := Parse(splitter("web", api.ServiceSplit{Weight: 90, ServiceSubset: "v1"}, api.ServiceSplit{Weight: 10, ServiceSubset: "v2"}))
	if rej != nil || len(e.Splits) != 2 || e.Splits[1] != (Split{Weight: 10, ServiceSubset: "v2"}) {
		t.Fatalf("splitter = %+v, %v", e.Splits, rej)
	}
	// Consul accepts a 0 weight (the end of a shift: 0/100); so do we.
	e, rej = Parse(splitter("web", api.ServiceSplit{Weight: 0, ServiceSubset: "v1"}, api.ServiceSplit{Weight: 100, ServiceSubset: "v2"}))
	if rej != nil || len(e.Splits) != 2 || e.Splits[0].Weight != 0 {
		t.Fatalf("0/100 splitter = %+v, %v", e.Splits, rej)
	}
	e, rej = Parse(router("web",
		api.ServiceRoute{Match: &api.ServiceRouteMatch{HTTP: &api.ServiceRouteHTTPMatch{
			Header: []api.ServiceRouteHTTPMatchHeader{{Name: "x-canary", Exact: "1"}}}},
			Destination: &api.ServiceRouteDestination{ServiceSubset: "v2"}},
		api.ServiceRoute{Match: &api.ServiceRouteMatch{HTTP: &api.ServiceRouteHTTPMatch{PathPrefix: "/api", Methods: []string{"GET"},
			QueryParam: []api.ServiceRouteHTTPMatchQueryParam{{Name: "debug", Present: true}}}},
			Destination: &api.ServiceRouteDestination{Service: "api", NumRetries: 3, RetryOnConnectFailure: true,
				RetryOnStatusCodes: []uint32{503}, RequestTimeout: 2 * time.Second}},
	))
	if rej != nil || len(e.Routes) != 2 {
		t.Fatalf("router = %+v, %v", e.Routes, rej)
	}
	r0, r1 := e.Routes[0], e.Routes[1]
	if r0.Headers[0].Name != "x-canary" || r0.Destination.ServiceSubset != "v2" {
		t.Errorf("route 0 = %+v", r0)
	}
	if r1.PathPrefix != "/api" || r1.Methods[0] != "GET" || !r1.QueryParams[0].Present || r1.Destination.NumRetries != 3 ||
		r1.Destination.RequestTimeout != 2*time.Second || r1.Destination.RetryOnStatusCodes[0] != 503 {
		t.Errorf("route 1 = %+v", r1)
	}
	e, rej = Parse(&api.ServiceConfigEntry{Kind: KindDefaults, Name: "web", Protocol: "http",
		MeshGateway: api.MeshGatewayConfig{Mode: api.MeshGatewayModeLocal}}) // sidecar settings: ignored
	if rej != nil || e.Protocol != "http" {
		t.Errorf("defaults = %+v, %v", e, rej)
	}
}
