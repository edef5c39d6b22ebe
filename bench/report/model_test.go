package main

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xds-server/xds-server/bench"
)

// fixture is a results file of BenchmarkConsulFleet at 1,000, 2,500, 5,000
// and 10,000 nodes whose costs are exact lines in the node count n:
// CPU per change 20 ms + 20 CPU-µs n, per full push 100 ms + 210 CPU-µs n,
// bytes per change 3,000 n, per full push 150,000 n, RSS after sync the
// catalog's 60 MiB + 5 MiB + 60 KiB n, peak 60 MiB + 100 KiB n, change p99
// 150 ms + 15 µs n, full push p99 200 ms + 100 µs n.
const fixture = "testdata/model-runs.jsonl"

var question = modelQuestion{Nodes: 100000, P99: 1, PushP99: 1, MinReplicas: 3, MaxCores: 16, MaxMemory: 16 << 30}

func TestFitLine(t *testing.T) {
	for name, tc := range map[string]struct {
		xs, ys           []float64
		a, b, maxRel, r2 float64
	}{
		"exact line":    {xs: []float64{1, 2, 4}, ys: []float64{3, 5, 9}, a: 1, b: 2, maxRel: 0, r2: 1},
		"residuals":     {xs: []float64{0, 1, 2, 3}, ys: []float64{1, 3, 5, 8}, a: 0.8, b: 2.3, maxRel: 0.2, r2: 1 - 0.3/26.75},
		"flat is exact": {xs: []float64{1, 2, 3, 4}, ys: []float64{5, 5, 5, 5}, a: 5, b: 0, maxRel: 0, r2: 1},
	} {
		t.Run(name, func(t *testing.T) {
			f := fitLine(tc.xs, tc.ys)
			for what, got := range map[string][2]float64{"a": {f.a, tc.a}, "b": {f.b, tc.b}, "maxRel": {f.maxRel, tc.maxRel}, "r2": {f.r2, tc.r2}} {
				if math.Abs(got[0]-got[1]) > 1e-9 {
					t.Errorf("%s = %v, want %v", what, got[0], got[1])
				}
			}
		})
	}
}

func fixtureModel(t *testing.T) costModel {
	t.Helper()
	runs, err := bench.ReadRuns(fixture)
	if err != nil {
		t.Fatal(err)
	}
	points, err := modelPoints(runs)
	if err != nil {
		t.Fatal(err)
	}
	m, err := fitModel(points, 2)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestFitModelRecoversTheFixture(t *testing.T) {
	m := fixtureModel(t)
	for name, tc := range map[string]struct {
		f    fit
		a, b float64
	}{
		"CPU per change":    {m.changeCPU, 0.02, 20e-6},
		"CPU per full push": {m.pushCPU, 0.1, 210e-6},
		"bytes per change":  {m.changeB, 0, 3000},
		"bytes per push":    {m.pushB, 0, 150000},
		"RSS per node":      {m.rssNodes, 5 << 20, 60 << 10},
		"peak RSS":          {m.rssPeak, 60 << 20, 100 << 10},
		"change p99":        {m.changeP99, 0.15, 15e-6},
		"full push p99":     {m.pushP99, 0.2, 100e-6},
		"Consul per change": {m.changeRead, 1, 0},
		"Consul per push":   {m.pushRead, 50, 0},
	} {
		if math.Abs(tc.f.a-tc.a) > 1e-6*max(1, math.Abs(tc.a)) || math.Abs(tc.f.b-tc.b) > 1e-9*max(1, math.Abs(tc.b)) ||
			tc.f.r2 < 1-1e-9 || tc.f.maxRel > 1e-9 || tc.f.n != 4 {
			t.Errorf("%s: fit %+v, want a %v b %v exactly over 4 points", name, tc.f, tc.a, tc.b)
		}
	}
	if m.sizes != 4 || m.rssCatalog != 60<<20 || m.loadGen != 0.6 {
		t.Errorf("sizes %d, catalog RSS %v, load generator %v cores", m.sizes, m.rssCatalog, m.loadGen)
	}
	// e: 20 CPU-µs per node over 15 µs of p99 per node on 2 cores.
	if e := m.efficiency(m.changeCPU, m.changeP99); math.Abs(e-2.0/3) > 1e-6 {
		t.Errorf("change efficiency %v, want 2/3", e)
	}
}

func TestProjectAndAnswer(t *testing.T) {
	m := fixtureModel(t)
	ss := m.project(question, replicaCounts(question.MinReplicas))
	if ss[0].replicas != 3 || ss[0].nodes != 33334 {
		t.Fatalf("first sizing %+v, want 3 replicas of 33334 nodes", ss[0])
	}
	// A full push binds: 33334 x 210 CPU-µs / (e 1, capped from 1.05) / (1 s - 200 ms) = 8.75 cores -> 9;
	// a change needs 33334 x 20 CPU-µs / (2/3) / 850 ms = 1.18.
	if s := ss[0]; s.cores != 9 || math.Abs(s.pushCores-8.750175) > 1e-3 || math.Abs(s.changeCores-1.17651) > 1e-3 || !s.fits {
		t.Errorf("3 replicas: %+v", s)
	}
	a, ok := answer(ss)
	if !ok || a.replicas != 3 || a.cores != 9 {
		t.Fatalf("answer %+v (%v), want 3 x 9 cores (27 in all, fewer than 4 x 7, 5 x 6, 10 x 3)", a, ok)
	}
	as := m.assumptions(question, a)
	if !strings.Contains(as[0].text, "full push spreads over 9 cores") || as[0].stretch != 4.5 {
		t.Errorf("first assumption to break %+v, want the fan-out over 9 cores measured on 2 (x4.5)", as[0])
	}
	small := question
	small.MaxMemory = 1 << 30 // 60 MiB + 100 KiB a node of peak: at most 10,122 nodes a replica
	a, ok = answer(m.project(small, replicaCounts(small.MinReplicas)))
	if !ok || a.replicas != 16 || a.cores != 2 {
		t.Errorf("answer within 1 GiB %+v (%v), want 16 x 2 cores (32, as 32 x 1: fewer replicas)", a, ok)
	}
	for name, tight := range map[string]modelQuestion{
		"full push": {Nodes: 100000, P99: 1, PushP99: 0.19, MinReplicas: 3, MaxCores: 16, MaxMemory: 16 << 30},
		"change":    {Nodes: 100000, P99: 0.14, PushP99: 1, MinReplicas: 3, MaxCores: 16, MaxMemory: 16 << 30},
	} {
		for _, s := range m.project(tight, replicaCounts(3)) {
			if s.fits || !math.IsInf(max(s.pushCores, s.changeCores), 1) {
				t.Fatalf("a %s budget below its fixed part: %+v fits", name, s)
			}
		}
	}
}

func TestRenderModelFromResultsFile(t *testing.T) {
	got, err := modelSectionFile(fixture, "", question, 2, time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	// Each in this order.
	rest := got
	for _, want := range []string{
		"## Cost model to 100000 nodes (issue 29)",
		"from 4 BenchmarkConsulFleet runs (results file sha256 `",
		"### sotw, every endpoint: 50 services x 20 endpoints, 4 sizes (1000, 2500, 5000, 10000 nodes)",
		"| server CPU per single change | 20.0 CPU-ms | 20.00 CPU-µs | 0.0% | 1.000 |",
		"| bytes sent per single change | 0.0 KiB | 3000 B | 0.0% | 1.000 |",
		"| RSS after sync over the catalog's (fixed: the one group of equal nodes) | 5.0 MiB | 60.0 KiB | 0.0% | 1.000 |",
		"| change -> every node, p99 | 150 ms | 15.0 µs | 0.0% | 1.000 |",
		"| 10000 | 300 ms | 300 ms | 1.20 s | 1.20 s | 60.5 KiB | 22.00 CPU-µs |",
		"| 3 | 33334 | 1.18 | 8.75 | 9 | 261 ms | 978 ms | 1.97 GiB | 3.24 GiB | 3.0 | yes |",
		"**Answer**: 3 replicas x 9 cores (27 cores in all), 33334 nodes and 3.24 GiB peak RSS each; change p99 261 ms, full push p99 978 ms.",
		// A change alone: 33334 x 20 CPU-µs / (2/3) / 850 ms = 1.18 -> 2 cores (6 in all; 4 x 1 is 4).
		"For a change's p99 alone (full pushes unbounded): 4 replicas x 1 cores (4 cores in all)",
		"1. the fan-out of a change or a full push spreads over 9 cores per replica",
	} {
		i := strings.Index(rest, want)
		if i < 0 {
			t.Fatalf("missing %q (after the lines before it) in\n%s", want, got)
		}
		rest = rest[i+len(want):]
	}
}

// TestModelRefusesTypedInputs: the model renders only from a results file
// with every input measured at 4 sizes or more.
func TestModelRefusesTypedInputs(t *testing.T) {
	raw, err := os.ReadFile(fixture)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(strings.TrimSpace(string(raw)), "\n")
	dir := t.TempDir()
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	for name, tc := range map[string]struct {
		path, want string
	}{
		"three sizes":         {write("three.jsonl", strings.Join(lines[:3], "")), "3 distinct fleet sizes measured, want at least 4"},
		"a size twice is one": {write("twice.jsonl", strings.Join(append(lines[:3:3], lines[2]), "")), "3 distinct fleet sizes"},
		"no change CPU":       {write("old.jsonl", strings.Replace(string(raw), `"change_cpu_seconds":0.2,`, `"x":0,`, 1)), "lacks a measured input"},
		"no bytes in a push":  {write("push.jsonl", strings.Replace(string(raw), `"bytes":150000000`, `"bytes":0`, 2)), "lacks a measured input"},
		"not a results file":  {write("typed.jsonl", "cpu_per_node: 20e-6\n"), "bench: "},
		"no file":             {filepath.Join(dir, "missing.jsonl"), "no such file"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := modelSectionFile(tc.path, "", question, 2, time.Now())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
	if err := (modelQuestion{}).Validate(); err == nil || strings.Count(err.Error(), "want") != 4 {
		t.Errorf("empty question: %v, want every field error", err)
	}
}

// TestRunModelRewritesOnlyItsSection: -model rewrites its section alone,
// and the full report's rewrite keeps it.
func TestRunModelRewritesOnlyItsSection(t *testing.T) {
	out := filepath.Join(t.TempDir(), "BENCHMARKS.md")
	before := "# Benchmarks\n\nfleet figures\n\n<!-- scale:begin -->\nS\n<!-- scale:end -->\n"
	if err := os.WriteFile(out, []byte(before), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := runModel(fixture, "", out, question); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	if !strings.HasPrefix(doc, before+"\n<!-- model:begin -->\n## Cost model to 100000 nodes") || !strings.HasSuffix(doc, "<!-- model:end -->\n") {
		t.Fatalf("file after -model:\n%s", doc)
	}
	if kept := markedBlocks(doc); !strings.Contains(kept, "<!-- model:begin -->") || !strings.Contains(kept, "**Answer**") {
		t.Errorf("the full report would drop the model section; it keeps:\n%s", kept)
	}
}
