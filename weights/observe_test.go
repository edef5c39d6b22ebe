package weights

import (
	"errors"
	"math"
	"testing"
	"time"
)

func TestTrackerObserve(t *testing.T) {
	for name, tc := range map[string]struct {
		before  []Report // observed at t0 first
		report  Report
		now     time.Time
		wantErr error
		check   func(t *testing.T, r Row)
	}{
		"invalid": {report: load("a", t0, math.NaN(), 0, 0.5), now: t0, wantErr: ErrInvalidReport},
		"unknown endpoint": {
			report: load("z", t0, 1, 0, 0.5), now: t0, wantErr: ErrUnknownEndpoint,
		},
		"unknown service": {
			report: Report{Service: "t", Endpoint: "a", At: t0}, now: t0, wantErr: ErrUnknownEndpoint,
		},
		"from the future counts as now": {
			report: load("a", at(time.Hour), 100, 0, 0.5), now: t0,
			check: func(t *testing.T, r Row) {
				if !r.LastReport.Equal(t0) || r.Reason != ReasonReported {
					t.Errorf("last report %v reason %s", r.LastReport, r.Reason)
				}
			},
		},
		"already expired is ignored": {
			report: load("a", at(-4*time.Minute), 100, 0, 0.5), now: t0,
			check: func(t *testing.T, r Row) {
				if r.Reason != ReasonNoReports {
					t.Errorf("reason %s", r.Reason)
				}
			},
		},
		"older than the latest is ignored": {
			before: []Report{load("a", t0, 50, 0, 0.5)},
			report: load("a", at(-time.Second), 999, 0, 0.5), now: t0,
			check: func(t *testing.T, r Row) {
				if r.QPS != 50 {
					t.Errorf("qps %v, want the latest report's 50", r.QPS)
				}
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			tr := newTestTracker(t, noBlackout, "a")
			observe(t, tr, t0, tc.before...)
			err := tr.Observe(tc.report, tc.now)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Observe: %v, want %v", err, tc.wantErr)
			}
			if tc.check != nil {
				tc.check(t, rowOf(t, tr.Update(tc.now), "a"))
			}
		})
	}
}

func TestTrackerSetEndpoints(t *testing.T) {
	tr := newTestTracker(t, noBlackout, "a", "b")
	observe(t, tr, t0, load("a", t0, 100, 0, 0.5), load("b", t0, 100, 0, 1))
	// b leaves and comes back: its state is gone; a keeps its own.
	if err := tr.SetEndpoints("s", []Endpoint{{ID: "a"}, {ID: "c", Static: 7}}); err != nil {
		t.Fatal(err)
	}
	if err := tr.SetEndpoints("s", []Endpoint{{ID: "a"}, {ID: "b"}, {ID: "c", Static: 7}}); err != nil {
		t.Fatal(err)
	}
	tab := tr.Update(t0)
	if r := rowOf(t, tab, "a"); r.Reason != ReasonReported || r.Float != 200 {
		t.Errorf("a: %s %v", r.Reason, r.Float)
	}
	if r := rowOf(t, tab, "b"); r.Reason != ReasonNoReports || r.Float != 200 {
		t.Errorf("b: %s %v", r.Reason, r.Float)
	}
	if r := rowOf(t, tab, "c"); r.Static != 7 {
		t.Errorf("c: static %d", r.Static)
	}
	if err := tr.SetEndpoints("s", nil); err != nil {
		t.Fatal(err)
	}
	if _, ok := tr.Update(t0).Service("s"); ok {
		t.Error("an empty endpoint list did not remove the service")
	}
	for name, tc := range map[string]struct {
		service string
		eps     []Endpoint
		want    []string
	}{
		"empty service":  {service: "", eps: []Endpoint{{ID: "a"}}, want: []string{"service name is empty"}},
		"empty ID":       {service: "s", eps: []Endpoint{{ID: ""}}, want: []string{"empty ID"}},
		"duplicate ID":   {service: "s", eps: []Endpoint{{ID: "a"}, {ID: "a"}}, want: []string{`duplicate endpoint "a"`}},
		"too many":       {service: "s", eps: make([]Endpoint, MaxEndpoints+1), want: []string{"at most"}},
		"both reported":  {service: "", eps: []Endpoint{{ID: "x"}, {ID: "x"}}, want: []string{"service name", "duplicate"}},
		"valid is valid": {service: "s", eps: []Endpoint{{ID: "x"}}},
	} {
		t.Run(name, func(t *testing.T) {
			checkErr(t, tr.SetEndpoints(tc.service, tc.eps), ErrInvalidEndpoints, tc.want)
		})
	}
}
