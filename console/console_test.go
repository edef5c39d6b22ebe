package console

import (
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/xds-server/xds-server/discovery"
	"github.com/xds-server/xds-server/drain"
	"github.com/xds-server/xds-server/weights"
	"github.com/xds-server/xds-server/xds"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// fakes of the console's sources (unit tests of the views only).
type fakeFleet struct {
	nodes   []xds.Node
	subsets map[string]xds.SubsetSummary
	node    map[string]xds.SubsetNode    // by service/node
	levels  map[string]xds.ServiceLevels // by service/node
	calls   *int                         // SubsetSummary calls, if set
	listed  *int                         // Nodes calls, if set
}

func (f fakeFleet) Nodes() []xds.Node {
	if f.listed != nil {
		*f.listed++
	}
	return f.nodes
}
func (f fakeFleet) SubsetSummary(s string, maxNodes int) (xds.SubsetSummary, bool) {
	if f.calls != nil {
		*f.calls++
	}
	r, ok := f.subsets[s]
	r.Nodes = r.Nodes[:min(len(r.Nodes), maxNodes)]
	return r, ok
}
func (f fakeFleet) SubsetOf(s, node string) (xds.SubsetNode, bool) {
	n, ok := f.node[s+"/"+node]
	return n, ok
}
func (f fakeFleet) LevelsOf(s, node string) (xds.ServiceLevels, bool) {
	l, ok := f.levels[s+"/"+node]
	return l, ok
}

type fakeWeights struct{ t weights.Table }

func (f fakeWeights) Table() weights.Table { return f.t }

type fakeDrains struct{ s drain.State }

func (f fakeDrains) State() drain.State { return f.s }

func testSnapshot() discovery.Snapshot {
	return discovery.Snapshot{Services: []discovery.Service{
		{Name: "echo", Endpoints: []discovery.Endpoint{
			{ID: "e1", Address: "10.0.0.1", Port: 80, Health: discovery.HealthHealthy},
			{ID: "e2", Address: "10.0.0.2", Port: 80, Health: discovery.HealthDraining, Drain: "admin,consul_maintenance"},
			{ID: "e3", Address: "10.0.0.3", Port: 80, Health: discovery.HealthUnhealthy},
		}},
		{Name: "greeter", Endpoints: []discovery.Endpoint{
			{ID: "g1", Address: "10.0.1.1", Port: 90, Health: discovery.HealthDegraded},
		}},
	}}
}

func newTestConsole(t *testing.T, mod func(*Config)) (*Console, *prometheus.Registry, http.Handler) {
	t.Helper()
	reg := prometheus.NewRegistry()
	push := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "xds_push_latency_seconds", Buckets: []float64{0.01, 0.1, 1}}, []string{"type"})
	stale := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "xds_discovery_stale"}, []string{"source"})
	reg.MustRegister(push, stale)
	push.WithLabelValues("eds").Observe(0.005)
	push.WithLabelValues("cds").Observe(0.05)
	push.WithLabelValues("cds").Observe(5)
	stale.WithLabelValues("consul").Set(1)
	cfg := Config{
		Fleet: fakeFleet{
			nodes: []xds.Node{
				{ID: "n1", Cluster: "edge", UserAgent: "envoy", Streams: 1},
				{ID: "n2", Cluster: "grpc-clients", UserAgent: "gRPC Go", Streams: 1,
					LastNACK: &xds.NACK{At: t0, TypeURL: "type.googleapis.com/envoy.config.cluster.v3.Cluster", Error: "bad"}},
				{ID: "n3", Cluster: "edge", UserAgent: "envoy"}, // gone, within the grace period
			},
			subsets: map[string]xds.SubsetSummary{"echo": {Service: "echo", Subsetting: true, Algorithm: "steady", SubsetSize: 2,
				Balance:     xds.Balance{Min: 1, Mean: 1, Max: 1, MaxOverMean: 1},
				Connections: map[string]int{"e1": 2, "e2": 1},
				Nodes:       []string{"n1"}, KnownNodes: 3}},
			node: map[string]xds.SubsetNode{"echo/n1": {ID: "n1", Subset: []string{"e1", "e2"}, Replacements: []string{"e3"}, Endpoints: []string{"e1", "e3"}}},
		},
		Weights: fakeWeights{weights.Table{At: t0, Services: []weights.ServiceTable{{Name: "echo", PredictedSpread: 1.1, Rows: []weights.Row{
			{Endpoint: "e1", Weight: 300, Reason: weights.ReasonReported, Utilization: 0.5, QPS: 150, LastReport: t0.Add(-3 * time.Second)},
			{Endpoint: "e3", Weight: 100, Reason: weights.ReasonReported, Utilization: 0.25, QPS: 25},
		}}}}},
		Drains:   fakeDrains{drain.State{Admin: []drain.Admin{{Target: drain.Target{Service: "echo", Endpoint: "e2"}, Since: t0}}}},
		Gatherer: reg, Registerer: reg, Now: func() time.Time { return t0 },
	}
	if mod != nil {
		mod(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.Observe(testSnapshot())
	mux := http.NewServeMux()
	c.Handlers(mux)
	return c, reg, mux
}

func get(t *testing.T, h http.Handler, path string, want int, v any) string {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	body, _ := io.ReadAll(rec.Body)
	if rec.Code != want {
		t.Fatalf("GET %s: %d, want %d: %s", path, rec.Code, want, body)
	}
	if v != nil {
		if err := json.Unmarshal(body, v); err != nil {
			t.Fatalf("GET %s: %v: %s", path, err, body)
		}
	}
	return string(body)
}

func TestFleetAPI(t *testing.T) {
	_, _, h := newTestConsole(t, nil)
	var v FleetView
	get(t, h, "/ui/api/fleet", http.StatusOK, &v)
	if !v.Ready || len(v.Services) != 2 {
		t.Fatalf("services = %+v", v.Services)
	}
	if want := (ServiceCount{Name: "echo", Endpoints: 3, Healthy: 1, Draining: 1, Unhealthy: 1}); v.Services[0] != want {
		t.Errorf("echo = %+v, want %+v", v.Services[0], want)
	}
	if want := (ServiceCount{Name: "greeter", Endpoints: 1, Degraded: 1}); v.Services[1] != want {
		t.Errorf("greeter = %+v, want %+v", v.Services[1], want)
	}
	if v.Nodes.Connected != 2 || v.Nodes.Known != 3 || v.Nodes.ByCluster["edge"] != 1 || v.Nodes.ByClient["grpc"] != 1 || v.Nodes.ByClient["envoy"] != 1 {
		t.Errorf("nodes = %+v", v.Nodes)
	}
	if len(v.NACKs) != 1 || v.NACKs[0].Node != "n2" || v.NACKs[0].Type != "Cluster" {
		t.Errorf("nacks = %+v", v.NACKs)
	}
	if want := []Problem{{"critical", "discovery source consul is stale: serving the last known endpoints"},
		{"warning", "echo: 1 of 3 endpoints unhealthy, 1 draining"}, {"warning", "1 nodes rejected their last update (NACK)"}}; !slices.Equal(v.Problems, want) {
		t.Errorf("problems = %q, want %q", v.Problems, want)
	}
	if len(v.Discovery) != 1 || !v.Discovery[0].Stale || v.Discovery[0].Source != "consul" {
		t.Errorf("discovery = %+v", v.Discovery)
	}
	// Buckets 0.01, 0.1, 1, +Inf over both types: 1, 1, 0, 1.
	var counts []float64
	for _, b := range v.PushLatency {
		counts = append(counts, b.Count)
	}
	if len(v.PushLatency) != 4 || v.PushLatency[3].Le != nil || *v.PushLatency[0].Le != 0.01 || jsonOf(counts) != "[1,1,0,1]" {
		t.Errorf("push latency = %s", jsonOf(v.PushLatency))
	}
}

func jsonOf(v any) string { b, _ := json.Marshal(v); return string(b) }

func TestServiceAPI(t *testing.T) {
	_, _, h := newTestConsole(t, nil)
	var v ServiceView
	get(t, h, "/ui/api/services/echo?node=n1", http.StatusOK, &v)
	if len(v.Endpoints) != 3 {
		t.Fatalf("endpoints = %+v", v.Endpoints)
	}
	e1, e2 := v.Endpoints[0], v.Endpoints[1]
	if e1.Weight != 300 || e1.Utilization != 0.5 || e1.QPS != 150 || e1.ReportAge == nil || *e1.ReportAge != 3 || e1.Connections != 2 || e1.Address != "10.0.0.1:80" {
		t.Errorf("e1 = %+v", e1)
	}
	if e2.Health != "draining" || strings.Join(e2.Drain, ",") != "admin,consul_maintenance" || e2.Weight != 1 || e2.ReportAge != nil {
		t.Errorf("e2 = %+v", e2)
	}
	// Spread over serving endpoints only: e3 (unhealthy) does not count.
	if v.Spread == nil || *v.Spread != 1 || v.Predicted != 1.1 {
		t.Errorf("spread = %v, predicted %v", v.Spread, v.Predicted)
	}
	if v.Subsets == nil || v.Subsets.Node == nil || strings.Join(v.Subsets.Node.Replacements, ",") != "e3" || len(v.Subsets.Nodes) != 1 {
		t.Errorf("subsets = %+v", v.Subsets)
	}
	if v.History != nil {
		t.Error("history without ?history=1")
	}
	var e map[string]string
	get(t, h, "/ui/api/services/nope", http.StatusNotFound, &e)
	if e["error"] != "unknown service: nope" {
		t.Errorf("unknown service: %v", e)
	}
}

func TestDrainsAPI(t *testing.T) {
	_, _, h := newTestConsole(t, nil)
	var v struct {
		Enabled bool          `json:"enabled"`
		Drains  []drain.Admin `json:"drains"`
	}
	get(t, h, "/ui/api/drains", http.StatusOK, &v)
	if !v.Enabled || len(v.Drains) != 1 || v.Drains[0].Endpoint != "e2" {
		t.Errorf("drains = %+v", v)
	}
	_, _, h = newTestConsole(t, func(c *Config) { c.Drains = nil })
	body := get(t, h, "/ui/api/drains", http.StatusOK, nil)
	if !strings.Contains(body, `"enabled":false`) || !strings.Contains(body, `"drains":[]`) {
		t.Errorf("no drains: %s", body)
	}
}

func TestHistoryAPI(t *testing.T) {
	c, _, h := newTestConsole(t, nil)
	get(t, h, "/ui/api/history/echo", http.StatusNotFound, nil)
	c.Sample(t0)
	c.Sample(t0.Add(10 * time.Second))
	var v History
	get(t, h, "/ui/api/history/echo", http.StatusOK, &v)
	if len(v.Times) != 2 || v.Times[0] != t0.Unix() || v.IntervalSeconds != 10 || len(v.Endpoints) != 3 || len(v.Spread) != 2 {
		t.Fatalf("history = %+v", v)
	}
	body := get(t, h, "/ui/api/history/echo", http.StatusOK, nil)
	// e2 has no utilization: null; e1 weight 300, utilization 0.5.
	if !strings.Contains(body, `{"id":"e1","weight":[300,300],"utilization":[0.5,0.5]}`) ||
		!strings.Contains(body, `{"id":"e2","weight":[1,1],"utilization":[null,null]}`) {
		t.Errorf("history = %s", body)
	}
	var sv ServiceView
	get(t, h, "/ui/api/services/echo?history=1", http.StatusOK, &sv)
	if sv.History == nil || len(sv.History.Times) != 2 {
		t.Errorf("service history = %+v", sv.History)
	}
}

// TestHistoryBounds floods the ring: it never holds more than its points
// or its series, counts what it drops and forgets departed endpoints.
func TestHistoryBounds(t *testing.T) {
	const points, maxSeries = 8, 50
	reg := prometheus.NewRegistry()
	c, err := New(Config{HistoryPoints: points, MaxSeries: maxSeries, Registerer: reg, Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	big := func(round int) discovery.Snapshot {
		var snap discovery.Snapshot
		for s := range 10 {
			svc := discovery.Service{Name: "svc" + strconv.Itoa(s)}
			for e := range 20 {
				svc.Endpoints = append(svc.Endpoints, discovery.Endpoint{ID: "r" + strconv.Itoa(round) + "-" + strconv.Itoa(e), Address: "10.0.0.1", Port: 1})
			}
			snap.Services = append(snap.Services, svc)
		}
		return snap
	}
	for i := range 100 { // new endpoint ids every 10 samples
		c.Observe(big(i / 10))
		c.Sample(t0.Add(time.Duration(i) * 10 * time.Second))
		series, samples := c.history.size()
		if series > maxSeries || samples > points {
			t.Fatalf("sample %d: %d series, %d samples; bounds %d, %d", i, series, samples, maxSeries, points)
		}
	}
	if d := testutil.ToFloat64(c.history.dropped); d == 0 {
		t.Error("nothing dropped, want the series beyond the bound counted")
	}
	h, ok := c.history.of("svc0", time.Second)
	if !ok || len(h.Times) != points {
		t.Fatalf("history of svc0: %v, %d points", ok, len(h.Times))
	}
	for _, e := range h.Endpoints {
		if !strings.HasPrefix(e.ID, "r9-") && !strings.HasPrefix(e.ID, "r8-") {
			t.Errorf("endpoint %s of a round long gone is still held", e.ID)
		}
	}
	if h.Times[0] >= h.Times[points-1] {
		t.Errorf("times not oldest first: %v", h.Times)
	}
}

func TestSpread(t *testing.T) {
	for name, tc := range map[string]struct {
		in   []float64
		want float64
	}{
		"even":    {[]float64{0.5, 0.5}, 1},
		"skewed":  {[]float64{0.9, 0.3}, 1.5},
		"nothing": {nil, math.NaN()},
	} {
		t.Run(name, func(t *testing.T) {
			got := spread(tc.in)
			if !(got == tc.want || math.IsNaN(got) && math.IsNaN(tc.want)) {
				t.Errorf("spread(%v) = %v, want %v", tc.in, got, tc.want)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	err := Config{HistoryInterval: -1, HistoryPoints: 1, MaxSeries: -2}.Validate()
	for _, want := range []string{"history interval -1ns is negative", "history points 1", "max series -2 is negative"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want it to say %q", err, want)
		}
	}
}

func TestProblems(t *testing.T) {
	many := FleetView{}
	for i := range 30 {
		many.Services = append(many.Services, ServiceCount{Name: "s" + strconv.Itoa(i), Endpoints: 2, Healthy: 1, Unhealthy: 1})
	}
	for name, tc := range map[string]struct {
		in   FleetView
		want []Problem
	}{
		"all well": {FleetView{Services: []ServiceCount{{Name: "a", Endpoints: 2, Healthy: 2}}}, []Problem{}},
		"nothing serving comes first": {FleetView{Services: []ServiceCount{
			{Name: "a", Endpoints: 2, Healthy: 1, Draining: 1}, {Name: "b", Endpoints: 2, Unhealthy: 1, Draining: 1}}},
			[]Problem{{"critical", "b: no serving endpoint (1 unhealthy, 1 draining)"}, {"warning", "a: 0 of 2 endpoints unhealthy, 1 draining"}}},
		"bounded": {many, append(func() []Problem {
			var p []Problem
			for i := range maxProblems - 1 {
				p = append(p, Problem{"warning", "s" + strconv.Itoa(i) + ": 1 of 2 endpoints unhealthy, 0 draining"})
			}
			return p
		}(), Problem{"warning", "and 21 more"})},
	} {
		t.Run(name, func(t *testing.T) {
			if got := problems(tc.in); !slices.Equal(got, tc.want) {
				t.Errorf("problems = %q, want %q", got, tc.want)
			}
		})
	}
}
