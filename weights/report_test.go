package weights

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestWeight(t *testing.T) {
	inf, nan := math.Inf(1), math.NaN()
	for name, tc := range map[string]struct {
		qps, eps, util, penalty float64
		want                    float64
		ok                      bool
	}{
		"capacity is qps over utilization":   {qps: 100, util: 0.5, penalty: 1, want: 200, ok: true},
		"idle backend gets the largest":      {qps: 100, util: 0.1, penalty: 1, want: 1000, ok: true},
		"errors cost weight":                 {qps: 100, eps: 50, util: 0.5, penalty: 1, want: 100, ok: true},
		"penalty scales the error cost":      {qps: 100, eps: 50, util: 0.5, penalty: 3, want: 50, ok: true},
		"no penalty ignores errors":          {qps: 100, eps: 100, util: 0.5, penalty: 0, want: 200, ok: true},
		"more errors than requests":          {qps: 10, eps: 20, util: 1, penalty: 1, want: 10.0 / 3, ok: true},
		"overloaded backend":                 {qps: 100, util: 2, penalty: 1, want: 50, ok: true},
		"no requests is unknown":             {qps: 0, util: 0.5, penalty: 1},
		"unknown utilization is unknown":     {qps: 100, util: 0, penalty: 1},
		"negative qps is unknown":            {qps: -1, util: 0.5, penalty: 1},
		"negative errors are unknown":        {qps: 100, eps: -1, util: 0.5, penalty: 1},
		"NaN utilization is unknown":         {qps: 100, util: nan, penalty: 1},
		"infinite qps is unknown":            {qps: inf, util: 0.5, penalty: 1},
		"NaN penalty is unknown":             {qps: 100, util: 0.5, penalty: nan},
		"tiny utilization does not overflow": {qps: 1e300, util: 1e-300, penalty: 1},
	} {
		t.Run(name, func(t *testing.T) {
			got, ok := Weight(tc.qps, tc.eps, tc.util, tc.penalty)
			if ok != tc.ok || math.Abs(got-tc.want) > 1e-9*tc.want {
				t.Fatalf("Weight(%v, %v, %v, %v) = %v, %v; want %v, %v",
					tc.qps, tc.eps, tc.util, tc.penalty, got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestReportUtilization(t *testing.T) {
	for name, tc := range map[string]struct {
		cpu, app, want float64
	}{
		"application wins":    {cpu: 0.9, app: 0.3, want: 0.3},
		"cpu when no app":     {cpu: 0.9, want: 0.9},
		"unknown when none":   {want: 0},
		"app alone":           {app: 0.4, want: 0.4},
		"app above one stays": {cpu: 0.5, app: 1.5, want: 1.5},
	} {
		t.Run(name, func(t *testing.T) {
			if got := (Report{CPU: tc.cpu, App: tc.app}).Utilization(); got != tc.want {
				t.Fatalf("Utilization() = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestReportValidate(t *testing.T) {
	ok := Report{Service: "s", Endpoint: "e", At: t0, QPS: 10, EPS: 1, CPU: 0.5, App: 0.4,
		Named: map[string]float64{"mem": 0.3}}
	for name, tc := range map[string]struct {
		edit func(*Report)
		want []string // substrings of the error; none means valid
	}{
		"valid":                     {edit: func(*Report) {}},
		"client report":             {edit: func(r *Report) { r.Node = "n1"; r.CPU, r.App = 0, 0 }},
		"utilization above one":     {edit: func(r *Report) { r.CPU = 3 }},
		"eps above qps is accepted": {edit: func(r *Report) { r.EPS = 20 }},
		"missing service":           {edit: func(r *Report) { r.Service = "" }, want: []string{"service is empty"}},
		"missing endpoint":          {edit: func(r *Report) { r.Endpoint = "" }, want: []string{"endpoint is empty"}},
		"missing time":              {edit: func(r *Report) { r.At = time.Time{} }, want: []string{"time is missing"}},
		"NaN qps":                   {edit: func(r *Report) { r.QPS = math.NaN() }, want: []string{"qps is NaN"}},
		"infinite eps":              {edit: func(r *Report) { r.EPS = math.Inf(1) }, want: []string{"eps is +Inf"}},
		"negative cpu":              {edit: func(r *Report) { r.CPU = -0.1 }, want: []string{"cpu utilization is negative"}},
		"absurd app":                {edit: func(r *Report) { r.App = 101 }, want: []string{"application utilization 101 is absurd"}},
		"absurd qps":                {edit: func(r *Report) { r.QPS = 2e9 }, want: []string{"qps 2e+09 is absurd"}},
		"NaN named metric":          {edit: func(r *Report) { r.Named = map[string]float64{"x": math.NaN()} }, want: []string{`named metric "x" is NaN`}},
		"unnamed metric":            {edit: func(r *Report) { r.Named = map[string]float64{"": 1} }, want: []string{"empty name"}},
		"every problem at once": {
			edit: func(r *Report) { r.Service, r.QPS, r.CPU = "", -1, math.Inf(-1) },
			want: []string{"service is empty", "qps is negative", "cpu utilization is -Inf"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			r := ok
			tc.edit(&r)
			err := r.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidReport) {
				t.Fatalf("Validate() = %v, want an ErrInvalidReport", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %q, want it to mention %q", err, w)
				}
			}
			if !strings.HasPrefix(err.Error(), "weights: ") {
				t.Errorf("Validate() = %q, want the weights: prefix", err)
			}
		})
	}
	many := ok
	many.Named = map[string]float64{}
	for i := range MaxNamed + 1 {
		many.Named[strings.Repeat("m", i+1)] = 1
	}
	if err := many.Validate(); err == nil {
		t.Errorf("%d named metrics accepted", len(many.Named))
	}
}

// FuzzReport: a report that validates gives a formula weight that is
// either unknown or a finite positive number, and a report that does not
// validate has some field out of its documented range.
func FuzzReport(f *testing.F) {
	f.Add(100.0, 0.0, 0.5, 0.0, 1.0)
	f.Add(1e9, 1e9, 1e-300, 100.0, 100.0)
	f.Add(math.NaN(), 0.0, 0.5, 0.0, 1.0)
	f.Add(5e-324, 0.0, 5e-324, 0.0, 0.0)
	f.Add(-1.0, 1.0, 101.0, -0.0, 1.0)
	f.Fuzz(func(t *testing.T, qps, eps, cpu, app, penalty float64) {
		r := Report{Service: "s", Endpoint: "e", At: t0, QPS: qps, EPS: eps, CPU: cpu, App: app}
		err := r.Validate()
		inRanges := inRange(qps, 0, MaxRate) && inRange(eps, 0, MaxRate) &&
			inRange(cpu, 0, MaxUtilization) && inRange(app, 0, MaxUtilization)
		if (err == nil) != inRanges {
			t.Fatalf("Validate() = %v for qps %v eps %v cpu %v app %v", err, qps, eps, cpu, app)
		}
		w, ok := Weight(r.QPS, r.EPS, r.Utilization(), penalty)
		if ok && (!(w > 0) || math.IsInf(w, 0)) {
			t.Fatalf("Weight = %v, ok", w)
		}
		if !ok && w != 0 {
			t.Fatalf("Weight = %v, not ok", w)
		}
		// A valid report with qps and utilization has a weight, unless
		// the formula itself under- or overflows.
		want := qps / (r.Utilization() + eps/qps*penalty)
		if err == nil && r.Utilization() > 0 && inRange(penalty, 0, MaxUtilization) && want > 0 && !math.IsInf(want, 0) &&
			(!ok || w != want) {
			t.Fatalf("Weight = %v, %v; want %v", w, ok, want)
		}
	})
}
