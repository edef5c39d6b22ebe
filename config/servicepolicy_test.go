package config

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/xds-server/xds-server/envoy"
	"github.com/xds-server/xds-server/policy"
)

// policyBase serves the static file's greeter (see withStatic), with
// subsets, a default subset and hash policies in the file.
const policyBase = `
discovery: { source: static, static: { file: STATIC } }
services:
  greeter:
    lb_policy: ring_hash
    subsets:
      v1: { filter: 'Service.Meta.version == "1"' }
      v2: { filter: '"canary" in Service.Tags', only_passing: true }
    default_subset: v1
    hash_policies: [{ field: header, field_value: x-user }, { source_ip: true, terminal: true }]
`

const splitListener = `
listeners:
  - name: ingress
    address: 0.0.0.0:10000
    routes: [{ prefix: /, split: [SPLIT] }]
`

func withStatic(t *testing.T, body string) string {
	t.Helper()
	static := filepath.Join(t.TempDir(), "endpoints.yaml")
	if err := os.WriteFile(static, []byte("services:\n  - name: greeter\n    endpoints: [{ address: 10.0.0.1, port: 80 }]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return writeConfig(t, strings.ReplaceAll(body, "STATIC", static))
}

// TestFilePolicy loads subsets, a default subset, hash policies and a
// split route, and checks the policy.Policy the file gives greeter.
func TestFilePolicy(t *testing.T) {
	split := "{ service: greeter, subset: v1, weight: 90 }, { service: greeter, subset: v2, weight: 10 }"
	cfg := loadWarned(t, withStatic(t, policyBase+strings.Replace(splitListener, "SPLIT", split, 1)))
	p := cfg.FilePolicy("greeter")
	r := p.Resolver
	if r == nil || r.DefaultSubset != "v1" || len(r.Subsets) != 2 || r.Subsets[0].Name != "v1" || r.Subsets[0].OnlyPassing ||
		!r.Subsets[1].OnlyPassing || r.Redirect != nil {
		t.Fatalf("resolver %+v", r)
	}
	v1 := policy.Instance{Service: policy.InstanceService{Meta: map[string]string{"version": "1"}}}
	canary := policy.Instance{Service: policy.InstanceService{Tags: []string{"canary"}}}
	if !r.Subsets[0].Filter.Match(v1) || r.Subsets[0].Filter.Match(canary) || !r.Subsets[1].Filter.Match(canary) {
		t.Errorf("filters %s, %s", r.Subsets[0].Filter, r.Subsets[1].Filter)
	}
	lb := r.LoadBalancer
	if lb == nil || lb.Policy != "ring_hash" || len(lb.HashPolicies) != 2 || lb.HashPolicies[0].Field != "header" ||
		lb.HashPolicies[0].FieldValue != "x-user" || !lb.HashPolicies[1].SourceIP || !lb.HashPolicies[1].Terminal {
		t.Errorf("load balancer %+v", lb)
	}
	if got := cfg.FilePolicies(); len(got) != 1 || got["greeter"].Resolver == nil {
		t.Errorf("FilePolicies %+v", got)
	}
	if s := cfg.Listeners[0].Routes[0].Split; len(s) != 2 || s[1].Subset != "v2" || s[1].Weight != 10 {
		t.Errorf("split %+v", s)
	}
	if !cfg.FilePolicy("other").IsDefault() {
		t.Error("a service without settings has a file policy")
	}
}

// TestFilePolicyValidation checks each problem of the file's traffic
// policy and of a split route, with its key.
func TestFilePolicyValidation(t *testing.T) {
	svc := func(body string) string {
		return "\ndiscovery: { source: static, static: { file: STATIC } }\nservices:\n  greeter:\n" + body
	}
	split := func(s string) string { return policyBase + strings.Replace(splitListener, "SPLIT", s, 1) }
	for name, tc := range map[string]struct {
		body string
		want []string
	}{
		"bad filter": {svc("    subsets: { v1: { filter: 'Service.Meta.version ==' } }\n"),
			[]string{`services.greeter.subsets.v1.filter: filter "Service.Meta.version =="`}},
		"unsupported selector": {svc("    subsets: { v1: { filter: 'Node.Meta.rack == a' } }\n"),
			[]string{`services.greeter.subsets.v1.filter: `, `selector "Node.Meta.rack" is not supported`}},
		"unknown subset key": {svc("    subsets: { v1: { fliter: x } }\n"),
			[]string{`services.greeter.subsets.v1.fliter: unknown key (did you mean filter?)`}},
		"subsets not a mapping": {svc("    subsets: [v1]\n"), []string{`services.greeter.subsets: [v1]: must be a mapping of subset names`}},
		"unknown default subset": {svc("    subsets: { v1: {} }\n    default_subset: v9\n"),
			[]string{`services.greeter.default_subset: "v9" is not one of the service's subsets (v1)`}},
		"redirect to itself": {svc("    redirect: { service: greeter }\n"), []string{`services.greeter.redirect: "greeter" redirects to itself`}},
		"redirect to unknown own subset": {svc("    redirect: { subset: v2 }\n"),
			[]string{`services.greeter.redirect.subset: "v2" is not one of the service's subsets`}},
		"redirect to unknown service": {svc("    redirect: { service: nope }\n"),
			[]string{`services.greeter.redirect.service: nope: is not a known service (known: greeter)`}},
		"redirect to unknown subset": {policyBase + "  old:\n    redirect: { service: greeter, subset: v9 }\n",
			[]string{`services.old.redirect.subset: v9: is not a subset of greeter (services.greeter.subsets: v1, v2)`}},
		"hash without ring hash": {svc("    hash_policies: [{ source_ip: true }]\n"),
			[]string{`services.greeter.hash_policies: need lb_policy ring_hash or maglev (it is "round_robin")`}},
		"bad hash field": {svc("    lb_policy: maglev\n    hash_policies: [{ field: body, field_value: x }]\n"),
			[]string{`services.greeter.hash_policies[0].field: "body" is not header, cookie or query_parameter`}},
		"hash both": {svc("    lb_policy: maglev\n    hash_policies: [{ field: header, field_value: x, source_ip: true }]\n"),
			[]string{`services.greeter.hash_policies[0]: set source_ip or field and field_value, not both`}},
		"unknown hash key": {svc("    hash_policies: [{ feild: header }]\n"), []string{`services.greeter.hash_policies[0].feild: unknown key`}},
		"unknown subset in a split": {split("{ service: greeter, subset: v1, weight: 1 }, { service: greeter, subset: v9, weight: 1 }"),
			[]string{`listeners[0].routes[0].split[1].subset: v9: is not a subset of greeter (services.greeter.subsets: v1, v2)`}},
		"zero weights": {split("{ service: greeter, weight: 0 }, { service: greeter, subset: v2 }"),
			[]string{`listeners[0].routes[0].split[0].weight: 0: is not above 0`, `listeners[0].routes[0].split[1].weight: 0: is not above 0`,
				`listeners[0].routes[0].split: weights sum to 0`}},
		"negative weight": {split("{ service: greeter, weight: -1 }, { service: greeter, weight: 2 }"),
			[]string{`listeners[0].routes[0].split[0].weight: -1: is not above 0`}},
		"unknown split service": {split("{ service: nope, weight: 1 }"),
			[]string{`listeners[0].routes[0].split[0].service: nope: is not a known service (known: greeter)`}},
		"split without service": {split("{ subset: v1, weight: 1 }"), []string{`listeners[0].routes[0].split[0].service: is empty`}},
		"service and split": {policyBase + "\nlisteners: [{ name: i, address: 0.0.0.0:1, routes: [{ prefix: /, service: greeter, split: [{ service: greeter, weight: 1 }] }] }]\n",
			[]string{`listeners[0].routes[0]: set service or split, not both`}},
		"weight below a hundredth": {split("{ service: greeter, weight: 0.004 }, { service: greeter, weight: 1 }"),
			[]string{`listeners[0].routes[0].split[0].weight: 0.004: is below 0.005`}},
		"weights above MaxUint32 hundredths": {split("{ service: greeter, weight: 3e7 }, { service: greeter, subset: v2, weight: 3e7 }"),
			[]string{`listeners[0].routes[0].split: weights sum to 60000000.00, above 42949672.95`}},
		"unknown split key": {split("{ service: greeter, wieght: 1 }"), []string{`listeners[0].routes[0].split[0].wieght: unknown key`}},
		"bad unhealthy_split": {svc("    unhealthy_split: drop\n"),
			[]string{`services.greeter.unhealthy_split: drop: is not one of redistribute, keep`}},
		"bad retry_other_split": {svc("    retry_other_split: sometimes\n"), []string{`services.greeter.retry_other_split`}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := loadArgs(t, "--config", withStatic(t, tc.body))
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\nlacks %q", err, w)
				}
			}
		})
	}
}

// TestSplitSubsetFromEntries: with Consul's config entries read, a
// split's subset may be defined by a service-resolver, so the file alone
// does not reject it.
func TestSplitSubsetFromEntries(t *testing.T) {
	body := "\ndiscovery: { source: consul, consul: { services: [web] } }\n" +
		strings.Replace(splitListener, "SPLIT", "{ service: web, subset: v9, weight: 1 }", 1)
	cfg := loadWarned(t, writeConfig(t, body))
	if got := cfg.XDSListeners(&problems{})[0].Routes[0]; got.Service != "" || !slices.Equal(got.Split, []envoy.WeightedCluster{{Cluster: "web~v9", Weight: 100}}) {
		t.Errorf("route %+v, want the split to web~v9", got)
	}
	if _, err := loadArgs(t, "--config", writeConfig(t, body), "--discovery.consul.config_entries=false"); err == nil ||
		!strings.Contains(err.Error(), "split[0].subset: v9: is not a subset of web") {
		t.Errorf("without config entries: %v", err)
	}
}

// TestReadmeFileExample loads the README's example of traffic policy in
// the file.
func TestReadmeFileExample(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "### The same in the file")
	_, rest, ok2 := strings.Cut(rest, "```yaml\n")
	block, _, ok3 := strings.Cut(rest, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("README.md has no yaml example under The same in the file")
	}
	cfg := loadWarned(t, writeConfig(t, block))
	if r := cfg.FilePolicy("old-web").Resolver; r == nil || r.Redirect.ServiceSubset != "canary" {
		t.Errorf("old-web resolver %+v", r)
	}
	if r := cfg.FilePolicy("web").Resolver; r == nil || len(r.Subsets) != 2 || len(r.LoadBalancer.HashPolicies) != 2 {
		t.Errorf("web resolver %+v", r)
	}
}

// loadWarned loads path, which must be valid with exactly the warnings
// want (each a prefix of "key: reason"), and checks that every route of
// the listeners served has a service or a split.
func loadWarned(t *testing.T, path string, want ...string) Config {
	t.Helper()
	cfg, err := loadArgs(t, "--config", path)
	var errs Errors
	if err != nil {
		errs = err.(Errors)
	}
	if errs.Invalid() || len(errs) != len(want) {
		t.Fatalf("load: %v, want only the warnings %q", err, want)
	}
	for i, w := range want {
		if !errs[i].Warning || !strings.HasPrefix(errs[i].Error(), w) {
			t.Errorf("warning %q, want %q", errs[i], w)
		}
	}
	for i, l := range cfg.XDSListeners(&problems{}) {
		for j, r := range l.Routes {
			if (r.Service == "") == (len(r.Split) == 0) {
				t.Errorf("listeners[%d] serves route %d with service %q and split %v", i, j, r.Service, r.Split)
			}
		}
	}
	return cfg
}

// TestSplitRouteServed: a split route is served as weighted clusters
// of "<service>~<subset>" (weights in hundredths of the file's; the
// default target's cluster is the service's), beside the other routes,
// and problems of a later route keep their index.
func TestSplitRouteServed(t *testing.T) {
	body := policyBase + "\nlisteners: [{ name: i, address: 0.0.0.0:1, routes: [" +
		"{ prefix: /a, split: [{ service: greeter, subset: V1, weight: 90 }, { service: greeter, weight: 9.5 }, { service: greeter, subset: v2, weight: 0.5 }] }," +
		" { prefix: /, service: greeter }] }]\n"
	cfg := loadWarned(t, withStatic(t, body))
	ls := cfg.XDSListeners(&problems{})
	want := []envoy.WeightedCluster{{Cluster: "greeter~v1", Weight: 9000}, {Cluster: "greeter", Weight: 950}, {Cluster: "greeter~v2", Weight: 50}}
	if rs := ls[0].Routes; len(rs) != 2 || rs[0].Service != "" || !slices.Equal(rs[0].Split, want) || rs[1].Service != "greeter" {
		t.Fatalf("routes served %+v", rs)
	}
	rc, err := envoy.HTTPRouteConfig(ls[0].HTTPListener)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]uint32{}
	for _, c := range rc.GetVirtualHosts()[0].GetRoutes()[0].GetRoute().GetWeightedClusters().GetClusters() {
		got[c.GetName()] = c.GetWeight().GetValue()
	}
	if !maps.Equal(got, map[string]uint32{"greeter~v1": 9000, "greeter": 950, "greeter~v2": 50}) {
		t.Errorf("weighted_clusters %v", got)
	}
	bad := strings.Replace(body, "{ prefix: /, service: greeter }", "{ service: greeter }", 1)
	if _, err := loadArgs(t, "--config", withStatic(t, bad)); err == nil ||
		!strings.Contains(err.Error(), "listeners[0].routes[1]: exactly one of prefix, path and safe_regex") {
		t.Errorf("later route's problem: %v", err)
	}
}
