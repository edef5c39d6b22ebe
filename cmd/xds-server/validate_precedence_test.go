package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/hashicorp/consul/api"

	"github.com/xds-server/xds-server/config"
	"github.com/xds-server/xds-server/e2e/harness"
	"github.com/xds-server/xds-server/policy"
)

// TestPrecedenceWarnings: a service whose resolver settings are both in
// the file and in a Consul service-resolver gets one warning saying the
// entry is used; a service with only one of them, or with a Consul entry
// of another kind, gets none.
func TestPrecedenceWarnings(t *testing.T) {
	subsets := map[string]config.SubsetConfig{"v1": {Filter: `Service.Meta.version == "1"`}}
	cfg := config.Config{Services: map[string]config.ServiceConfig{
		"web":   {LBPolicy: "round_robin", Subsets: subsets},
		"api":   {LBPolicy: "round_robin", DefaultSubset: "v1", Subsets: subsets},
		"cache": {LBPolicy: "round_robin"},
		"*":     {LBPolicy: "round_robin"},
	}}
	set := policy.NewSet()
	set.Apply(policy.KindResolver, []api.ConfigEntry{
		&api.ServiceResolverConfigEntry{Kind: api.ServiceResolver, Name: "web", DefaultSubset: "v2",
			Subsets: map[string]api.ServiceResolverSubset{"v2": {Filter: `Service.Meta.version == "2"`}}},
		&api.ServiceResolverConfigEntry{Kind: api.ServiceResolver, Name: "cache", ConnectTimeout: 1e9},
	})
	set.Apply(policy.KindSplitter, []api.ConfigEntry{&api.ServiceSplitterConfigEntry{Kind: api.ServiceSplitter, Name: "api",
		Splits: []api.ServiceSplit{{Weight: 100, ServiceSubset: "v1"}}}})
	got := precedenceWarnings(cfg, set)
	if len(got) != 1 || got[0].Key != "services.web" || got[0].Value != "service-resolver web" || !got[0].Warning ||
		!strings.Contains(got[0].Reason, "Consul's service-resolver is used for web") {
		t.Fatalf("warnings %+v, want one for web", got)
	}

	cfg.Services["*"] = config.ServiceConfig{LBPolicy: "round_robin", Subsets: subsets} // resolved: cache has no entry of its own
	delete(cfg.Services, "cache")
	if got = precedenceWarnings(cfg, set); len(got) != 2 || got[0].Key != `services."*"` || got[0].Value != "service-resolver cache" {
		t.Errorf(`inherited from services."*": %+v`, got)
	}
}

// TestValidatePrecedence: against a real Consul holding a resolver for
// web, validate of a file with web's subsets shows that the entry is used
// (one warning, exit 0); api's subsets, with no entry, are not mentioned.
func TestValidatePrecedence(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Consul")
	}
	consul := harness.Consul(t)
	e := &api.ServiceResolverConfigEntry{Kind: api.ServiceResolver, Name: "web",
		Subsets: map[string]api.ServiceResolverSubset{"v2": {Filter: `Service.Meta.version == "2"`}}}
	if ok, _, err := consul.Client().ConfigEntries().Set(e, nil); err != nil || !ok {
		t.Fatalf("writing the resolver: %v", err)
	}
	file := writeConfig(t, "discovery: { source: consul }\nservices:\n  web: { subsets: { v1: { filter: 'Service.Meta.version == \"1\"' } } }\n"+
		"  api: { subsets: { v1: {} }, default_subset: v1 }\n")
	var stdout, stderr bytes.Buffer
	code := run([]string{"validate", "--config", file, "--discovery.consul.address=" + consul.Addr()}, &stdout, &stderr)
	want := "xds-server: 1 warning:\n  services.web: service-resolver web: Consul's service-resolver is used for web"
	if code != 0 || !strings.Contains(stdout.String(), "configuration is valid") || !strings.Contains(stderr.String(), want) ||
		strings.Contains(stderr.String(), "services.api") {
		t.Errorf("validate: exit %d\nstdout %q\nstderr %q\nwant exit 0 and %q", code, stdout.String(), stderr.String(), want)
	}
}
