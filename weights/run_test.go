package weights

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestRunnerPushPolicy(t *testing.T) {
	cfg := DefaultConfig()
	cfg.BlackoutPeriod, cfg.Smoothing = 0, 1 // every report counts at once, unsmoothed
	tr, err := NewTracker(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.SetEndpoints("api", []Endpoint{{ID: "a"}, {ID: "b"}}); err != nil {
		t.Fatal(err)
	}
	var published []Table
	r, err := NewRunner(RunnerConfig{Tracker: tr, Publish: func(t Table) { published = append(published, t) },
		MinPushInterval: 5 * time.Second, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1_000_000, 0)
	report := func(at time.Time, endpoint string, util float64) {
		t.Helper()
		if err := tr.Observe(Report{Service: "api", Endpoint: endpoint, At: at, QPS: 100, CPU: util}, at); err != nil {
			t.Fatal(err)
		}
	}
	report(t0, "a", 0.5)
	report(t0, "b", 0.5)
	steps := []struct {
		at      time.Duration
		util    map[string]float64 // reports just before the step
		publish bool
		why     string
	}{
		{0, nil, true, "the first table is always published"},
		{time.Second, map[string]float64{"a": 0.5, "b": 0.5}, false, "nothing changed"},
		{2 * time.Second, map[string]float64{"a": 0.2, "b": 0.8}, false, "changed, but within the min push interval"},
		{5 * time.Second, map[string]float64{"a": 0.2, "b": 0.8}, true, "changed and the interval has passed"},
		{11 * time.Second, map[string]float64{"a": 0.201, "b": 0.8}, false, "a change below min_change"},
	}
	for _, st := range steps {
		at := t0.Add(st.at)
		for ep, u := range st.util {
			report(at, ep, u)
		}
		if got := r.Step(at); got != st.publish {
			t.Errorf("step at +%v: published %v, want %v (%s)", st.at, got, st.publish, st.why)
		}
	}
	if len(published) != 2 {
		t.Fatalf("published %d tables, want 2", len(published))
	}
	w := published[1].Map()["api"]
	if w["a"] <= w["b"] {
		t.Errorf("the less utilized endpoint should weigh more: %v", w)
	}
	if got := testutil.ToFloat64(r.publishes); got != 2 {
		t.Errorf("xds_weights_publishes_total = %v, want 2", got)
	}

	rec := httptest.NewRecorder()
	r.DebugHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/debug/weights?service=api", nil))
	var st ServiceTable
	if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil || rec.Code != http.StatusOK || len(st.Rows) != 2 {
		t.Errorf("/debug/weights?service=api: %d %s (%v)", rec.Code, rec.Body, err)
	}
	rec = httptest.NewRecorder()
	r.DebugHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/debug/weights?service=nope", nil))
	if rec.Code != http.StatusNotFound {
		t.Errorf("unknown service: %d, want 404", rec.Code)
	}
}

func TestRunnerConfigValidate(t *testing.T) {
	tr, _ := NewTracker(DefaultConfig())
	for name, cfg := range map[string]RunnerConfig{
		"no tracker":      {Publish: func(Table) {}},
		"no publish":      {Tracker: tr},
		"negative period": {Tracker: tr, Publish: func(Table) {}, UpdatePeriod: -time.Second},
		"min change 1":    {Tracker: tr, Publish: func(Table) {}, MinChange: 1},
	} {
		if _, err := NewRunner(cfg); err == nil {
			t.Errorf("%s: want an error", name)
		}
	}
}

func TestRunnerPublishesNodesAtMostOncePerInterval(t *testing.T) {
	tr, err := NewTracker(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.SetEndpoints("api", []Endpoint{{ID: "a"}}); err != nil {
		t.Fatal(err)
	}
	globals, calls := 0, 0
	nodesChange := true
	r, err := NewRunner(RunnerConfig{Tracker: tr, Publish: func(Table) { globals++ },
		PublishNodes:    func(Table) bool { calls++; return nodesChange },
		MinPushInterval: 5 * time.Second, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1_000_000, 0)
	// Every second for 20 s, the nodes' weights always change: they are
	// planned, and pushed, once per 5 s; the unchanged global table once.
	for s := range 20 {
		r.Step(t0.Add(time.Duration(s) * time.Second))
	}
	if calls != 4 || globals != 1 {
		t.Errorf("20 steps of 1s: PublishNodes called %d times, Publish %d; want 4 and 1", calls, globals)
	}
	if got := testutil.ToFloat64(r.nodePublishes); got != 4 {
		t.Errorf("xds_weights_node_publishes_total = %v, want 4", got)
	}
	// Nothing changes for the nodes: they are asked every step once due.
	nodesChange = false
	calls = 0
	for s := 20; s < 23; s++ {
		r.Step(t0.Add(time.Duration(s) * time.Second))
	}
	if calls != 3 {
		t.Errorf("no node change: PublishNodes called %d times in 3 due steps, want 3", calls)
	}
}

func TestDebugHandlerNode(t *testing.T) {
	tr, _ := NewTracker(DefaultConfig())
	r, err := NewRunner(RunnerConfig{Tracker: tr, Publish: func(Table) {},
		NodeDebug: func(service, node string) (any, bool) {
			return map[string]string{"node": node}, service == "api" && node == "n1"
		}})
	if err != nil {
		t.Fatal(err)
	}
	for url, want := range map[string]int{
		"/debug/weights?service=api&node=n1": http.StatusOK,
		"/debug/weights?service=api&node=n2": http.StatusNotFound,
		"/debug/weights?node=n1":             http.StatusBadRequest,
	} {
		rec := httptest.NewRecorder()
		r.DebugHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, url, nil))
		if rec.Code != want {
			t.Errorf("GET %s: %d %s, want %d", url, rec.Code, rec.Body, want)
		}
	}
}
