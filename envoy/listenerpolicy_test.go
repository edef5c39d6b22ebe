package envoy

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// to is a policy route's clusters: "web~v1" or "web~v1:90,web~v2:10".
func to(spec string) []WeightedCluster {
	var out []WeightedCluster
	for c := range strings.SplitSeq(spec, ",") {
		name, w, _ := strings.Cut(c, ":")
		var weight uint32 = 1
		if w != "" {
			fmt.Sscan(w, &weight)
		}
		out = append(out, WeightedCluster{Cluster: name, Weight: weight})
	}
	return out
}

// describe renders what a test checks of a route, in one line.
func describe(r *routev3.Route) string {
	var b strings.Builder
	m := r.GetMatch()
	switch {
	case m.GetPrefix() != "":
		b.WriteString("prefix=" + m.GetPrefix())
	case m.GetPath() != "":
		b.WriteString("path=" + m.GetPath())
	default:
		b.WriteString("regex=" + m.GetSafeRegex().GetRegex())
	}
	if m.GetCaseSensitive() != nil && !m.GetCaseSensitive().GetValue() {
		b.WriteString(" ci")
	}
	var hs []string
	for _, h := range m.GetHeaders() {
		hs = append(hs, h.GetName())
	}
	for _, q := range m.GetQueryParameters() {
		hs = append(hs, "?"+q.GetName())
	}
	if len(hs) > 0 {
		b.WriteString(" match=" + strings.Join(hs, ","))
	}
	a := r.GetRoute()
	if a.GetCluster() != "" {
		b.WriteString(" cluster=" + a.GetCluster())
	}
	var ws []string
	for _, c := range a.GetWeightedClusters().GetClusters() {
		ws = append(ws, fmt.Sprintf("%s:%d", c.GetName(), c.GetWeight().GetValue()))
	}
	if len(ws) > 0 {
		b.WriteString(" split=" + strings.Join(ws, ","))
	}
	if a.GetTimeout() != nil {
		fmt.Fprintf(&b, " timeout=%v/%v", a.GetTimeout().AsDuration(), a.GetMaxStreamDuration().GetMaxStreamDuration().AsDuration())
	}
	if a.GetIdleTimeout() != nil {
		fmt.Fprintf(&b, " idle=%v", a.GetIdleTimeout().AsDuration())
	}
	if p := a.GetRetryPolicy(); p != nil {
		fmt.Fprintf(&b, " retry=%s/%d", p.GetRetryOn(), p.GetNumRetries().GetValue())
	}
	if a.GetPrefixRewrite() != "" {
		b.WriteString(" rewrite=" + a.GetPrefixRewrite())
	}
	if n := len(a.GetHashPolicy()); n > 0 {
		fmt.Fprintf(&b, " hash=%d", n)
	}
	return b.String()
}

// TestApplyPolicyRoutes: each rule of merging a service's policy routes
// into a listener route to the service.
func TestApplyPolicyRoutes(t *testing.T) {
	canary := HeaderMatch{Name: "x-canary", Exact: "1"}
	catchAll := PolicyRoute{Clusters: to("web~v1:9000,web~v2:1000")}
	const split = " split=web~v1:9000,web~v2:1000"
	for name, tc := range map[string]struct {
		routes []Route
		policy []PolicyRoute
		want   []string
	}{
		"a service without policy is untouched": {
			routes: []Route{{Prefix: "/api", Service: "api"}},
			want:   []string{"prefix=/api cluster=api"}},
		"a policy route without path keeps the listener's": {
			routes: []Route{{Prefix: "/api", Service: "web"}, {Prefix: "/", Service: "api"}},
			policy: []PolicyRoute{{Headers: []HeaderMatch{canary}, Clusters: to("web~v2")}, catchAll},
			want:   []string{"prefix=/api match=x-canary cluster=web~v2", "prefix=/api" + split, "prefix=/ cluster=api"}},
		"a policy prefix / is no path": {
			routes: []Route{{Path: "/login", Service: "web"}},
			policy: []PolicyRoute{{Prefix: "/", Headers: []HeaderMatch{canary}, Clusters: to("web~v2")}},
			want:   []string{"path=/login match=x-canary cluster=web~v2"}},
		"listener prefix / takes the policy's path": {
			routes: []Route{{Prefix: "/", Service: "web"}},
			policy: []PolicyRoute{{Prefix: "/admin", Clusters: to("web~v2")}, {Path: "/x", Clusters: to("web~v2")},
				{Regex: "/v[0-9]+/.*", CaseInsensitive: true, Clusters: to("web~v2")}, catchAll},
			want: []string{"prefix=/admin cluster=web~v2", "path=/x cluster=web~v2", "regex=/v[0-9]+/.* ci cluster=web~v2", "prefix=/" + split}},
		"a policy path within the listener prefix is the policy's": {
			routes: []Route{{Prefix: "/api", Service: "web"}},
			policy: []PolicyRoute{{Prefix: "/api/v2", Clusters: to("web~v2")}, {Path: "/api/x", Clusters: to("web~v2")}, catchAll},
			want:   []string{"prefix=/api/v2 cluster=web~v2", "path=/api/x cluster=web~v2", "prefix=/api" + split}},
		"paths outside the listener prefix are left out": {
			routes: []Route{{Prefix: "/api", Service: "web"}},
			policy: []PolicyRoute{{Prefix: "/admin", Clusters: to("web~v2")}, {Path: "/ap", Clusters: to("web~v2")},
				{Regex: "/api/.*", Clusters: to("web~v2")}, catchAll},
			want: []string{"prefix=/api" + split}},
		"the listener's path within the policy prefix is the listener's, rewrite restated": {
			routes: []Route{{Prefix: "/api/v2", Service: "web"}, {Path: "/api/x", Service: "web"}},
			policy: []PolicyRoute{{Prefix: "/api", PrefixRewrite: "/new", Clusters: to("web~v2")}, {Prefix: "/api/v1", Clusters: to("web~v1")}},
			want:   []string{"prefix=/api/v2 cluster=web~v2 rewrite=/new/v2", "path=/api/x cluster=web~v2 rewrite=/new/x"}},
		"a rewrite of no path is a rewrite of /": {
			routes: []Route{{Prefix: "/api", Service: "web"}},
			policy: []PolicyRoute{{PrefixRewrite: "/v1/", Clusters: to("web~v1")}},
			want:   []string{"prefix=/api cluster=web~v1 rewrite=/v1/api"}},
		"listener path or regex with a policy path": {
			routes: []Route{{Path: "/healthz", Service: "web"}, {Regex: "/r/.*", Service: "web"}},
			policy: []PolicyRoute{{Path: "/healthz", Clusters: to("web~v2")}, {Path: "/other", Clusters: to("web~v2")},
				{Regex: "/h.*", Clusters: to("web~v2")}, {Prefix: "/r/", Clusters: to("web~v2")}, catchAll},
			want: []string{"path=/healthz cluster=web~v2", "path=/healthz" + split, "regex=/r/.*" + split}},
		"a rewrite under a listener regex is left out": {
			routes: []Route{{Regex: "/r/.*", Service: "web"}},
			policy: []PolicyRoute{{PrefixRewrite: "/x", Clusters: to("web~v2")}, catchAll},
			want:   []string{"regex=/r/.*" + split}},
		"case: an insensitive policy path is not within a sensitive prefix": {
			routes: []Route{{Prefix: "/api", Service: "web"}, {Prefix: "/", Service: "web"}},
			policy: []PolicyRoute{{Prefix: "/api/v2", CaseInsensitive: true, Clusters: to("web~v2")}, catchAll},
			want:   []string{"prefix=/api" + split, "prefix=/api/v2 ci cluster=web~v2", "prefix=/" + split}},
		"headers and query parameters: the listener's, then the policy's": {
			routes: []Route{{Prefix: "/", Headers: []HeaderMatch{{Name: "x-l", Exact: "1"}}, Service: "web"}},
			policy: []PolicyRoute{{Headers: []HeaderMatch{canary}, QueryParams: []QueryParamMatch{{Name: "q", Present: true}},
				Methods: []string{"GET"}, Clusters: to("web~v2")}},
			want: []string{"prefix=/ match=x-l,x-canary,:method,?q cluster=web~v2"}},
		"timeouts and retries: the policy's where set, else the listener's": {
			routes: []Route{{Prefix: "/", Service: "web", Timeout: 5 * time.Second, Retries: 2, RetryOn: "5xx"}},
			policy: []PolicyRoute{
				{Path: "/a", Clusters: to("web~v2"), Timeout: time.Second, IdleTimeout: time.Minute,
					Retry: &PolicyRetry{NumRetries: 3, ConnectFailure: true}, HashPolicies: []RouteHashPolicy{{Header: "x-user"}}},
				{Clusters: to("web~v1")}},
			want: []string{"path=/a cluster=web~v2 timeout=1s/1s idle=1m0s retry=connect-failure/3 hash=1",
				"prefix=/ cluster=web~v1 timeout=5s/5s retry=5xx/2"}},
		"every policy route left out keeps the listener route": {
			routes: []Route{{Prefix: "/api", Service: "web"}},
			policy: []PolicyRoute{{Prefix: "/admin", Clusters: to("web~v2")}},
			want:   []string{"prefix=/api cluster=web"}},
		"a split listener route is untouched": {
			routes: []Route{{Prefix: "/", Split: to("web:1,web~v2:1")}},
			policy: []PolicyRoute{catchAll},
			want:   []string{"prefix=/ split=web:1,web~v2:1"}},
	} {
		t.Run(name, func(t *testing.T) {
			rc, err := HTTPRouteConfig(HTTPListener{Name: "ingress", Address: "0.0.0.0:10000", Routes: tc.routes})
			if err != nil {
				t.Fatal(err)
			}
			before := proto.CloneOf(rc)
			got, err := ApplyPolicyRoutes(rc, map[string][]PolicyRoute{"web": tc.policy, "other": {catchAll}})
			if err != nil {
				t.Fatal(err)
			}
			var lines []string
			for _, r := range got.GetVirtualHosts()[0].GetRoutes() {
				lines = append(lines, describe(r))
			}
			if !slices.Equal(lines, tc.want) {
				t.Errorf("routes:\n  %s\nwant:\n  %s", strings.Join(lines, "\n  "), strings.Join(tc.want, "\n  "))
			}
			if !proto.Equal(rc, before) {
				t.Error("the input was modified")
			}
		})
	}
}

// TestApplyPolicyRoutesKeeps: the listener route's rate_limits,
// typed_per_filter_config and the virtual host's rate limits are kept.
func TestApplyPolicyRoutesKeeps(t *testing.T) {
	l := HTTPListener{Name: "ingress", Address: "0.0.0.0:10000", Routes: []Route{{Prefix: "/", Service: "web"}},
		RateLimit: &RateLimit{Domain: "edge", Actions: [][]RateLimitAction{{{RemoteAddress: true}}}}}
	rc, err := HTTPRouteConfig(l)
	if err != nil {
		t.Fatal(err)
	}
	lr := rc.GetVirtualHosts()[0].GetRoutes()[0]
	lr.GetRoute().RateLimits = rateLimitsProto([][]RateLimitAction{{{GenericKey: &GenericKey{Value: "web"}}}})
	cfg, err := anypb.New(&routev3.FilterConfig{})
	if err != nil {
		t.Fatal(err)
	}
	lr.TypedPerFilterConfig = map[string]*anypb.Any{rateLimitFilterName: cfg}
	got, err := ApplyPolicyRoutes(rc, map[string][]PolicyRoute{"web": {{Path: "/a", Clusters: to("web~v2")}, {Clusters: to("web~v1")}}})
	if err != nil {
		t.Fatal(err)
	}
	vh := got.GetVirtualHosts()[0]
	if len(vh.GetRoutes()) != 2 || len(vh.GetRateLimits()) != 1 {
		t.Fatalf("virtual host %v", vh)
	}
	for i, r := range vh.GetRoutes() {
		if !proto.Equal(r.GetRoute().GetRateLimits()[0], lr.GetRoute().GetRateLimits()[0]) || len(r.GetTypedPerFilterConfig()) != 1 {
			t.Errorf("route %d: rate limits %v, typed_per_filter_config %v", i, r.GetRoute().GetRateLimits(), r.GetTypedPerFilterConfig())
		}
	}
}

// TestApplyPolicyRoutesErrors: a policy route Envoy would refuse, or no
// route configuration, is an error.
func TestApplyPolicyRoutesErrors(t *testing.T) {
	if _, err := ApplyPolicyRoutes(nil, nil); err == nil {
		t.Error("nil: no error")
	}
	rc, err := HTTPRouteConfig(goodListener())
	if err != nil {
		t.Fatal(err)
	}
	_, err = ApplyPolicyRoutes(rc, map[string][]PolicyRoute{"web": {{Regex: "(", Clusters: to("web")}}})
	if err == nil || !strings.Contains(err.Error(), `routes[0] to "web": policy routes[0]: path regex`) {
		t.Errorf("bad regex: %v", err)
	}
}
