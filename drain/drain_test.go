package drain

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/xds-server/xds-server/discovery"
)

var drainT0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func drainWorld(eps ...discovery.Endpoint) discovery.Snapshot {
	return discovery.Snapshot{Services: []discovery.Service{{Name: "api", Endpoints: eps}}}
}

func ep(id string) discovery.Endpoint {
	return discovery.Endpoint{ID: id, Address: "10.0.0.1", Port: 80, Health: discovery.HealthHealthy, Meta: map[string]string{}, Node: "node-" + id}
}

// drainOf returns endpoint id's health and drain reasons in s.
func drainOf(s discovery.Snapshot, id string) (discovery.Health, string, bool) {
	for _, svc := range s.Services {
		for _, e := range svc.Endpoints {
			if e.ID == id {
				return e.Health, e.Drain, true
			}
		}
	}
	return 0, "", false
}

func TestDrainSources(t *testing.T) {
	withMeta := ep("a")
	withMeta.Meta = map[string]string{"lame_duck": "True"}
	withTag := ep("a")
	withTag.Tags = []string{"lame-duck"}
	maint := ep("a")
	maint.Health, maint.Drain = discovery.HealthDraining, SourceConsul
	for name, tc := range map[string]struct {
		ep    discovery.Endpoint
		setup func(d *Overlay)
		want  string // Drain; "" = serving
	}{
		"nothing":            {ep: ep("a")},
		"consul maintenance": {ep: maint, want: "consul_maintenance"},
		"meta key":           {ep: withMeta, want: "meta"},
		"meta false":         {ep: func() discovery.Endpoint { e := ep("a"); e.Meta["lame_duck"] = "false"; return e }()},
		"tag":                {ep: withTag, want: "tag"},
		"admin endpoint":     {ep: ep("a"), setup: func(d *Overlay) { d.SetAdmin(Admin{Target: Target{Service: "api", Endpoint: "a"}}) }, want: "admin"},
		"admin service":      {ep: ep("a"), setup: func(d *Overlay) { d.SetAdmin(Admin{Target: Target{Service: "api"}}) }, want: "admin"},
		"admin node":         {ep: ep("a"), setup: func(d *Overlay) { d.SetAdmin(Admin{Target: Target{Node: "node-a"}}) }, want: "admin"},
		"admin other node":   {ep: ep("a"), setup: func(d *Overlay) { d.SetAdmin(Admin{Target: Target{Node: "node-b"}}) }},
		"admin expired":      {ep: ep("a"), setup: func(d *Overlay) { d.SetAdmin(Admin{Target: Target{Service: "api"}, Until: drainT0}) }},
		"orca":               {ep: ep("a"), setup: func(d *Overlay) { d.SetORCA("api", "a", true) }, want: "orca"},
		"several":            {ep: withMeta, setup: func(d *Overlay) { d.SetORCA("api", "a", true) }, want: "meta,orca"},
	} {
		t.Run(name, func(t *testing.T) {
			d := NewOverlay(Policy{MetaKey: "lame_duck", Tag: "lame-duck"})
			if tc.setup != nil {
				tc.setup(d)
			}
			out, _ := d.Apply(drainWorld(tc.ep), drainT0)
			h, why, _ := drainOf(out, "a")
			wantH := discovery.HealthHealthy
			if tc.want != "" {
				wantH = discovery.HealthDraining
			}
			if h != wantH || why != tc.want {
				t.Errorf("a = %v (%q), want %v (%q)", h, why, wantH, tc.want)
			}
		})
	}
}

func TestDrainWindow(t *testing.T) {
	d := NewOverlay(Policy{Window: func(service string) time.Duration { return 30 * time.Second }})
	now := drainT0
	if _, next := d.Apply(drainWorld(ep("a"), ep("b")), now); !next.IsZero() {
		t.Fatalf("no timer expected, got %v", next)
	}
	// b deregisters: DRAINING for 30 s, then gone.
	now = now.Add(time.Second)
	out, next := d.Apply(drainWorld(ep("a")), now)
	if h, why, ok := drainOf(out, "b"); !ok || h != discovery.HealthDraining || why != SourceDeregistered {
		t.Fatalf("b after leaving = %v %q %v; want draining (deregistered)", h, why, ok)
	}
	if want := now.Add(30 * time.Second); !next.Equal(want) {
		t.Errorf("next = %v, want %v", next, want)
	}
	out, _ = d.Apply(drainWorld(ep("a")), now.Add(29*time.Second))
	if _, _, ok := drainOf(out, "b"); !ok {
		t.Error("b removed before its window ended")
	}
	out, next = d.Apply(drainWorld(ep("a")), now.Add(30*time.Second))
	if _, _, ok := drainOf(out, "b"); ok || !next.IsZero() {
		t.Errorf("b still there at the end of its window (next %v)", next)
	}

	// c leaves and comes back within the window: simply back.
	d.Apply(drainWorld(ep("a"), ep("c")), now)
	d.Apply(drainWorld(ep("a")), now.Add(time.Second))
	out, next = d.Apply(drainWorld(ep("a"), ep("c")), now.Add(2*time.Second))
	if h, why, _ := drainOf(out, "c"); h != discovery.HealthHealthy || why != "" || !next.IsZero() {
		t.Errorf("c back = %v %q (next %v); want healthy, no timer", h, why, next)
	}

	// The whole service leaves: its endpoints drain, the service stays.
	out, _ = d.Apply(discovery.Snapshot{}, now.Add(3*time.Second))
	if len(out.Services) != 1 || len(out.Services[0].Endpoints) != 2 {
		t.Errorf("service gone: %+v; want api with a and c draining", out)
	}
}

func TestDrainWindowZeroRemovesAtOnce(t *testing.T) {
	d := NewOverlay(Policy{})
	d.Apply(drainWorld(ep("a"), ep("b")), drainT0)
	out, _ := d.Apply(drainWorld(ep("a")), drainT0)
	if _, _, ok := drainOf(out, "b"); ok {
		t.Error("b kept without a window")
	}
}

func newTestDrains(t *testing.T, now *time.Time) (*Manager, *[]discovery.Snapshot) {
	t.Helper()
	var got []discovery.Snapshot
	s, err := New(Config{Emit: func(s discovery.Snapshot) { got = append(got, s) },
		Now: func() time.Time { return *now }, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s, &got
}

func TestDrainsAdminTTL(t *testing.T) {
	now := drainT0
	s, got := newTestDrains(t, &now)
	s.Observe(drainWorld(ep("a"), ep("b")))
	if _, err := s.Set(Target{Service: "api", Endpoint: "a"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	last := (*got)[len(*got)-1]
	if h, why, _ := drainOf(last, "a"); h != discovery.HealthDraining || why != SourceAdmin {
		t.Errorf("a = %v %q, want draining (admin)", h, why)
	}
	if v := testutil.ToFloat64(s.draining.WithLabelValues("api", SourceAdmin)); v != 1 {
		t.Errorf("xds_draining_endpoints{api,admin} = %v, want 1", v)
	}
	// Discovery changes (a Consul blip returning the same world): the
	// drain survives.
	s.Observe(drainWorld(ep("a"), ep("b")))
	if h, _, _ := drainOf((*got)[len(*got)-1], "a"); h != discovery.HealthDraining {
		t.Error("admin drain lost on a new discovery snapshot")
	}
	now = now.Add(time.Minute)
	s.Observe(drainWorld(ep("a"), ep("b")))
	if h, _, _ := drainOf((*got)[len(*got)-1], "a"); h != discovery.HealthHealthy {
		t.Error("admin drain outlived its TTL")
	}
	if st := s.State(); len(st.Admin) != 0 || len(st.Draining) != 0 {
		t.Errorf("state after expiry = %+v", st)
	}
}

func TestDrainsValidation(t *testing.T) {
	now := drainT0
	s, _ := newTestDrains(t, &now)
	s.Observe(drainWorld(ep("a")))
	h := s.Handler()
	// In order: later cases build on earlier ones.
	for _, tc := range []struct {
		name, method, url, body string
		code                    int
		want                    string
	}{
		{"drain", "POST", "/v1/drain", `{"service": "api", "endpoint": "a", "ttl": "10m"}`, 200, `"until"`},
		{"again", "POST", "/v1/drain", `{"service": "api", "endpoint": "a"}`, 200, `"service": "api"`},
		{"ttl in seconds", "POST", "/v1/drain", `{"service": "api", "ttl": 30}`, 200, `"until"`},
		{"bad json", "POST", "/v1/drain", `{"service": `, 400, "body"},
		{"unknown field", "POST", "/v1/drain", `{"service": "api", "why": "x"}`, 400, "why"},
		{"unknown service", "POST", "/v1/drain", `{"service": "nope"}`, 404, `service \"nope\"`},
		{"unknown endpoint", "POST", "/v1/drain", `{"service": "api", "endpoint": "z"}`, 404, `endpoint \"z\"`},
		{"unknown node", "POST", "/v1/drain", `{"node": "n9"}`, 404, `node \"n9\"`},
		{"node and service", "POST", "/v1/drain", `{"node": "node-a", "service": "api"}`, 400, "either node"},
		{"empty", "POST", "/v1/drain", `{}`, 400, "required"},
		{"bad ttl", "POST", "/v1/drain", `{"service": "api", "ttl": "soon"}`, 400, "ttl"},
		{"negative ttl", "POST", "/v1/drain", `{"service": "api", "ttl": -1}`, 400, "ttl"},
		{"zero ttl", "POST", "/v1/drain", `{"service": "api", "ttl": 0}`, 400, "omit ttl"},
		{"zero ttl string", "POST", "/v1/drain", `{"service": "api", "ttl": "0s"}`, 400, "omit ttl"},
		{"ttl of 1ns", "POST", "/v1/drain", `{"service": "api", "ttl": "1ns"}`, 400, "omit ttl"},
		{"ttl under a second", "POST", "/v1/drain", `{"service": "api", "ttl": 0.5}`, 400, "omit ttl"},
		{"ttl over the max", "POST", "/v1/drain", `{"service": "api", "ttl": "721h"}`, 400, "omit ttl"},
		{"ttl of the min", "POST", "/v1/drain", `{"service": "api", "ttl": "1s"}`, 200, `"until"`},
		{"null ttl: until deleted", "POST", "/v1/drain", `{"service": "api", "ttl": null}`, 200, `"service": "api"`},
		{"list", "GET", "/v1/drain", ``, 200, `"sources"`},
		{"undrain", "DELETE", "/v1/drain?service=api&endpoint=a", ``, 200, `"deleted": true`},
		{"undrain again", "DELETE", "/v1/drain", `{"service": "api", "endpoint": "a"}`, 200, `"deleted": false`},
		{"method", "PUT", "/v1/drain", `{}`, 405, "not allowed"},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.url, strings.NewReader(tc.body)))
		if rec.Code != tc.code || !strings.Contains(rec.Body.String(), tc.want) {
			t.Errorf("%s: %s %s %s -> %d %s; want %d containing %q", tc.name, tc.method, tc.url, tc.body, rec.Code, rec.Body, tc.code, tc.want)
		}
	}
	if got := rec200(t, h); !strings.Contains(got, `"drains"`) {
		t.Errorf("GET /v1/drain = %s", got)
	}
}

func rec200(t *testing.T, h http.Handler) string {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/v1/drain", nil))
	if rec.Code != 200 {
		t.Fatalf("GET /v1/drain: %d", rec.Code)
	}
	return rec.Body.String()
}

func TestDrainsORCA(t *testing.T) {
	now := drainT0
	var mu sync.Mutex
	emitted := make(chan discovery.Snapshot, 16)
	s, err := New(Config{Emit: func(s discovery.Snapshot) { emitted <- s }, Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.Observe(drainWorld(ep("a")))
	<-emitted
	s.SetORCA("api", "a", true) // applied and emitted before it returns
	if len(emitted) != 1 {
		t.Fatalf("%d snapshots emitted by SetORCA, want 1 before it returns", len(emitted))
	}
	if h, why, _ := drainOf(<-emitted, "a"); h != discovery.HealthDraining || why != SourceORCA {
		t.Errorf("after the lame-duck report: %v %q", h, why)
	}
	s.SetORCA("api", "a", false)
	if h, _, _ := drainOf(<-emitted, "a"); h != discovery.HealthHealthy {
		t.Errorf("after lame duck ended: %v", h)
	}
	s.SetORCA("api", "a", false)
	if len(emitted) != 0 {
		t.Error("an unchanged lame-duck state emitted a snapshot")
	}
}
