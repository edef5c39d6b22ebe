package discovery

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
)

func TestConsulFirstSnapshotIsComplete(t *testing.T) {
	f := newFakeConsul(t)
	f.set("a", entry("n1", "a1", "", 80, "passing"), entry("n2", "a2", "10.1.0.2", 81, "warning"))
	f.set("b", entry("n1", "b1", "10.1.0.3", 90))
	release := f.hold("b")
	aRead := f.answered("/v1/health/service/a")
	h := runConsul(t, f.addr(), ConsulConfig{})
	<-aRead // a is read while b is still held: a partial view would be emitted now
	release()
	s := h.next(t)
	if len(s.Services) != 2 || s.EndpointCount() != 3 {
		t.Fatalf("first snapshot = %+v, want services a (2 endpoints) and b (1)", s)
	}
	a, _ := s.Service("a")
	if got := a.Endpoints[0]; got.ID != "a1" || got.Address != "10.0.0.1" || got.Port != 80 || got.Locality.Region != "dc1" || got.Health != HealthHealthy || got.Weight != 1 {
		t.Errorf("a1 = %+v, want node address 10.0.0.1, port 80, region dc1, healthy, weight 1", got)
	}
	if got := a.Endpoints[1]; got.Address != "10.1.0.2" || got.Health != HealthHealthy {
		t.Errorf("a2 = %+v, want service address 10.1.0.2, healthy (warning)", got)
	}
	if got := metricValue(t, h.metrics.Snapshots.WithLabelValues("consul")); got != 1 {
		t.Errorf("snapshots metric = %v, want 1", got)
	}
}

func TestConsulFollowsChanges(t *testing.T) {
	f := newFakeConsul(t)
	f.set("a", entry("n1", "a1", "", 80, "passing"), entry("n2", "a2", "", 80, "passing"))
	h := runConsul(t, f.addr(), ConsulConfig{WarningAs: "degraded"})
	h.next(t)
	steps := []struct {
		what   string
		change func()
		want   func(Snapshot) bool
	}{
		{"a2 critical -> unhealthy", func() { f.set("a", entry("n1", "a1", "", 80, "passing"), entry("n2", "a2", "", 80, "critical")) },
			func(s Snapshot) bool {
				return health(s, "a")["a2"] == HealthUnhealthy && health(s, "a")["a1"] == HealthHealthy
			}},
		{"a1 warning -> degraded", func() { f.set("a", entry("n1", "a1", "", 80, "warning"), entry("n2", "a2", "", 80, "critical")) },
			func(s Snapshot) bool { return health(s, "a")["a1"] == HealthDegraded }},
		{"a1 in maintenance -> draining, kept", func() {
			e := entry("n1", "a1", "", 80, "passing")
			e.Checks = append(e.Checks, &api.HealthCheck{CheckID: "_service_maintenance:a1", Status: "critical"})
			f.set("a", e, entry("n2", "a2", "", 80, "critical"))
		}, func(s Snapshot) bool { return health(s, "a")["a1"] == HealthDraining && len(health(s, "a")) == 2 }},
		{"service c appears", func() { f.set("c", entry("n3", "c1", "", 70)) },
			func(s Snapshot) bool { return health(s, "c")["c1"] == HealthHealthy && len(s.Services) == 2 }},
		{"service a disappears", func() { f.set("a") },
			func(s Snapshot) bool { _, ok := s.Service("a"); return !ok && len(s.Services) == 1 }},
	}
	for _, st := range steps {
		st.change()
		h.await(t, st.what, st.want, nil)
	}
}

func TestConsulEmitsOnlyChanges(t *testing.T) {
	f := newFakeConsul(t)
	f.set("a", entry("n1", "a1", "", 80))
	h := runConsul(t, f.addr(), ConsulConfig{})
	h.next(t)
	polled := f.answered("/v1/health/service/a")
	f.update(0, nil) // a new index, the same content: not a change
	<-polled
	f.set("a", entry("n1", "a1", "", 80), entry("n1", "a2", "", 81))
	if s := h.next(t); s.EndpointCount() != 2 {
		t.Fatalf("snapshot after an index-only bump and a change = %+v, want the change (2 endpoints)", s)
	}
	if got := metricValue(t, h.metrics.Snapshots.WithLabelValues("consul")); got != 2 {
		t.Errorf("snapshots metric = %v, want 2", got)
	}
}

func TestConsulIndexGoesBackwards(t *testing.T) {
	f := newFakeConsul(t)
	f.set("a", entry("n1", "a1", "", 80))
	h := runConsul(t, f.addr(), ConsulConfig{})
	h.next(t)
	f.update(2, func() { f.services["a"] = append(f.services["a"], entry("n1", "a2", "", 81)) })
	h.await(t, "a2 after the index went from 11 to 2", func(s Snapshot) bool { return s.EndpointCount() == 2 }, nil)
	f.set("a", entry("n1", "a1", "", 80), entry("n1", "a2", "", 81), entry("n1", "a3", "", 82))
	h.await(t, "a3 after the reset", func(s Snapshot) bool { return s.EndpointCount() == 3 }, nil)
}

func TestConsulOutageKeepsLastEndpoints(t *testing.T) {
	f := newFakeConsul(t)
	f.set("a", entry("n1", "a1", "", 80), entry("n2", "a2", "", 80))
	now := time.Unix(1700000000, 0)
	h := runConsul(t, f.addr(), ConsulConfig{Now: func() time.Time { return now }})
	h.next(t)
	m := h.metrics
	f.setDown(true)
	eventually(t, "stale = 1 and both loops failing twice", func() bool {
		return metricValue(t, m.Stale.WithLabelValues("consul")) == 1 && metricValue(t, m.Errors.WithLabelValues("consul")) >= 4
	})
	if s, ok := h.pending(); ok {
		t.Fatalf("snapshot emitted during the outage: %+v", s)
	}
	f.update(3, func() { // back, after a restart: the index went backwards
		f.down = false
		f.services["a"] = append(f.services["a"], entry("n3", "a3", "", 80))
	})
	if s := h.next(t); s.EndpointCount() != 3 {
		t.Fatalf("first snapshot after the outage = %+v, want a1, a2, a3", s)
	}
	eventually(t, "stale = 0", func() bool { return metricValue(t, m.Stale.WithLabelValues("consul")) == 0 })
	if got := metricValue(t, m.LastUpdate.WithLabelValues("consul")); got != 1700000000 {
		t.Errorf("last update metric = %v, want the injected clock's 1700000000", got)
	}
}

func TestConsulToken(t *testing.T) {
	for name, tc := range map[string]struct {
		cfg, env, want string
	}{
		"from the config":               {cfg: "cfg-token", want: "cfg-token"},
		"from CONSUL_HTTP_TOKEN":        {env: "env-token", want: "env-token"},
		"the config wins over the env":  {cfg: "cfg-token", env: "env-token", want: "cfg-token"},
		"none: no X-Consul-Token value": {want: ""},
	} {
		t.Run(name, func(t *testing.T) {
			t.Setenv("CONSUL_HTTP_TOKEN", tc.env)
			f := newFakeConsul(t)
			f.set("a", entry("n1", "a1", "", 80))
			h := runConsul(t, f.addr(), ConsulConfig{Token: tc.cfg})
			h.next(t)
			f.mu.Lock()
			defer f.mu.Unlock()
			if len(f.tokens) != 1 || !f.tokens[tc.want] {
				t.Errorf("tokens sent = %v, want only %q", f.tokens, tc.want)
			}
		})
	}
}

func TestConsulFilters(t *testing.T) {
	f := newFakeConsul(t)
	tagged := func(e *api.ServiceEntry, tags ...string) *api.ServiceEntry { e.Service.Tags = tags; return e }
	f.set("consul", entry("n1", "consul", "", 8300))
	f.set("a", tagged(entry("n1", "a1", "", 80), "x", "y"))
	f.set("b", tagged(entry("n1", "b1", "", 80), "x"))
	f.set("c", tagged(entry("n1", "c1", "", 80), "x", "y", "z"), tagged(entry("n2", "c2", "", 80), "x"))
	f.set("d", tagged(entry("n1", "d1", "", 80), "x", "y"))
	h := runConsul(t, f.addr(), ConsulConfig{Services: []string{"a", "b", "c", "consul"}, Tags: []string{"y", "x"}})
	s := h.next(t)
	if len(s.Services) != 2 || s.Services[0].Name != "a" || s.Services[1].Name != "c" {
		t.Fatalf("services = %+v, want a and c (b lacks tag y, d is not listed, consul is skipped)", s.Services)
	}
	if c := health(s, "c"); len(c) != 1 || c["c1"] != HealthHealthy {
		t.Errorf("c = %v, want only c1 (c2 lacks tag y)", c)
	}
}

func TestConsulCoalescesByMinInterval(t *testing.T) {
	const minInterval = 50 * time.Millisecond
	services := []string{"a", "b", "c"} // loops of their own: their answers arrive apart
	f := newFakeConsul(t)
	for _, name := range services {
		f.set(name, entry("n1", name+"0", "", 80))
	}
	h := runConsul(t, f.addr(), ConsulConfig{MinInterval: minInterval})
	h.next(t)
	const changes = 10
	for i := range changes {
		for _, name := range services {
			eps := []*api.ServiceEntry{}
			for j := range i + 2 {
				eps = append(eps, entry("n1", fmt.Sprint(name, j), "", 80+j)) // distinct addresses: duplicates are dropped
			}
			f.set(name, eps...)
		}
	}
	want := len(services) * (changes + 1)
	h.await(t, "the last change", func(s Snapshot) bool { return s.EndpointCount() == want }, nil)
	h.mu.Lock()
	defer h.mu.Unlock()
	emits := len(h.times)
	if emits >= changes*len(services) {
		t.Errorf("%d snapshots for %d changes: not coalesced", emits, changes*len(services))
	}
	for i := 1; i < len(h.times); i++ {
		if gap := h.times[i].Sub(h.times[i-1]); gap < minInterval {
			t.Errorf("snapshots %d and %d only %v apart, want >= %v", i-1, i, gap, minInterval)
		}
	}
}

func TestConsulSkipsBadEntries(t *testing.T) {
	f := newFakeConsul(t)
	bad := entry("n1", "a2", "", 0) // port 0
	f.set("a", entry("n1", "a1", "", 80), bad)
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&syncWriter{w: &logs}, nil))
	h := runConsul(t, f.addr(), ConsulConfig{Logger: logger})
	s := h.next(t)
	if got := health(s, "a"); len(got) != 1 || got["a1"] != HealthHealthy {
		t.Errorf("a = %v, want only a1", got)
	}
	if got := metricValue(t, h.metrics.Skipped.WithLabelValues("consul", ReasonBadPort)); got != 1 {
		t.Errorf("skipped{consul,bad_port} = %v, want 1", got)
	}
	if out := logs.String(); !strings.Contains(out, "component=discovery.consul") || !strings.Contains(out, "reason=bad_port") {
		t.Errorf("logs = %q, want a warning with component=discovery.consul and reason=bad_port", out)
	}
}

func TestConsulRunReturnsWhileQueriesBlock(t *testing.T) {
	f := newFakeConsul(t)
	f.set("a", entry("n1", "a1", "", 80))
	f.hold("a") // never released: Run must still return on cancel
	src, err := NewConsul(ConsulConfig{Address: f.addr(), Wait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx, func(Snapshot) { t.Error("unexpected snapshot") }) }()
	<-f.answered("/v1/catalog/services")
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run = %v, want nil", err)
		}
	case <-time.After(consulTestTimeout):
		t.Fatal("Run did not return after cancel")
	}
	if err := src.Run(context.Background(), nil); err == nil {
		t.Error("Run with a nil emit: want an error")
	}
}

// TestConsulOnRead: each emitted snapshot is preceded by the read of the
// first change it brings: when its blocking query returned, its index
// before and after, and when the snapshot went out.
func TestConsulOnRead(t *testing.T) {
	f := newFakeConsul(t)
	f.set("a", entry("n1", "a1", "", 80, "passing"))
	reads := make(chan Read, 100)
	h := runConsul(t, f.addr(), ConsulConfig{OnRead: func(r Read) { reads <- r }})
	h.next(t)
	select {
	case <-reads: // the first snapshot's
	default:
		t.Fatal("the first snapshot was emitted without its read")
	}
	before := time.Now()
	f.set("a", entry("n1", "a1", "", 80, "critical"))
	h.await(t, "a1 critical", func(s Snapshot) bool { return health(s, "a")["a1"] == HealthUnhealthy }, nil)
	var r Read
	select {
	case r = <-reads:
	default:
		t.Fatal("a snapshot emitted without its read")
	}
	if r.At.Before(before) || r.Emitted.Before(r.At) {
		t.Errorf("read at %v, emitted at %v; the change was made at %v", r.At, r.Emitted, before)
	}
	if r.IndexTo <= r.IndexFrom || r.IndexFrom == 0 {
		t.Errorf("index %d -> %d, want a change from a known index", r.IndexFrom, r.IndexTo)
	}
}
