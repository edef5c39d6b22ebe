package console

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/consul/api"

	"github.com/xds-server/xds-server/policy"
)

// testPolicies is a policy.Set (it satisfies Policies) holding, for echo,
// a resolver with two subsets whose newer version is rejected, and a
// 90/10 splitter.
func testPolicies(t *testing.T) *policy.Set {
	t.Helper()
	s := policy.NewSet()
	good := &api.ServiceResolverConfigEntry{Kind: api.ServiceResolver, Name: "echo", DefaultSubset: "v1", ModifyIndex: 5,
		Subsets: map[string]api.ServiceResolverSubset{"v1": {Filter: `Service.Meta.version == "1"`}, "v2": {Filter: `Service.Meta.version == "2"`}}}
	s.Apply(policy.KindResolver, []api.ConfigEntry{good})
	bad := *good
	bad.ModifyIndex, bad.Subsets = 6, map[string]api.ServiceResolverSubset{"v1": {Filter: `Node.Meta.rack == r1`}}
	if up := s.Apply(policy.KindResolver, []api.ConfigEntry{&bad}); len(up.Rejected) != 1 {
		t.Fatalf("the bad resolver was not rejected: %+v", up)
	}
	s.Apply(policy.KindSplitter, []api.ConfigEntry{&api.ServiceSplitterConfigEntry{Kind: api.ServiceSplitter, Name: "echo",
		Splits: []api.ServiceSplit{{Weight: 90, ServiceSubset: "v1"}, {Weight: 10, ServiceSubset: "v2"}}}})
	return s
}

// TestServicePolicy: the service page shows the last good resolver (its
// subsets and filters), the splits, and the rejected newer version; a
// service without entries shows Consul's defaults; without a Policies
// source there is no policy at all.
func TestServicePolicy(t *testing.T) {
	_, _, h := newTestConsole(t, func(c *Config) { c.Policies = testPolicies(t) })
	var v ServiceView
	get(t, h, "/ui/api/services/echo", http.StatusOK, &v)
	p := v.Policy
	if p == nil {
		t.Fatal("no policy")
	}
	if p.DefaultSubset != "v1" || len(p.Subsets) != 2 || p.Subsets[1] != (PolicySubset{Name: "v2", Filter: `Service.Meta.version == "2"`}) {
		t.Errorf("resolver = %s, want the last good version's two subsets", jsonOf(p))
	}
	if len(p.Splits) != 2 || p.Splits[0] != (PolicySplit{Weight: 90, Subset: "v1"}) || p.Routes != 0 {
		t.Errorf("splits = %s", jsonOf(p.Splits))
	}
	if len(p.Rejected) != 1 || p.Rejected[0].Kind != policy.KindResolver || p.Rejected[0].Reason != policy.ReasonBadFilter ||
		!strings.Contains(p.Rejected[0].Field, "v1") {
		t.Errorf("rejected = %s", jsonOf(p.Rejected))
	}
	get(t, h, "/ui/api/services/greeter", http.StatusOK, &v)
	if v.Policy == nil || len(v.Policy.Entries) != 0 || len(v.Policy.Rejected) != 0 || len(v.Policy.Subsets) != 0 {
		t.Errorf("greeter's policy = %s, want the defaults", jsonOf(v.Policy))
	}
	html := get(t, h, "/ui/services/echo", http.StatusOK, nil)
	for _, want := range []string{`id="policy-subsets"`, `Service.Meta.version == &#34;2&#34;`, `id="policy-rejected"`, "bad_filter"} {
		if !strings.Contains(html, want) {
			t.Errorf("the service page lacks %q", want)
		}
	}
	_, _, h = newTestConsole(t, nil)
	var none ServiceView
	if body := get(t, h, "/ui/api/services/echo", http.StatusOK, &none); none.Policy != nil || strings.Contains(body, `"policy"`) {
		t.Errorf("policy without a source: %s", body)
	}
}

// TestFleetPolicyRejections: a rejected entry is listed on the fleet API
// and is a warning among its problems.
func TestFleetPolicyRejections(t *testing.T) {
	_, _, h := newTestConsole(t, func(c *Config) { c.Policies = testPolicies(t) })
	var v FleetView
	get(t, h, "/ui/api/fleet", http.StatusOK, &v)
	if len(v.PolicyRejections) != 1 || v.PolicyRejections[0].Name != "echo" {
		t.Fatalf("policy rejections = %s", jsonOf(v.PolicyRejections))
	}
	found := false
	for _, p := range v.Problems {
		found = found || (p.Level == "warning" && strings.HasPrefix(p.Text, "config entry service-resolver echo rejected (bad_filter)"))
	}
	if !found {
		t.Errorf("problems = %q, want the rejected resolver", v.Problems)
	}
}

// unservedFleet is a fleet whose xDS server cannot serve web's policy.
type unservedFleet struct{ fakeFleet }

func (unservedFleet) PolicyErrors() map[string]string {
	return map[string]string{"web": `translate: service "web": subset "v3" is not defined`}
}

// TestFleetPolicyUnserved: a policy the xDS server cannot serve is listed
// on the fleet API and is a warning among its problems; a fleet that
// cannot tell lists none.
func TestFleetPolicyUnserved(t *testing.T) {
	_, _, h := newTestConsole(t, func(c *Config) { c.Fleet = unservedFleet{} })
	var v FleetView
	get(t, h, "/ui/api/fleet", http.StatusOK, &v)
	if len(v.PolicyUnserved) != 1 || v.PolicyUnserved[0].Name != "web" {
		t.Fatalf("policy unserved = %s", jsonOf(v.PolicyUnserved))
	}
	if !slices.ContainsFunc(v.Problems, func(p Problem) bool {
		return p.Level == "warning" && strings.HasPrefix(p.Text, "traffic policy of web not served")
	}) {
		t.Errorf("problems = %q, want web's unserved policy", v.Problems)
	}
	_, _, h = newTestConsole(t, func(c *Config) { c.Fleet = fakeFleet{} })
	var none FleetView
	if body := get(t, h, "/ui/api/fleet", http.StatusOK, &none); len(none.PolicyUnserved) != 0 || !strings.Contains(body, `"policy_unserved":[]`) {
		t.Errorf("a fleet that cannot tell: %s", body)
	}
}
