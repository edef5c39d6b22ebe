package policy

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/xds-server/xds-server/e2e/harness"
)

const integrationTimeout = 20 * time.Second

// watched runs a Watcher on a's Consul with fast test timings and returns
// it with its metrics and a channel of its updates; it is stopped, and Run
// checked to return, when the test ends.
func watched(t *testing.T, a *harness.ConsulAgent) (*Watcher, *Metrics, <-chan Update) {
	t.Helper()
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	updates := make(chan Update, 100)
	w, err := NewWatcher(WatcherConfig{Client: a.Client(), Wait: 5 * time.Second, MinInterval: 5 * time.Millisecond,
		BackoffBase: 10 * time.Millisecond, BackoffMax: 100 * time.Millisecond, Metrics: m,
		Logger:   slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug})),
		OnChange: func(_ string, up Update) { updates <- up }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run = %v", err)
			}
		case <-time.After(integrationTimeout):
			t.Error("Run did not return after cancel")
		}
	})
	return w, m, updates
}

// await waits for updates until cond holds (checked after each one).
func await(t *testing.T, updates <-chan Update, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(integrationTimeout)
	for !cond() {
		select {
		case <-updates:
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func set(t *testing.T, c *api.Client, e api.ConfigEntry) {
	t.Helper()
	if ok, _, err := c.ConfigEntries().Set(e, nil); err != nil || !ok {
		t.Fatalf("Set %s %s: %v %v", e.GetKind(), e.GetName(), ok, err)
	}
}

func del(t *testing.T, c *api.Client, kind, name string) {
	t.Helper()
	if _, err := c.ConfigEntries().Delete(kind, name, nil); err != nil {
		t.Fatalf("Delete %s %s: %v", kind, name, err)
	}
}

// TestConsulEntries writes the four kinds through Consul's API and follows
// them: arrival, a version Consul accepts but xds-server cannot use (the
// last good one kept, the rejection listed and counted), a fix, and
// deletions back to the defaults.
func TestConsulEntries(t *testing.T) {
	a := harness.Consul(t)
	c := a.Client()
	w, m, updates := watched(t, a)
	select {
	case <-w.Synced():
	case <-time.After(integrationTimeout):
		t.Fatal("the watcher did not read the four kinds")
	}

	set(t, c, &api.ServiceConfigEntry{Kind: KindDefaults, Name: "web", Protocol: "http"})
	set(t, c, &api.ServiceResolverConfigEntry{Kind: KindResolver, Name: "web", DefaultSubset: "v1", ConnectTimeout: 2 * time.Second,
		Subsets: map[string]api.ServiceResolverSubset{"v1": {Filter: "Service.Meta.version == v1"}, "v2": {Filter: "Service.Meta.version == v2"}}})
	set(t, c, &api.ServiceSplitterConfigEntry{Kind: KindSplitter, Name: "web",
		Splits: []api.ServiceSplit{{Weight: 90, ServiceSubset: "v1"}, {Weight: 10, ServiceSubset: "v2"}}})
	set(t, c, &api.ServiceRouterConfigEntry{Kind: KindRouter, Name: "web", Routes: []api.ServiceRoute{{
		Match:       &api.ServiceRouteMatch{HTTP: &api.ServiceRouteHTTPMatch{Header: []api.ServiceRouteHTTPMatchHeader{{Name: "x-canary", Exact: "1"}}}},
		Destination: &api.ServiceRouteDestination{ServiceSubset: "v2", NumRetries: 2}}}})
	await(t, updates, "the four entries", func() bool {
		p := w.Policy("web")
		return p.Protocol == "http" && p.Resolver != nil && len(p.Splits) == 2 && len(p.Routes) == 1
	})
	p := w.Policy("web")
	if p.Resolver.ConnectTimeout != 2*time.Second || p.Splits[1] != (Split{Weight: 10, ServiceSubset: "v2"}) ||
		p.Routes[0].Destination.ServiceSubset != "v2" || len(p.Entries) != 4 {
		t.Errorf("web = %+v", p)
	}
	goodIndex := p.Entries[1].ModifyIndex

	// Consul accepts a filter on the node's meta; the discovery model has
	// no node meta, so xds-server rejects it and keeps the last good one.
	set(t, c, &api.ServiceResolverConfigEntry{Kind: KindResolver, Name: "web", DefaultSubset: "v1",
		Subsets: map[string]api.ServiceResolverSubset{"v1": {Filter: "Service.Meta.version == v1"}, "v2": {Filter: "Node.Meta.rack == r1"}}})
	await(t, updates, "the rejection", func() bool { return len(w.Rejections()) == 1 })
	rej := w.Rejections()[0]
	if rej.Kind != KindResolver || rej.Name != "web" || rej.Field != "Subsets[v2].Filter" || rej.Reason != ReasonBadFilter {
		t.Errorf("rejection = %+v", rej)
	}
	p = w.Policy("web")
	if v2, _ := p.Resolver.Subset("v2"); v2.Filter.String() != "Service.Meta.version == v2" || p.Entries[1].ModifyIndex != goodIndex {
		t.Errorf("web after the bad version = %+v, want the last good resolver", p.Resolver)
	}
	if n := testutil.ToFloat64(m.Rejections.WithLabelValues(KindResolver, ReasonBadFilter)); n != 1 {
		t.Errorf("xds_policy_rejections_total{service-resolver,bad_filter} = %v, want 1", n)
	}
	if n := testutil.ToFloat64(m.Rejected.WithLabelValues(KindResolver)); n != 1 {
		t.Errorf("xds_policy_rejected_entries{service-resolver} = %v, want 1", n)
	}

	// A filter that does not parse: Consul 1.14 refuses it on write (it
	// compiles subset filters); if a Consul ever stored one, it would be
	// rejected here as above.
	if _, _, err := c.ConfigEntries().Set(&api.ServiceResolverConfigEntry{Kind: KindResolver, Name: "web",
		Subsets: map[string]api.ServiceResolverSubset{"v1": {Filter: "Service.Meta.version =="}, "v2": {}}}, nil); err == nil {
		await(t, updates, "the unparsable filter's rejection", func() bool {
			return testutil.ToFloat64(m.Rejections.WithLabelValues(KindResolver, ReasonBadFilter)) == 2
		})
	} else {
		t.Logf("consul refused the unparsable filter on write: %v", err)
	}
	// An unknown field: Consul refuses it on write, so a list never holds
	// one (the README says so; api's decoder would drop it unseen).
	raw := map[string]any{"Kind": KindResolver, "Name": "web", "DefaultSubsetz": "v1"}
	if _, err := c.Raw().Write("/v1/config", raw, nil, nil); err == nil {
		t.Error("consul accepted a config entry with an unknown field")
	}
	// Header modifiers: Consul accepts them, xds-server does not translate them yet.
	set(t, c, &api.ServiceRouterConfigEntry{Kind: KindRouter, Name: "web", Routes: []api.ServiceRoute{{
		Destination: &api.ServiceRouteDestination{ServiceSubset: "v1", RequestHeaders: &api.HTTPHeaderModifiers{Set: map[string]string{"x-a": "b"}}}}}})
	await(t, updates, "the router's rejection", func() bool { return len(w.Rejections()) == 2 })
	if rej := w.Rejections()[1]; rej.Kind != KindRouter || rej.Reason != ReasonUnsupported || rej.Field != "Routes[0].Destination.RequestHeaders" {
		t.Errorf("router rejection = %+v", rej)
	}
	if p := w.Policy("web"); len(p.Routes) != 1 || p.Routes[0].Destination.ServiceSubset != "v2" {
		t.Errorf("routes after the bad version = %+v, want the last good one", p.Routes)
	}

	// What a validate-like caller sees with one read.
	once, err := ReadOnce(context.Background(), c, "")
	if err != nil {
		t.Fatal(err)
	}
	if rs := once.Rejections(); len(rs) != 2 || rs[0].Kind != KindResolver || rs[1].Kind != KindRouter {
		t.Errorf("ReadOnce rejections = %+v", rs)
	}
	if p := once.Policy("web"); p.Protocol != "http" || len(p.Splits) != 2 || p.Resolver != nil || p.Routes != nil {
		t.Errorf("ReadOnce policy = %+v (no last good version in a fresh read)", p)
	}

	// Deleted entries return the service to its defaults, kind by kind.
	del(t, c, KindRouter, "web")
	del(t, c, KindSplitter, "web")
	await(t, updates, "router and splitter deleted", func() bool { p := w.Policy("web"); return p.Routes == nil && p.Splits == nil })
	del(t, c, KindResolver, "web")
	del(t, c, KindDefaults, "web")
	await(t, updates, "defaults", func() bool { return w.Policy("web").IsDefault() })
	if rs := w.Rejections(); len(rs) != 0 {
		t.Errorf("rejections after deletion = %+v", rs)
	}
	if n := testutil.ToFloat64(m.Entries.WithLabelValues(KindResolver)); n != 0 {
		t.Errorf("xds_policy_entries{service-resolver} = %v, want 0", n)
	}
}
