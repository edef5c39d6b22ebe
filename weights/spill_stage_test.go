package weights

import (
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"

	"github.com/xds-server/xds-server/discovery"
)

// spillRecorder is a Publisher that takes spill states.
type spillRecorder struct {
	fakePublisher
	smu   sync.Mutex
	spill []map[string]map[ZoneKey]ZoneSpill // every SetSpill, in order
}

func (r *spillRecorder) SetSpill(m map[string]map[ZoneKey]ZoneSpill) {
	r.smu.Lock()
	defer r.smu.Unlock()
	r.spill = append(r.spill, m)
}

func (r *spillRecorder) calls() int {
	r.smu.Lock()
	defer r.smu.Unlock()
	return len(r.spill)
}

func (r *spillRecorder) last() map[string]map[ZoneKey]ZoneSpill {
	r.smu.Lock()
	defer r.smu.Unlock()
	return r.spill[len(r.spill)-1]
}

// spillSnapshot is service api (spill on) with a1, a2 in zone dc1/a and
// b1, b2 in dc1/b, b2 in the given health, and web (weights, no spill).
func spillSnapshot(b2 discovery.Health, withB bool) discovery.Snapshot {
	ep := func(id, zone string, h discovery.Health) discovery.Endpoint {
		return discovery.Endpoint{ID: id, Address: "10.0.0." + id[1:], Port: 80, Weight: 1, Health: h,
			Locality: discovery.Locality{Region: "dc1", Zone: zone}}
	}
	api := []discovery.Endpoint{ep("a1", "a", discovery.HealthHealthy), ep("a2", "a", discovery.HealthUnknown)}
	if withB {
		api = append(api, ep("b1", "b", discovery.HealthHealthy), ep("b2", "b", b2))
	}
	return discovery.Snapshot{Services: []discovery.Service{{Name: "api", Endpoints: api},
		{Name: "web", Endpoints: []discovery.Endpoint{ep("w1", "a", discovery.HealthHealthy)}}}}
}

// newSpillPipeline is a pipeline of api (spill on) and web (no spill),
// with ha set (nil: alone).
func newSpillPipeline(t *testing.T, ha *HAConfig) (*Pipeline, *spillRecorder, *prometheus.Registry) {
	t.Helper()
	rec, reg, g := &spillRecorder{}, prometheus.NewRegistry(), grpc.NewServer()
	t.Cleanup(g.Stop)
	src := []string{SourceHTTP}
	services := map[string]ServiceConfig{"api": {Enabled: true, Sources: src, Spill: true}, "web": {Enabled: true, Sources: src}}
	p, err := NewPipeline(PipelineConfig{
		Tracker: DefaultConfig(), Solve: DefaultSolveConfig(),
		Services:  func(s string) ServiceConfig { return services[s] },
		Publisher: rec, GRPC: g, Registerer: reg, HA: ha,
		UpdatePeriod: time.Second, MinPushInterval: time.Second, ORCAInterval: time.Second, LRSInterval: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.orca.Close)
	return p, rec, reg
}

// reportLoad has endpoint id of api report utilization u at capacity c
// (requests/s at utilization 1).
func reportLoad(t *testing.T, p *Pipeline, id string, c, u float64, at time.Time) {
	t.Helper()
	if err := p.sink(SourceHTTP).Observe(Report{Service: "api", Endpoint: id, At: at, QPS: c * u, CPU: u}, at); err != nil {
		t.Fatal(err)
	}
}

// spillStarted is a spill pipeline after its first step: zone a's two
// endpoints at 0.5 of 90 requests/s each, zone b's b1 at 0.1 of 100 and
// b2, draining, at 0.5 of 100. It checks the first publication: api's
// zones (not web's), b2 no capacity.
func spillStarted(t *testing.T) (*Pipeline, *spillRecorder, *prometheus.Registry, time.Time) {
	t.Helper()
	p, rec, reg := newSpillPipeline(t, nil)
	p.Observe(spillSnapshot(discovery.HealthDraining, true))
	for _, id := range []string{"a1", "a2"} {
		reportLoad(t, p, id, 90, 0.5, t0) // zone a: 180 of capacity at 0.5
	}
	reportLoad(t, p, "b1", 100, 0.1, t0)
	reportLoad(t, p, "b2", 100, 0.5, t0) // draining: not capacity
	p.Step(t0)
	if rec.calls() != 1 {
		t.Fatalf("first step: %d publications, want 1 (zones appeared)", rec.calls())
	}
	got := rec.last()
	if _, ok := got["web"]; ok || len(got["api"]) != 2 {
		t.Fatalf("published %v, want api's two zones only", got)
	}
	if b := got["api"][zoneB]; b.Capacity != 100 || b.Keep != 1 || b.Spare != 80 {
		t.Errorf("zone b %+v, want capacity 100 (b2 drains), spare 0.9*100-10", b)
	}
	if a := got["api"][zoneA]; a.Capacity != 180 || a.Utilization != 0.5 {
		t.Errorf("zone a %+v, want capacity 180 at 0.5", a)
	}
	return p, rec, reg, t0
}

// The spill stage publishes when zones appear, when a zone's Keep moves,
// and when a zone leaves; not at steps where nothing moved. Draining
// endpoints are no capacity, and services without spill are not shown.
func TestSpillStagePublishesOnChangeOnly(t *testing.T) {
	p, rec, reg, now := spillStarted(t)
	now = stepFor(p, now, 3) // nothing moved
	if rec.calls() != 1 {
		t.Fatalf("%d publications while nothing moved, want 1", rec.calls())
	}

	for _, id := range []string{"a1", "a2"} { // zone a at 0.99: it spills its excess once a period has seen it
		reportLoad(t, p, id, 90, 0.99, now)
	}
	overloaded := now
	for rec.calls() == 1 && now.Sub(overloaded) < 15*time.Second {
		now = now.Add(time.Second)
		p.Step(now)
	}
	if rec.calls() != 2 {
		t.Fatalf("zone a at 0.99 for %v: %d publications, want one more", now.Sub(overloaded), rec.calls())
	}
	if a := rec.last()["api"][zoneA]; a.Keep < 0.9/0.99-1e-9 || a.Keep > 0.91 {
		t.Errorf("zone a keeps %v after the move, want 0.9/0.99", a.Keep)
	}
	t.Logf("Keep moved %v after the overload was reported (period %v)", now.Sub(overloaded), DefaultOverloadPeriod)

	for _, id := range []string{"a1", "a2"} { // the spill took: zone a in the band
		reportLoad(t, p, id, 90, 0.85, now)
	}
	calls := rec.calls()
	now = stepFor(p, now, 20)
	if rec.calls() != calls {
		t.Errorf("%d publications with zone a in the band, want none", rec.calls()-calls)
	}
	if v := testutil.ToFloat64(p.spill.keep.WithLabelValues("api", "dc1", "a")); v > 0.91 {
		t.Errorf("xds_weights_zone_keep{zone a} = %v, want the spill's", v)
	}
	st, _ := p.Table().Service("api")
	if len(st.Zones) != 2 || st.Zones[0].Reason != SpillSpilling || st.Zones[1].Serving != 1 || st.Zones[1].Endpoints != 2 {
		t.Errorf("/debug/weights zones %+v, want a spilling, b with 1 of 2 serving", st.Zones)
	}

	p.Observe(spillSnapshot(discovery.HealthHealthy, false)) // zone b left
	p.Step(now.Add(time.Second))
	if rec.calls() != calls+1 || len(rec.last()["api"]) != 1 {
		t.Errorf("zone b left: %d publications, last %v, want one more with zone a alone", rec.calls()-calls, rec.last())
	}
	if n := testutil.CollectAndCount(p.spill.keep); n != 1 {
		t.Errorf("%d xds_weights_zone_keep series, want 1 (zone b's deleted)", n)
	}
	if _, err := reg.Gather(); err != nil {
		t.Error(err)
	}
}

// stepFor steps p n times, one second apart after now, and returns the
// time of the last step.
func stepFor(p *Pipeline, now time.Time, n int) time.Time {
	for range n {
		now = now.Add(time.Second)
		p.Step(now)
	}
	return now
}

func TestZoneLoads(t *testing.T) {
	zoneD, zoneE := ZoneKey{Region: "dc1", Zone: "d"}, ZoneKey{Region: "dc1", Zone: "e"}
	st := ServiceTable{Name: "api", Rows: []Row{
		{Endpoint: "a1", Capacity: 100, QPS: 50},
		{Endpoint: "a2", Capacity: 0, QPS: 30}, // unknown capacity: neither load nor capacity
		{Endpoint: "b1", Capacity: 200, QPS: 20},
		{Endpoint: "b2", Capacity: 200, QPS: 150}, // draining
	}}
	zones := map[string]endpointZone{
		"a1": {zoneA, true}, "a2": {zoneA, true}, "b1": {zoneB, true}, "b2": {zoneB, false},
		"c1": {zoneC, true},                       // not in the table yet
		"c2": {zoneC, true}, "c3": {zoneC, false}, // idle; c3 unhealthy
		"d1": {zoneD, true}, "d2": {zoneD, true}, // d1 idle, d2 with load but unknown capacity: not idle
		"e1": {zoneE, false}, // none serving
	}
	st.Rows = append(st.Rows, Row{Endpoint: "c2", QPS: 0}, Row{Endpoint: "d1"}, Row{Endpoint: "d2", QPS: 40})
	loads, counts := zoneLoads(st, zones)
	// An idle zone counts its serving endpoints at the mean capacity of
	// those summed, a1 and b1: 150 requests/s.
	for k, want := range map[ZoneKey]ZoneLoad{zoneA: {100, 50}, zoneB: {200, 20}, zoneC: {300, 0}, zoneD: {}, zoneE: {}} {
		if got, ok := loads[k]; !ok || got != want {
			t.Errorf("%v: %+v, want %+v", k, got, want)
		}
	}
	if counts[zoneB] != [2]int{2, 1} || counts[zoneA] != [2]int{2, 1} || counts[zoneC] != [2]int{3, 0} {
		t.Errorf("counts %v", counts)
	}
}
