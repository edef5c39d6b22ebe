package discovery

import (
	"testing"

	"github.com/hashicorp/consul/api"

	"github.com/xds-server/xds-server/e2e/harness"
)

// TestConsulDatacenters reads two real datacenters joined over the WAN
// through dc1's agent: a service of both has the endpoints of both (dc2's
// ids prefixed, each with its datacenter and region), a service of dc2
// alone appears; with dc2's agent stopped its endpoints are kept, it is
// marked stale, and dc1's changes still flow; with dc2 back it resumes.
func TestConsulDatacenters(t *testing.T) {
	agents := harness.ConsulWAN(t, "dc1", "dc2")
	dc1, dc2 := agents[0], agents[1]
	dc1.RegisterFile(t, ttlService("web", "web-1", 8081, map[string]string{"zone": "z1"}, nil))
	dc2.RegisterFile(t, ttlService("web", "web-1", 8091, map[string]string{"zone": "z2"}, nil))
	dc2.RegisterFile(t, ttlService("only2", "only2-1", 9091, nil, nil))

	h := runConsul(t, dc1.Addr(), ConsulConfig{Datacenters: []string{"dc1", "dc2"}})
	first := h.next(t)
	for _, want := range []struct {
		service, id, dc, zone string
		port                  int
	}{{"web", "web-1", "dc1", "z1", 8081}, {"web", "dc2/web-1", "dc2", "z2", 8091}, {"only2", "dc2/only2-1", "dc2", "", 9091}} {
		ep := endpoint(first, want.service, want.id)
		if ep.Port != want.port || ep.Datacenter != want.dc || ep.Locality != (Locality{Region: want.dc, Zone: want.zone}) || ep.Health != HealthHealthy {
			t.Errorf("%s %s = %+v; want port %d in %s, region %s, zone %q, healthy", want.service, want.id, ep, want.port, want.dc, want.dc, want.zone)
		}
	}
	if web, _ := first.Service("web"); len(web.Endpoints) != 2 || len(first.Services) != 2 {
		t.Fatalf("first snapshot = %+v, want web (2 endpoints) and only2", first)
	}

	m := h.metrics
	dc2.Stop()
	eventually(t, "dc2 stale, dc1 not", func() bool {
		return metricValue(t, m.DCStale.WithLabelValues("dc2")) == 1 && metricValue(t, m.DCErrors.WithLabelValues("dc2")) >= 2 &&
			metricValue(t, m.DCStale.WithLabelValues("dc1")) == 0 && metricValue(t, m.DCStaleSince.WithLabelValues("dc2")) > 0
	})
	keepsDC2 := func(s Snapshot) bool {
		return endpoint(s, "web", "dc2/web-1").Port == 8091 && endpoint(s, "only2", "dc2/only2-1").Port == 9091
	}
	if err := dc1.Client().Agent().UpdateTTL("web-1-ttl", "down", api.HealthCritical); err != nil {
		t.Fatal(err)
	}
	got := h.await(t, "dc1's web-1 unhealthy while dc2 is down", func(s Snapshot) bool {
		return health(s, "web")["web-1"] == HealthUnhealthy
	}, keepsDC2)
	if !keepsDC2(got) {
		t.Fatalf("dc2's endpoints gone while dc2 is unreachable: %+v", got)
	}
	if metricValue(t, m.Stale.WithLabelValues(consulSource)) != 1 {
		t.Error("the source is not stale while dc2 is")
	}

	dc2.Start()
	if err := dc2.Client().Agent().ServiceRegister(&api.AgentServiceRegistration{ID: "late-1", Name: "late", Port: 7070}); err != nil {
		t.Fatal(err)
	}
	h.await(t, "dc2's new service after its restart", func(s Snapshot) bool {
		return endpoint(s, "late", "dc2/late-1").Datacenter == "dc2" && keepsDC2(s) && health(s, "web")["web-1"] == HealthUnhealthy
	}, nil)
	eventually(t, "dc2 fresh again", func() bool {
		return metricValue(t, m.DCStale.WithLabelValues("dc2")) == 0 && metricValue(t, m.DCStaleSince.WithLabelValues("dc2")) == 0 &&
			metricValue(t, m.Stale.WithLabelValues(consulSource)) == 0
	})
}

// TestConsulDatacenterDownAtStart: a datacenter that cannot be read when
// the source starts does not hold back the first snapshot (the local one
// is in it); it joins once it answers.
func TestConsulDatacenterDownAtStart(t *testing.T) {
	agents := harness.ConsulWAN(t, "dc1", "dc2")
	dc1, dc2 := agents[0], agents[1]
	dc1.RegisterFile(t, ttlService("web", "web-1", 8081, nil, nil))
	dc2.RegisterFile(t, ttlService("web", "web-1", 8091, nil, nil))
	dc2.Stop()

	h := runConsul(t, dc1.Addr(), ConsulConfig{Datacenters: []string{"dc1", "dc2"}})
	first := h.next(t)
	if ids := health(first, "web"); len(ids) != 1 || ids["web-1"] != HealthHealthy {
		t.Fatalf("first snapshot = %+v, want dc1's web-1 alone", first)
	}
	if metricValue(t, h.metrics.DCStale.WithLabelValues("dc2")) != 1 {
		t.Error("dc2 not stale while it cannot be read")
	}
	dc2.Start()
	h.await(t, "dc2's web-1", func(s Snapshot) bool { return endpoint(s, "web", "dc2/web-1").Port == 8091 }, nil)
}
