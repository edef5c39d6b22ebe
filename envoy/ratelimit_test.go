package envoy

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	rlcommonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
)

func ptr[T any](v T) *T { return &v }

// descString renders descriptors as "k=v,k=v|k=v" for comparison.
func descString(ds []*rlcommonv3.RateLimitDescriptor) string {
	var parts []string
	for _, d := range ds {
		var es []string
		for _, e := range d.GetEntries() {
			es = append(es, e.GetKey()+"="+e.GetValue())
		}
		parts = append(parts, strings.Join(es, ","))
	}
	return strings.Join(parts, "|")
}

// TestDescriptors checks Envoy's semantics of each action kind: which
// entries a descriptor gets and when the whole descriptor is skipped.
func TestDescriptors(t *testing.T) {
	remote := RateLimitAction{RemoteAddress: true}
	generic := RateLimitAction{GenericKey: &GenericKey{Value: "edge"}}
	user := RateLimitAction{RequestHeaders: &RequestHeaders{HeaderName: "X-User-Id", DescriptorKey: "user"}}
	optUser := RateLimitAction{RequestHeaders: &RequestHeaders{HeaderName: "x-user-id", DescriptorKey: "user", SkipIfAbsent: true}}
	isGet := RateLimitAction{HeaderValueMatch: &HeaderValueMatch{DescriptorValue: "get",
		Headers: []HeaderMatch{{Name: ":method", Exact: "GET"}}}}
	notGet := RateLimitAction{HeaderValueMatch: &HeaderValueMatch{DescriptorKey: "m", DescriptorValue: "other", ExpectMatch: ptr(false),
		Headers: []HeaderMatch{{Name: ":method", Exact: "GET"}}}}
	get := Request{Method: "GET", Path: "/", RemoteAddress: "10.0.0.1", Headers: map[string]string{"x-user-id": "alice"}}
	post := Request{Method: "POST", Path: "/"}
	for name, tc := range map[string]struct {
		actions [][]RateLimitAction
		req     Request
		want    string
	}{
		"remote address":                     {[][]RateLimitAction{{remote}}, get, "remote_address=10.0.0.1"},
		"no remote address skips":            {[][]RateLimitAction{{remote}, {generic}}, post, "generic_key=edge"},
		"generic key default key":            {[][]RateLimitAction{{generic}}, post, "generic_key=edge"},
		"generic key own key":                {[][]RateLimitAction{{{GenericKey: &GenericKey{Value: "v", DescriptorKey: "k"}}}}, post, "k=v"},
		"entries in order":                   {[][]RateLimitAction{{generic, user}}, get, "generic_key=edge,user=alice"},
		"header names are case-insensitive":  {[][]RateLimitAction{{user}}, Request{Headers: map[string]string{"X-USER-ID": "bob"}}, "user=bob"},
		"missing header skips descriptor":    {[][]RateLimitAction{{generic, user}, {generic}}, post, "generic_key=edge"},
		"skip_if_absent skips only entry":    {[][]RateLimitAction{{generic, optUser}}, post, "generic_key=edge"},
		"skip_if_absent alone sends nothing": {[][]RateLimitAction{{optUser}}, post, ""},
		"header value match":                 {[][]RateLimitAction{{isGet}}, get, "header_match=get"},
		"header value mismatch skips":        {[][]RateLimitAction{{isGet}}, post, ""},
		"expect_match false":                 {[][]RateLimitAction{{notGet}}, post, "m=other"},
		"expect_match false on match skips":  {[][]RateLimitAction{{notGet}}, get, ""},
		"the issue's actions":                {[][]RateLimitAction{{remote}, {generic, user}, {isGet}}, get, "remote_address=10.0.0.1|generic_key=edge,user=alice|header_match=get"},
		"pseudo-header :path":                {[][]RateLimitAction{{{RequestHeaders: &RequestHeaders{HeaderName: ":path", DescriptorKey: "path"}}}}, get, "path=/"},
		"action after a skip is not applied": {[][]RateLimitAction{{user, generic}}, post, ""},
	} {
		t.Run(name, func(t *testing.T) {
			if got := descString(Descriptors(tc.actions, tc.req)); got != tc.want {
				t.Errorf("Descriptors = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestMatchHeaders checks Envoy's header matching, missing headers and
// inversion included.
func TestMatchHeaders(t *testing.T) {
	req := Request{Method: "GET", Headers: map[string]string{"x-env": "production", "x-v": "v12"}}
	for name, tc := range map[string]struct {
		h    HeaderMatch
		want bool
	}{
		"exact":                     {HeaderMatch{Name: ":method", Exact: "GET"}, true},
		"exact is case-sensitive":   {HeaderMatch{Name: ":method", Exact: "get"}, false},
		"prefix":                    {HeaderMatch{Name: "x-env", Prefix: "prod"}, true},
		"regex matches whole value": {HeaderMatch{Name: "x-v", Regex: "v[0-9]"}, false},
		"regex":                     {HeaderMatch{Name: "x-v", Regex: "v[0-9]+"}, true},
		"present":                   {HeaderMatch{Name: "x-env", Present: ptr(true)}, true},
		"present false, present":    {HeaderMatch{Name: "x-env", Present: ptr(false)}, false},
		"present false, absent":     {HeaderMatch{Name: "x-none", Present: ptr(false)}, true},
		"absent, exact":             {HeaderMatch{Name: "x-none", Exact: "a"}, false},
		"absent, inverted exact":    {HeaderMatch{Name: "x-none", Exact: "a", Invert: true}, false},
		"absent, inverted present":  {HeaderMatch{Name: "x-none", Present: ptr(true), Invert: true}, true},
		"inverted prefix":           {HeaderMatch{Name: "x-env", Prefix: "dev", Invert: true}, true},
	} {
		t.Run(name, func(t *testing.T) {
			if got := MatchHeaders([]HeaderMatch{tc.h}, req); got != tc.want {
				t.Errorf("MatchHeaders(%+v) = %v, want %v", tc.h, got, tc.want)
			}
		})
	}
}

func TestRateLimitCluster(t *testing.T) {
	for addr, want := range map[string]clusterv3.Cluster_DiscoveryType{
		"127.0.0.1:18081": clusterv3.Cluster_STATIC, "[::1]:1": clusterv3.Cluster_STATIC, "xds-server:18081": clusterv3.Cluster_STRICT_DNS,
	} {
		c, err := RateLimitCluster(addr)
		if err != nil || c.GetType() != want || c.GetName() != RateLimitClusterName {
			t.Errorf("RateLimitCluster(%q) = %v (%v), want type %v", addr, c.GetType(), err, want)
		}
	}
	for _, addr := range []string{"", ":18081", "host", "host:0", "host:70000"} {
		if _, err := RateLimitCluster(addr); err == nil {
			t.Errorf("RateLimitCluster(%q): no error", addr)
		}
	}
}

// TestRateLimitActionsRoundTrip: the rate_limits HTTPRouteConfig
// generates read back into the actions they came from.
func TestRateLimitActionsRoundTrip(t *testing.T) {
	for _, in := range []string{"testdata/listeners_edge.in.yaml", "testdata/listeners_matchers.in.yaml"} {
		b, err := os.ReadFile(in)
		if err != nil {
			t.Fatal(err)
		}
		var c listenerCase
		if err := yaml.UnmarshalStrict(b, &c); err != nil {
			t.Fatal(err)
		}
		for _, cl := range c.Listeners {
			l := cl.listener()
			if l.RateLimit == nil {
				continue
			}
			rc, err := HTTPRouteConfig(l)
			if err != nil {
				t.Fatal(err)
			}
			got, err := RateLimitActions(rc.GetVirtualHosts()[0].GetRateLimits())
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, l.RateLimit.Actions) {
				t.Errorf("%s %s: round trip\n got %+v\nwant %+v", in, l.Name, got, l.RateLimit.Actions)
			}
		}
	}
}
