package console

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/xds-server/xds-server/discovery"
)

// TestDatacenters: the fleet page lists each Consul datacenter, ok or
// stale since when (from the discovery metrics), with a problem line for
// a stale one; the service page shows each endpoint's datacenter.
func TestDatacenters(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := discovery.NewMetrics(reg)
	m.DCStale.WithLabelValues("dc1").Set(0)
	m.DCLastUpdate.WithLabelValues("dc1").Set(float64(t0.Unix()))
	m.DCStale.WithLabelValues("dc2").Set(1)
	m.DCStaleSince.WithLabelValues("dc2").Set(float64(t0.Add(-90 * time.Second).Unix()))
	m.DCErrors.WithLabelValues("dc2").Add(7)
	c, _, h := newTestConsole(t, func(cfg *Config) { cfg.Gatherer = reg })
	c.Observe(discovery.Snapshot{Services: []discovery.Service{{Name: "web", Endpoints: []discovery.Endpoint{
		{ID: "dc2/web-1", Address: "10.1.0.1", Port: 80, Health: discovery.HealthHealthy, Datacenter: "dc2"},
		{ID: "web-1", Address: "10.0.0.1", Port: 80, Health: discovery.HealthHealthy, Datacenter: "dc1"},
	}}}})

	var v FleetView
	get(t, h, "/ui/api/fleet", http.StatusOK, &v)
	want := []DatacenterState{{Datacenter: "dc1", LastSuccess: t0}, {Datacenter: "dc2", Stale: true, StaleSince: t0.Add(-90 * time.Second), Errors: 7}}
	if !slices.Equal(v.Datacenters, want) {
		t.Errorf("datacenters = %+v, want %+v", v.Datacenters, want)
	}
	if !slices.Contains(v.Problems, Problem{"warning", "datacenter dc2 is stale since 03:02:35 UTC: serving its last known endpoints"}) {
		t.Errorf("problems = %q, want dc2's", v.Problems)
	}
	var s ServiceView
	get(t, h, "/ui/api/services/web", http.StatusOK, &s)
	if len(s.Endpoints) != 2 || s.Endpoints[0].Datacenter != "dc2" || s.Endpoints[1].Datacenter != "dc1" {
		t.Errorf("endpoints = %+v, want dc2/web-1 in dc2, web-1 in dc1", s.Endpoints)
	}

	for path, want := range map[string]string{
		"/ui/":             "<tr><td>dc2</td><td>STALE since 2026-01-02 03:02:35 &#43;0000 UTC</td><td>never</td><td>7</td>",
		"/ui/services/web": "<td>dc2/web-1</td><td>10.1.0.1:80</td><td>dc2</td>",
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if body := rec.Body.String(); !strings.Contains(body, want) {
			t.Errorf("GET %s lacks %q:\n%s", path, want, body)
		}
	}
}
