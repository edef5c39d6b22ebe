package weights

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"
)

func TestDecodeLoad(t *testing.T) {
	for name, tc := range map[string]struct {
		body    string
		want    []Report
		wantErr error    // nil: no error
		errs    []string // substrings of the error
	}{
		"whitespace, nulls, tiny and negative zero": {
			body: " \n{\"service\": \"s\", \"endpoint\": \"e\", \"qps\": 1e-400, \"eps\": -0, \"utilization\": null, \"named\": null}\t",
			want: []Report{{Service: "s", Endpoint: "e"}},
		},
		"utilization is application utilization": {
			body: `{"service": "s", "endpoint": "e", "utilization": 0.5, "cpu_utilization": 0.75, "qps": 3, "eps": 1, "named": {"a": -2.5}}`,
			want: []Report{{Service: "s", Endpoint: "e", App: 0.5, CPU: 0.75, QPS: 3, EPS: 1, Named: map[string]float64{"a": -2.5}}},
		},
		"escaped strings": {
			body: `[{"service": "s\u00e9", "endpoint": "e\"1"}]`,
			want: []Report{{Service: "sé", Endpoint: `e"1`}},
		},
		"every invalid report is named": {
			body:    `[{"service": "s", "endpoint": "e", "qps": -1}, {"service": "s", "endpoint": "e"}, {"endpoint": "e", "eps": 1e309}]`,
			wantErr: ErrInvalidReport,
			errs:    []string{"report 0: ", "qps is negative", "report 2: ", "eps 1e309 is out of range"},
		},
		"errors are capped": {
			body:    "[" + strings.TrimSuffix(strings.Repeat(`{"qps": -1},`, 15), ",") + "]",
			wantErr: ErrInvalidReport,
			errs:    []string{"report 9: ", "and 5 more invalid reports"},
		},
		"too many named metrics": {
			body:    `{"service": "s", "endpoint": "e", "named": {` + namedJSON(MaxNamed+1) + `}}`,
			wantErr: ErrInvalidReport, errs: []string{"65 named metrics (at most 64)"},
		},
		"named metric with an empty name": {
			body:    `{"service": "s", "endpoint": "e", "named": {"": 1}}`,
			wantErr: ErrInvalidReport, errs: []string{"empty name"},
		},
		"named not an object": {body: `{"service": "s", "endpoint": "e", "named": [1]}`, wantErr: ErrInvalidReport, errs: []string{"named is not an object"}},
		"too many reports":    {body: pushBatch(maxHTTPReports + 1), wantErr: errTooMany},
		"two values":          {body: `[] []`, wantErr: errMalformed, errs: []string{"trailing data"}},
		"string body":         {body: `"api"`, wantErr: errMalformed},
		"null body":           {body: `null`, wantErr: errMalformed},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := DecodeLoad([]byte(tc.body))
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || !strings.HasPrefix(err.Error(), "weights: http: ") {
					t.Fatalf("error %v, want one wrapping %v", err, tc.wantErr)
				}
				for _, w := range tc.errs {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not mention %q", err, w)
					}
				}
				if got != nil {
					t.Errorf("reports %v with an error", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.EqualFunc(got, tc.want, reportsEqual) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func namedJSON(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf(`"m%d": %d`, i, i)
	}
	return strings.Join(parts, ", ")
}

func reportsEqual(a, b Report) bool {
	return a.Service == b.Service && a.Endpoint == b.Endpoint && a.Node == b.Node && a.At.Equal(b.At) &&
		a.QPS == b.QPS && a.EPS == b.EPS && a.CPU == b.CPU && a.App == b.App && maps.Equal(a.Named, b.Named)
}

// FuzzDecodeLoad: DecodeLoad never panics, and what it accepts is 1 to
// 10,000 valid backend reports (once stamped) that survive a round trip
// through the wire format.
func FuzzDecodeLoad(f *testing.F) {
	for _, seed := range []string{
		`{"service": "api", "endpoint": "api-1", "utilization": 0.42, "qps": 120.5, "eps": 0.3}`,
		`{"reports": [{"service": "a", "endpoint": "b", "cpu_utilization": 1, "named": {"x": 1e300}}]}`,
		`[{"service": "a", "endpoint": "b", "application_utilization": 100, "qps": 1e9}, {"service": "a", "endpoint": "c"}]`,
		`{"service": "a", "endpoint": "b", "qps": 1e400}`,
		`{"service": "a", "endpoint": "b", "qps": -0, "eps": 1e-400, "utilization": null}`,
		`{"reports": [], "service": "a"}`,
		`[{"service": "a", "endpoint": "b"}] x`,
		`{"service": "a", "endpoint": "b", "bogus": true}`,
		`{"service": "a", "endpoint": "b", "qps": "1"}`,
		`[[{}]]`, `{"reports": {"service": "a"}}`, `{"named": {"": 1}}`, ``, `null`, `[`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		reports, err := DecodeLoad(body)
		if err != nil {
			if reports != nil {
				t.Fatalf("reports with error %v", err)
			}
			return
		}
		if len(reports) == 0 || len(reports) > maxHTTPReports {
			t.Fatalf("%d reports", len(reports))
		}
		wire := make([]map[string]any, len(reports))
		for i, r := range reports {
			if r.Node != "" || !r.At.IsZero() {
				t.Fatalf("report %d: node %q at %v", i, r.Node, r.At)
			}
			r.At = t0
			if err := r.Validate(); err != nil {
				t.Fatalf("report %d does not validate: %v", i, err)
			}
			wire[i] = map[string]any{"service": r.Service, "endpoint": r.Endpoint, "qps": r.QPS, "eps": r.EPS,
				"cpu_utilization": r.CPU, "application_utilization": r.App, "named": r.Named}
		}
		again, err := json.Marshal(wire)
		if err != nil {
			t.Fatal(err)
		}
		back, err := DecodeLoad(again)
		if err != nil || !slices.EqualFunc(back, reports, reportsEqual) {
			t.Fatalf("round trip: %v\n%+v\n%+v", err, back, reports)
		}
		for _, r := range back {
			for _, v := range []float64{r.QPS, r.EPS, r.CPU, r.App} {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					t.Fatalf("non-finite value in %+v", r)
				}
			}
		}
	})
}
