package xds

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestRouteToUnknownService: a route whose service has no instances is
// counted in xds_route_unknown_service until the service appears.
func TestRouteToUnknownService(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := newTestServer(t, Config{Listeners: testListeners(), RateLimitAddress: "127.0.0.1:18081", Registerer: reg})
	unknown := func(service string) float64 {
		return testutil.ToFloat64(s.m.unknownRoute.WithLabelValues(service))
	}
	s.Update(world(2, 2)) // svc-000 and svc-001; svc-002 (routed by "internal") is missing
	s.rec.reconcile()
	if got := unknown("svc-002"); got != 1 {
		t.Errorf("svc-002 without instances: %v routes counted, want 1", got)
	}
	if got := unknown("svc-000"); got != 0 {
		t.Errorf("svc-000 with instances: %v, want 0", got)
	}
	s.Update(world(3, 2))
	s.rec.reconcile()
	if got := unknown("svc-002"); got != 0 {
		t.Errorf("svc-002 registered: %v, want 0", got)
	}
}
