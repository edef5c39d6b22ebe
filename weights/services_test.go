package weights

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/xds-server/xds-server/discovery"
)

// TestAnswersTellWhyThereAreNoWeights: /debug/weights and POST /v1/load
// tell a service whose weights are off (409, with the key that turns them
// on) from one discovery does not have (404), and from an unknown
// endpoint of a weighted service (400, as before).
func TestAnswersTellWhyThereAreNoWeights(t *testing.T) {
	p := newTestPipeline(t, map[string]ServiceConfig{"api": {Enabled: true, Sources: []string{SourceHTTP}}}, nil)
	p.Observe(discovery.Snapshot{Services: []discovery.Service{
		{Name: "api", Endpoints: []discovery.Endpoint{{ID: "a1", Address: "10.0.0.1", Port: 80}}},
		{Name: "echo", Endpoints: []discovery.Endpoint{{ID: "e1", Address: "10.0.0.2", Port: 80}}},
	}})
	mux := http.NewServeMux()
	p.Handlers(mux)
	do := func(method, url, body string) (int, string) {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(method, url, strings.NewReader(body)))
		var out struct{ Error string }
		_ = json.Unmarshal(rec.Body.Bytes(), &out)
		return rec.Code, out.Error
	}
	load := func(service, endpoint string) string {
		return `{"service": "` + service + `", "endpoint": "` + endpoint + `", "qps": 10, "cpu_utilization": 0.5}`
	}
	disabled := `weights are not enabled for service echo (set services.echo.weights.enabled: true, or services."*".weights.enabled: true for every service)`
	for name, tc := range map[string]struct {
		method, url, body string
		code              int
		err               string
	}{
		"debug, weights off":           {"GET", "/debug/weights?service=echo", "", http.StatusConflict, disabled},
		"debug, unknown service":       {"GET", "/debug/weights?service=nope", "", http.StatusNotFound, "unknown service nope"},
		"debug, node of a service off": {"GET", "/debug/weights?service=echo&node=n1", "", http.StatusConflict, disabled},
		"load, weights off":            {"POST", "/v1/load", load("echo", "e1"), http.StatusConflict, "weights: http: report 0: " + disabled},
		"load, unknown service":        {"POST", "/v1/load", load("nope", "x"), http.StatusNotFound, "weights: http: report 0: unknown service nope"},
		"load, unknown endpoint":       {"POST", "/v1/load", load("api", "zz"), http.StatusBadRequest, `weights: http: report 0: weights: unknown endpoint: "api"/"zz"`},
		"load, weighted":               {"POST", "/v1/load", load("api", "a1"), http.StatusOK, ""},
	} {
		t.Run(name, func(t *testing.T) {
			code, err := do(tc.method, tc.url, tc.body)
			if code != tc.code || err != tc.err {
				t.Errorf("%s %s: %d %q, want %d %q", tc.method, tc.url, code, err, tc.code, tc.err)
			}
		})
	}
	for reason, want := range map[string]float64{"weights_disabled": 1, "unknown_service": 1, "unknown_endpoint": 1} {
		if got := testutil.ToFloat64(p.push.(*httpHandler).rejected.WithLabelValues(reason)); got != want {
			t.Errorf("xds_weights_http_rejected_total{reason=%s} = %v, want %v", reason, got, want)
		}
	}
}

// TestDebugWeightsWaiting: a weighted service discovery lists but the
// table does not have yet answers 200 with state "waiting", no endpoints
// and a message saying so (not the 404 of an unknown service); after the
// next update it answers its table with state "computed".
func TestDebugWeightsWaiting(t *testing.T) {
	p := newTestPipeline(t, map[string]ServiceConfig{"api": {Enabled: true, Sources: []string{SourceHTTP}}}, nil)
	p.Observe(discovery.Snapshot{Services: []discovery.Service{
		{Name: "api", Endpoints: []discovery.Endpoint{{ID: "a1", Address: "10.0.0.1", Port: 80}}},
	}})
	mux := http.NewServeMux()
	p.Handlers(mux)
	get := func(url string) (int, ServiceAnswer) {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, url, nil))
		var out ServiceAnswer
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatalf("%s: %v in %s", url, err, rec.Body)
		}
		return rec.Code, out
	}
	code, got := get("/debug/weights?service=api")
	want := "weights for service api are not computed yet (weights are recomputed every 1s, weights.update_period, " +
		"for services with endpoints; with ha.enabled, from the leader's table)"
	if code != http.StatusOK || got.State != StateWaiting || got.Name != "api" || got.Rows == nil || len(got.Rows) != 0 || got.Message != want {
		t.Errorf("before the first update: %d %+v, want 200 waiting %q", code, got, want)
	}
	if code, _ := get("/debug/weights?service=api&node=n1"); code != http.StatusNotFound {
		t.Errorf("a node of a waiting service: %d, want 404 (no per-node weights)", code)
	}
	p.runner.Step(time.Unix(1000, 0))
	code, got = get("/debug/weights?service=api")
	if code != http.StatusOK || got.State != StateComputed || got.Message != "" || len(got.Rows) != 1 || got.Rows[0].Endpoint != "a1" {
		t.Errorf("after an update: %d %+v, want 200 computed with a1", code, got)
	}
}
