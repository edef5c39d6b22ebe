package weights

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// pushServices are the endpoints the push tests' tracker knows.
var pushServices = map[string][]string{"api": {"api-1", "api-2", "api-3"}, "db": {"db-1"}}

// pushHarness is a handler over a real tracker behind a real server.
type pushHarness struct {
	tr  *Tracker
	h   *httpHandler
	srv *httptest.Server
	now time.Time // the handler's clock
}

func newPushHarness(t *testing.T, edit func(*HTTPConfig)) *pushHarness {
	t.Helper()
	tr, err := NewTracker(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	for name, ids := range pushServices {
		eps := make([]Endpoint, len(ids))
		for i, id := range ids {
			eps[i] = Endpoint{ID: id}
		}
		if err := tr.SetEndpoints(name, eps); err != nil {
			t.Fatal(err)
		}
	}
	p := &pushHarness{tr: tr, now: t0}
	cfg := HTTPConfig{Sink: tr, Now: func() time.Time { return p.now }, Registerer: prometheus.NewRegistry()}
	if edit != nil {
		edit(&cfg)
	}
	h, err := NewHTTPHandler(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p.h = h.(*httpHandler)
	p.srv = httptest.NewServer(h)
	t.Cleanup(p.srv.Close)
	return p
}

// pushResponse is a decoded answer of the handler.
type pushResponse struct {
	status   int
	header   http.Header
	Accepted int    `json:"accepted"`
	Error    string `json:"error"`
}

// do sends body through the server and decodes the JSON answer.
func (p *pushHarness) do(t *testing.T, method, body string) pushResponse {
	t.Helper()
	req, err := http.NewRequest(method, p.srv.URL+"/v1/load", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := p.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	return decodeAnswer(t, resp.StatusCode, resp.Header, resp.Body)
}

// record serves body without a server; with unknownLength the request has
// no Content-Length (as a chunked one), so the limit hits while reading.
// (A real server lingers 500 ms closing a connection with unread body.)
func (p *pushHarness) record(t *testing.T, body string, unknownLength bool) pushResponse {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/v1/load", strings.NewReader(body))
	if unknownLength {
		req.ContentLength = -1
	}
	rec := httptest.NewRecorder()
	p.h.ServeHTTP(rec, req)
	return decodeAnswer(t, rec.Code, rec.Header(), rec.Body)
}

func decodeAnswer(t *testing.T, status int, header http.Header, body io.Reader) pushResponse {
	t.Helper()
	out := pushResponse{status: status, header: header}
	if ct := header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	if err := json.NewDecoder(body).Decode(&out); err != nil {
		t.Fatalf("decoding the answer: %v", err)
	}
	return out
}

// observed returns the rows of the endpoints that have a report.
func (p *pushHarness) observed(t *testing.T) map[string]Row {
	t.Helper()
	got := map[string]Row{}
	for _, s := range p.tr.Update(p.now).Services {
		for _, r := range s.Rows {
			if !r.LastReport.IsZero() {
				got[s.Name+"/"+r.Endpoint] = r
			}
		}
	}
	return got
}

func TestHTTPLoad(t *testing.T) {
	const (
		api1 = `{"service": "api", "endpoint": "api-1", "utilization": 0.42, "qps": 120.5, "eps": 0.3}`
		api2 = `{"service": "api", "endpoint": "api-2", "cpu_utilization": 0.5, "qps": 50, "named": {"mem": 0.7}}`
		db1  = `{"service": "db", "endpoint": "db-1", "application_utilization": 0.25, "cpu_utilization": 0.9, "qps": 10}`
	)
	for name, tc := range map[string]struct {
		method   string // "" is POST
		body     string
		status   int
		errs     []string // substrings of the error
		accepted int
		observed []string // service/endpoint with a report afterwards
		check    func(t *testing.T, rows map[string]Row)
	}{
		"single report": {
			body: api1, status: 200, accepted: 1, observed: []string{"api/api-1"},
			check: func(t *testing.T, rows map[string]Row) {
				r := rows["api/api-1"]
				if r.QPS != 120.5 || r.EPS != 0.3 || r.Utilization != 0.42 || !r.LastReport.Equal(t0) {
					t.Errorf("row %+v", r)
				}
			},
		},
		"batch": {
			body:   `{"reports": [` + api1 + `, ` + api2 + `, ` + db1 + `]}`,
			status: 200, accepted: 3, observed: []string{"api/api-1", "api/api-2", "db/db-1"},
			check: func(t *testing.T, rows map[string]Row) {
				if r := rows["api/api-2"]; r.Utilization != 0.5 || !maps.Equal(r.Named, map[string]float64{"mem": 0.7}) {
					t.Errorf("cpu utilization and named metrics: %+v", r)
				}
				if r := rows["db/db-1"]; r.Utilization != 0.25 {
					t.Errorf("application utilization must win over cpu: %+v", r)
				}
			},
		},
		"bare array":          {body: "[" + api1 + "," + db1 + "]\n", status: 200, accepted: 2, observed: []string{"api/api-1", "db/db-1"}},
		"method not allowed":  {method: http.MethodGet, status: 405, errs: []string{"method GET not allowed"}},
		"not json":            {body: "service=api", status: 400, errs: []string{"malformed load", "invalid character"}},
		"empty body":          {body: "", status: 400, errs: []string{"malformed load", "EOF"}},
		"truncated":           {body: `{"service": "api"`, status: 400, errs: []string{"malformed load", "unexpected EOF"}},
		"not an object":       {body: `42`, status: 400, errs: []string{"must be a JSON object or array"}},
		"unknown field":       {body: `{"service": "api", "endpoint": "api-1", "cpu": 0.5}`, status: 400, errs: []string{`unknown field "cpu"`}},
		"trailing object":     {body: api1 + " {}", status: 400, errs: []string{"trailing data"}},
		"trailing garbage":    {body: api1 + "x", status: 400, errs: []string{"trailing data"}},
		"empty batch":         {body: `{"reports": []}`, status: 400, errs: []string{"no reports"}},
		"empty array":         {body: `[]`, status: 400, errs: []string{"no reports"}},
		"null reports":        {body: `{"reports": null}`, status: 400, errs: []string{"reports must be an array"}},
		"batch with a report": {body: `{"reports": [` + api1 + `], "service": "api"}`, status: 400, errs: []string{"cannot have report fields"}},
		"element not object":  {body: `[` + api1 + `, 7]`, status: 400, errs: []string{"report 1 is not an object"}},
		"unknown field in batch": {
			body: `[` + api1 + `, {"service": "api", "endpoint": "api-2", "reports": []}]`, status: 400,
			errs: []string{"report 1", `unknown field "reports"`},
		},
		"huge number": {
			body:   `{"service": "api", "endpoint": "api-1", "qps": 1e400}`,
			status: 400, errs: []string{`invalid report "api"/"api-1"`, "qps 1e400 is out of range"},
		},
		"huge named metric": {
			body:   `{"service": "api", "endpoint": "api-1", "named": {"mem": -1e999}}`,
			status: 400, errs: []string{`named "mem" -1e999 is out of range`},
		},
		"negative qps in a batch": {
			body:   `[` + api1 + `, {"service": "api", "endpoint": "api-2", "qps": -3}]`,
			status: 400, errs: []string{"report 1", "qps is negative (-3)"},
		},
		"absurd utilization": {
			body:   `{"service": "api", "endpoint": "api-1", "utilization": 1000}`,
			status: 400, errs: []string{"utilization 1000 is absurd"},
		},
		"absurd eps": {
			body:   `{"service": "api", "endpoint": "api-1", "eps": 2e9}`,
			status: 400, errs: []string{"eps 2e+09 is absurd"},
		},
		"number as a string": {
			body:   `{"service": "api", "endpoint": "api-1", "qps": "12"}`,
			status: 400, errs: []string{"qps is not a number"},
		},
		"service not a string": {body: `{"service": 1, "endpoint": "api-1"}`, status: 400, errs: []string{"service is not a string"}},
		"missing endpoint":     {body: `{"service": "api", "qps": 1}`, status: 400, errs: []string{"endpoint is empty"}},
		"both utilizations": {
			body:   `{"service": "api", "endpoint": "api-1", "utilization": 0.5, "application_utilization": 0.5}`,
			status: 400, errs: []string{"synonyms"},
		},
		"unknown endpoint": {
			body:   `{"service": "api", "endpoint": "api-9", "qps": 1}`,
			status: 400, errs: []string{"unknown endpoint", `"api"/"api-9"`},
		},
		"unknown service": {
			body:   `[` + api1 + `, {"service": "web", "endpoint": "api-1"}, {"service": "x", "endpoint": "y"}]`,
			status: 400, errs: []string{`report 1: weights: unknown endpoint: "web"/"api-1"`, `report 2: weights: unknown endpoint: "x"/"y"`},
		},
		"all or nothing on an invalid element": {
			body:   `{"reports": [` + api1 + `, ` + api2 + `, {"service": "db", "endpoint": "db-1", "utilization": -1}]}`,
			status: 400, errs: []string{"report 2", "utilization is negative"},
		},
		"all or nothing on an unknown endpoint": {
			body:   `[` + api1 + `, ` + db1 + `, {"service": "db", "endpoint": "db-2"}]`,
			status: 400, errs: []string{"report 2", `"db"/"db-2"`},
		},
	} {
		t.Run(name, func(t *testing.T) {
			p := newPushHarness(t, nil)
			got := p.do(t, cmp.Or(tc.method, http.MethodPost), tc.body)
			if got.status != tc.status || got.Accepted != tc.accepted {
				t.Fatalf("status %d accepted %d (error %q), want %d and %d", got.status, got.Accepted, got.Error, tc.status, tc.accepted)
			}
			for _, want := range tc.errs {
				if !strings.Contains(got.Error, want) {
					t.Errorf("error %q does not contain %q", got.Error, want)
				}
			}
			if len(tc.errs) > 0 && !strings.HasPrefix(got.Error, "weights: http: ") {
				t.Errorf("error %q lacks the package prefix", got.Error)
			}
			if tc.status == 405 && got.header.Get("Allow") != http.MethodPost {
				t.Errorf("Allow %q", got.header.Get("Allow"))
			}
			rows := p.observed(t)
			if ids := slices.Sorted(maps.Keys(rows)); !slices.Equal(ids, tc.observed) {
				t.Errorf("observed %v, want %v", ids, tc.observed)
			}
			if tc.check != nil {
				tc.check(t, rows)
			}
		})
	}
}

func TestHTTPBodyTooLarge(t *testing.T) {
	body := `{"service": "api", "endpoint": "api-1", "qps": 1, "cpu_utilization": 0.5}` // 74 bytes
	for name, tc := range map[string]struct {
		maxBody       int64
		unknownLength bool // no Content-Length: the limit hits while reading
		status        int
	}{
		"declared length over the limit": {maxBody: 64, status: 413},
		"unknown length over the limit":  {maxBody: 64, unknownLength: true, status: 413},
		"at the limit":                   {maxBody: int64(len(body)), status: 200},
		"unknown length at the limit":    {maxBody: int64(len(body)), unknownLength: true, status: 200},
		"default limit":                  {status: 200},
	} {
		t.Run(name, func(t *testing.T) {
			p := newPushHarness(t, func(c *HTTPConfig) { c.MaxBody = tc.maxBody })
			got := p.record(t, body, tc.unknownLength)
			if got.status != tc.status {
				t.Fatalf("status %d (%q), want %d", got.status, got.Error, tc.status)
			}
			if tc.status == 413 && (!strings.Contains(got.Error, "too large") || len(p.observed(t)) != 0) {
				t.Errorf("error %q, observed %v", got.Error, p.observed(t))
			}
		})
	}
	p := newPushHarness(t, nil)
	if got := p.record(t, strings.Repeat(" ", DefaultHTTPMaxBody)+body, true); got.status != 413 {
		t.Errorf("body over the default 1 MiB: status %d", got.status)
	}
}

// pushBatch is a batch of n reports of api-1.
func pushBatch(n int) string {
	one := `{"service":"api","endpoint":"api-1","qps":1,"cpu_utilization":0.5}`
	return "[" + strings.TrimSuffix(strings.Repeat(one+",", n), ",") + "]"
}

func TestHTTPReportLimit(t *testing.T) {
	p := newPushHarness(t, nil)
	if got := p.do(t, http.MethodPost, pushBatch(maxHTTPReports)); got.status != 200 || got.Accepted != maxHTTPReports {
		t.Errorf("10,000 reports: status %d accepted %d (%q)", got.status, got.Accepted, got.Error)
	}
	got := p.do(t, http.MethodPost, `{"reports": `+pushBatch(maxHTTPReports+1)+`}`)
	if got.status != 413 || !strings.Contains(got.Error, "too many reports: more than 10000") {
		t.Errorf("10,001 reports: status %d (%q)", got.status, got.Error)
	}
}

// TestHTTPUpdateShowsReports pushes loads until the blackout is over: the
// tracker's weights follow the pushed utilizations.
func TestHTTPUpdateShowsReports(t *testing.T) {
	p := newPushHarness(t, nil)
	body := `{"reports": [
		{"service": "api", "endpoint": "api-1", "utilization": 0.2, "qps": 100},
		{"service": "api", "endpoint": "api-2", "utilization": 0.4, "qps": 100},
		{"service": "api", "endpoint": "api-3", "utilization": 0.8, "qps": 100}]}`
	for i := range 3 {
		p.now = t0.Add(time.Duration(i) * DefaultBlackoutPeriod)
		if got := p.do(t, http.MethodPost, body); got.status != 200 || got.Accepted != 3 {
			t.Fatalf("push %d: status %d accepted %d (%q)", i, got.status, got.Accepted, got.Error)
		}
	}
	tab := p.tr.Update(p.now)
	s, _ := tab.Service("api")
	for _, r := range s.Rows {
		if r.Reason != ReasonReported || !r.LastReport.Equal(p.now) || r.QPS != 100 {
			t.Errorf("row %+v", r)
		}
	}
	w1, _ := tab.Weight("api", "api-1")
	w2, _ := tab.Weight("api", "api-2")
	w3, _ := tab.Weight("api", "api-3")
	if w1 != 2*w2 || w2 != 2*w3 {
		t.Errorf("weights %d %d %d, want 4:2:1", w1, w2, w3)
	}
}

func TestHTTPMetrics(t *testing.T) {
	p := newPushHarness(t, nil)
	p.do(t, http.MethodPost, pushBatch(2))
	p.do(t, http.MethodPost, `{"service": "api", "endpoint": "api-1", "qps": -1}`)
	p.do(t, http.MethodPost, `{"service": "api", "endpoint": "nope"}`)
	p.do(t, http.MethodPut, `{}`)
	p.do(t, http.MethodPost, `[`)
	if got := testutil.ToFloat64(p.h.accepted); got != 2 {
		t.Errorf("accepted %v, want 2", got)
	}
	for reason, want := range map[string]float64{"invalid_report": 1, "unknown_endpoint": 1, "method": 1, "malformed": 1, "too_large": 0, "sink_error": 0} {
		if got := testutil.ToFloat64(p.h.rejected.WithLabelValues(reason)); got != want {
			t.Errorf("rejected{reason=%q} %v, want %v", reason, got, want)
		}
	}
}

// failingSink is a sink without Known that fails at its failAt-th report.
type failingSink struct {
	seen   int
	failAt int
	err    error
}

func (s *failingSink) Observe(Report, time.Time) error {
	if s.seen++; s.seen == s.failAt {
		return s.err
	}
	return nil
}

// TestHTTPSinkErrors: a sink that cannot check ahead stops the batch where
// it fails; the answer says how many reports it took.
func TestHTTPSinkErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		err    error
		status int
	}{
		"unknown endpoint": {err: fmt.Errorf("sink: %w", ErrUnknownEndpoint), status: 400},
		"invalid report":   {err: fmt.Errorf("sink: %w", ErrInvalidReport), status: 400},
		"other error":      {err: errors.New("store down"), status: 500},
	} {
		t.Run(name, func(t *testing.T) {
			sink := &failingSink{failAt: 3, err: tc.err}
			p := newPushHarness(t, func(c *HTTPConfig) { c.Sink = sink })
			got := p.do(t, http.MethodPost, pushBatch(4))
			if got.status != tc.status || got.Accepted != 2 || !strings.Contains(got.Error, "report 2: "+tc.err.Error()) {
				t.Errorf("status %d accepted %d error %q", got.status, got.Accepted, got.Error)
			}
			if a := testutil.ToFloat64(p.h.accepted); a != 2 {
				t.Errorf("accepted counter %v", a)
			}
		})
	}
}

func TestNewHTTPHandler(t *testing.T) {
	tr, _ := NewTracker(DefaultConfig())
	for name, tc := range map[string]struct {
		cfg  HTTPConfig
		want []string
	}{
		"no sink":         {cfg: HTTPConfig{}, want: []string{"sink is nil"}},
		"nil tracker":     {cfg: HTTPConfig{Sink: (*Tracker)(nil)}, want: []string{"nil *Tracker"}},
		"negative limit":  {cfg: HTTPConfig{Sink: tr, MaxBody: -1}, want: []string{"max body -1 is negative"}},
		"everything else": {cfg: HTTPConfig{MaxBody: -5}, want: []string{"sink is nil", "max body -5"}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := NewHTTPHandler(tc.cfg)
			checkErr(t, err, ErrInvalidConfig, tc.want)
			if err != nil && !strings.HasPrefix(err.Error(), "weights: http: invalid config: ") {
				t.Errorf("error %q", err)
			}
		})
	}
	reg := prometheus.NewRegistry()
	if _, err := NewHTTPHandler(HTTPConfig{Sink: tr, Registerer: reg}); err != nil {
		t.Fatal(err)
	}
	if n, err := testutil.GatherAndCount(reg, "xds_weights_http_reports_total", "xds_weights_http_rejected_total"); err != nil || n != 9 {
		t.Errorf("registered series %d, %v; want 9 (accepted, and 8 reasons)", n, err)
	}
	if _, err := NewHTTPHandler(HTTPConfig{Sink: tr, Registerer: reg}); err == nil {
		t.Error("registering the metrics twice: no error")
	}
}
