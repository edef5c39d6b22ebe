package main

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
)

// policyRun is one policy's result in a test: max/mean, converge time (-1:
// never), errors by code.
func policyRun(k int, maxMean, converge float64, codes map[string]int64) result {
	r := result{policy: policy{name: perNode, weights: true, subset: 4}, run: k, simMaxMean: 1.02, mismatched: 0,
		fig: figures{MaxMean: maxMean, P99Mean: maxMean - 0.01, Converge: converge, Oscillation: 0.01 * float64(k+1)},
		p99: 10 * float64(k+1), requests: int64(1000 + k), codes: codes}
	for _, n := range codes {
		r.errors += n
	}
	return r
}

func TestSummarize(t *testing.T) {
	for name, tc := range map[string]struct {
		runs                   []result
		maxMean, converge, p99 float64
		errors                 int64
		codes                  map[string]int64
		chart                  int
	}{
		"one run is itself": {
			runs:    []result{policyRun(0, 1.07, 20, nil)},
			maxMean: 1.07, converge: 20, p99: 10, chart: 0,
		},
		"medians of 3, errors summed, the median run charted": {
			runs:    []result{policyRun(0, 1.072, 30, map[string]int64{"DeadlineExceeded": 2}), policyRun(1, 1.055, 10, nil), policyRun(2, 1.061, 20, map[string]int64{"DeadlineExceeded": 1, "Unavailable": 4})},
			maxMean: 1.061, converge: 20, p99: 20, errors: 7, codes: map[string]int64{"DeadlineExceeded": 3, "Unavailable": 4}, chart: 2,
		},
		"a run that did not converge counts as +inf": {
			runs:    []result{policyRun(0, 1.1, -1, nil), policyRun(1, 1.1, 10, nil), policyRun(2, 1.1, 40, nil)},
			maxMean: 1.1, converge: 40, p99: 20, chart: 0,
		},
		"a median of +inf is not converged (-1)": {
			runs:    []result{policyRun(0, 1.2, -1, nil), policyRun(1, 1.1, 10, nil), policyRun(2, 1.3, -1, nil)},
			maxMean: 1.2, converge: -1, p99: 20, chart: 0,
		},
		"even count: the mean of the middle two, the first nearest run charted": {
			runs:    []result{policyRun(0, 1.2, 10, nil), policyRun(1, 1.0, 30, nil)},
			maxMean: 1.1, converge: 20, p99: 15, chart: 0,
		},
	} {
		t.Run(name, func(t *testing.T) {
			s := summarize(tc.runs)
			m := s.med
			if math.Abs(m.fig.MaxMean-tc.maxMean) > 1e-9 || m.fig.Converge != tc.converge || math.Abs(m.p99-tc.p99) > 1e-9 {
				t.Errorf("max/mean %v, converge %v, p99 %v; want %v, %v, %v", m.fig.MaxMean, m.fig.Converge, m.p99, tc.maxMean, tc.converge, tc.p99)
			}
			if m.errors != tc.errors || len(m.codes) != len(tc.codes) {
				t.Errorf("errors %d %v, want %d %v", m.errors, m.codes, tc.errors, tc.codes)
			}
			for code, n := range tc.codes {
				if m.codes[code] != n {
					t.Errorf("%s errors %d, want %d", code, m.codes[code], n)
				}
			}
			if s.chart != tc.chart || len(s.runs) != len(tc.runs) || m.policy != tc.runs[0].policy {
				t.Errorf("chart run %d of %d (%+v), want %d of %d", s.chart, len(s.runs), m.policy, tc.chart, len(tc.runs))
			}
		})
	}
}

// TestAggregateByPolicy: runs[k][i] is policy i's run k, whatever the
// order of the values.
func TestAggregateByPolicy(t *testing.T) {
	rr := func(k int, mm float64) result {
		r := policyRun(k, mm, 5, nil)
		r.policy = policy{name: roundRobin}
		return r
	}
	ss := aggregate([][]result{
		{rr(0, 1.7), policyRun(0, 1.10, 20, nil)},
		{rr(1, 1.6), policyRun(1, 1.05, 25, nil)},
		{rr(2, 1.8), policyRun(2, 1.08, -1, nil)},
	})
	if len(ss) != 2 || ss[0].med.policy.name != roundRobin || ss[1].med.policy.name != perNode {
		t.Fatalf("summaries %+v, want round robin then per-node", ss)
	}
	if ss[0].med.fig.MaxMean != 1.7 || ss[1].med.fig.MaxMean != 1.08 || ss[1].med.fig.Converge != 25 || ss[1].chart != 2 {
		t.Errorf("medians %v, %v, converge %v, chart %d; want 1.7, 1.08, 25, run 2", ss[0].med.fig.MaxMean,
			ss[1].med.fig.MaxMean, ss[1].med.fig.Converge, ss[1].chart)
	}
	if aggregate(nil) != nil {
		t.Error("no runs, want no summaries")
	}
}

// TestRenderMedians: the Markdown shows each run's max/mean beside the
// median, the verdicts judge the medians and the summed errors, and the
// JSON keeps issue 18's fields.
func TestRenderMedians(t *testing.T) {
	ss := aggregate([][]result{{policyRun(0, 1.072, 30, map[string]int64{"Unavailable": 1})}, {policyRun(1, 1.055, 10, nil)}, {policyRun(2, 1.061, 20, nil)}})
	tab := table(ss, 12)
	if !strings.Contains(tab, "| 1.061 (1.072 / 1.055 / 1.061) |") || !strings.Contains(tab, "| 20 s |") || !strings.Contains(tab, "| 1 (Unavailable 1) |") {
		t.Errorf("table:\n%s", tab)
	}
	v := verdicts(ss, 12)
	if !strings.Contains(v, "| <= 1.10 | 1.061 (yes) | yes | yes | **no** | yes (sim 1.020) |") {
		t.Errorf("verdicts (errors summed: 1, so **no**):\n%s", v)
	}
	var got struct {
		Policies []map[string]any `json:"policies"`
	}
	if err := json.Unmarshal(toJSON(ss, 12), &got); err != nil || len(got.Policies) != 1 {
		t.Fatalf("json: %v %v", got, err)
	}
	p := got.Policies[0]
	for key, want := range map[string]any{"name": perNode, "subset_size": 4.0, "max_mean": 1.061, "p99_mean": 1.051,
		"converge_s": 20.0, "oscillation": 0.02, "p99_latency_ms": 20.0, "errors": 1.0, "sim_max_mean": 1.02, "runs": 3.0, "chart_run": 3.0} {
		if p[key] != want {
			t.Errorf("json %s = %v, want %v", key, p[key], want)
		}
	}
	o := defaultOptions()
	o.markdown, o.runs = "BENCHMARKS.md", 3
	md := (&env{o: o}).markdown(ss, []string{"--markdown", "BENCHMARKS.md"}, time.Minute, []string{"bench/lab/charts/per-node-subset4.svg"})
	for _, want := range []string{"`go run ./bench/lab --markdown BENCHMARKS.md`", "3 runs of every policy", "counting as +inf",
		"(bench/lab/charts/per-node-subset4.svg) (run 3 of 3)"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	if got, _ := json.Marshal(p["max_mean_runs"]); string(got) != "[1.072,1.055,1.061]" {
		t.Errorf("max_mean_runs %s, want [1.072,1.055,1.061] (run order)", got)
	}
}
