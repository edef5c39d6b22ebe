package main

import (
	"strings"
	"testing"

	"github.com/hashicorp/consul/api"

	"github.com/xds-server/xds-server/config"
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
