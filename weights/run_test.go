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
