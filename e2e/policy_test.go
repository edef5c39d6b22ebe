package e2e

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/xds-server/xds-server/console"
	"github.com/xds-server/xds-server/e2e/harness"
)

// TestConsulConfigEntries runs the real binary on a real Consul whose
// config entries are written through its API: the service page shows
// echo's resolver subsets with their filters and its splits; a newer
// resolver that the server rejects (a filter on Node.Meta, which Consul
// accepts) leaves the last good one in use, is listed on the service page
// and among the fleet page's problems, and is counted in
// xds_policy_rejections_total; deleting the entries returns echo to
// Consul's defaults and clears the rejection.
func TestConsulConfigEntries(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	consul := harness.Consul(t)
	registerEcho(t, consul, startEcho(t, 2), "")
	entries := consul.Client().ConfigEntries()
	resolver := &api.ServiceResolverConfigEntry{Kind: api.ServiceResolver, Name: "echo", DefaultSubset: "z0",
		Subsets: map[string]api.ServiceResolverSubset{"z0": {Filter: `Service.Meta.zone == "zone-0"`}, "z1": {Filter: `Service.Meta.zone == "zone-1"`}}}
	for _, e := range []api.ConfigEntry{
		&api.ServiceConfigEntry{Kind: api.ServiceDefaults, Name: "echo", Protocol: "grpc"},
		resolver,
		&api.ServiceSplitterConfigEntry{Kind: api.ServiceSplitter, Name: "echo",
			Splits: []api.ServiceSplit{{Weight: 90, ServiceSubset: "z0"}, {Weight: 10, ServiceSubset: "z1"}}},
	} {
		setEntry(t, entries, e)
	}
	srv := startServer(t, consul)
	svcURL, fleetURL := srv.AdminURL("/ui/api/services/echo"), srv.AdminURL("/ui/api/fleet")

	var v console.ServiceView
	awaitJSON(t, svcURL, &v, "echo's resolver and splitter on the service page", func() bool {
		return v.Policy != nil && len(v.Policy.Subsets) == 2 && len(v.Policy.Splits) == 2
	})
	p := v.Policy
	if p.Protocol != "grpc" || p.DefaultSubset != "z0" || p.Subsets[1] != (console.PolicySubset{Name: "z1", Filter: `Service.Meta.zone == "zone-1"`}) ||
		p.Splits[0] != (console.PolicySplit{Weight: 90, Subset: "z0"}) || len(p.Rejected) != 0 {
		t.Errorf("policy = %+v", p)
	}

	bad := *resolver
	bad.Subsets = map[string]api.ServiceResolverSubset{"z0": {Filter: "Node.Meta.rack == r1"}, "z1": resolver.Subsets["z1"]}
	setEntry(t, entries, &bad)
	var f console.FleetView
	awaitJSON(t, fleetURL, &f, "the rejected resolver on the fleet page", func() bool {
		return len(f.PolicyRejections) == 1 && slices.ContainsFunc(f.Problems, func(p console.Problem) bool {
			return strings.HasPrefix(p.Text, "config entry service-resolver echo rejected (bad_filter)")
		})
	})
	if r := f.PolicyRejections[0]; r.Kind != api.ServiceResolver || r.Name != "echo" || r.Field != "Subsets[z0].Filter" {
		t.Errorf("rejection = %+v", r)
	}
	v = console.ServiceView{}
	getJSON(t, svcURL, &v)
	if v.Policy == nil || len(v.Policy.Rejected) != 1 || len(v.Policy.Subsets) != 2 || v.Policy.Subsets[0].Filter != `Service.Meta.zone == "zone-0"` {
		t.Errorf("after the bad resolver, policy = %+v; want the last good subsets and the rejection", v.Policy)
	}
	awaitMetric(t, srv, `xds_policy_rejections_total{kind="service-resolver",reason="bad_filter"} 1`)
	awaitMetric(t, srv, `xds_policy_rejected_entries{kind="service-resolver"} 1`)

	for _, kind := range []string{api.ServiceSplitter, api.ServiceResolver} {
		if _, err := entries.Delete(kind, "echo", nil); err != nil {
			t.Fatalf("deleting %s echo: %v", kind, err)
		}
	}
	awaitJSON(t, svcURL, &v, "echo back to its defaults", func() bool {
		return v.Policy != nil && len(v.Policy.Subsets) == 0 && len(v.Policy.Splits) == 0 && len(v.Policy.Rejected) == 0
	})
	getJSON(t, fleetURL, &f)
	if len(f.PolicyRejections) != 0 {
		t.Errorf("after the delete, rejections = %+v", f.PolicyRejections)
	}
}

// setEntry writes a config entry through Consul's API.
func setEntry(t *testing.T, entries *api.ConfigEntries, e api.ConfigEntry) {
	t.Helper()
	if ok, _, err := entries.Set(e, nil); err != nil || !ok {
		t.Fatalf("writing %s %s: ok %v, %v", e.GetKind(), e.GetName(), ok, err)
	}
}

// awaitJSON polls u (another process: nothing to await) into a fresh
// decode of v until cond holds.
func awaitJSON[T any](t *testing.T, u string, v *T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		var zero T
		*v = zero
		if tryGetJSON(u, v) && cond() {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s; last %s: %+v", what, u, *v)
}
