package main

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// tiny is a small configuration that runs in well under a second.
func tiny() options {
	o := defaultOptions()
	o.backends, o.clients, o.size, o.intervals, o.trials, o.noise = 12, 40, 3, window+10, 2, 1
	return o
}

const sampleBench = `goos: linux
BenchmarkSolve-2    	     100	  45000000 ns/op	         1.017 max/mean	        10.00 sweeps	 2250407 B/op	    5102 allocs/op
BenchmarkSolve-2    	     100	  11000000 ns/op	         1.017 max/mean	        10.00 sweeps	 2250402 B/op	    5102 allocs/op
BenchmarkSolve-2    	     100	  10000000 ns/op	         1.017 max/mean	        10.00 sweeps	 2250403 B/op	    5102 allocs/op
BenchmarkIngest-2   	     206	   5000000 ns/op	 1778994 B/op	     312 allocs/op
PASS
`

// TestRunTiny runs the whole simulator on a tiny configuration and
// rewrites a Markdown file twice: the text outside the markers survives.
func TestRunTiny(t *testing.T) {
	dir := t.TempDir()
	path, bench := filepath.Join(dir, "B.md"), filepath.Join(dir, "bench.txt")
	if err := os.WriteFile(path, []byte("# Benchmarks\n\ntext\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bench, []byte(sampleBench), 0o644); err != nil {
		t.Fatal(err)
	}
	o := tiny()
	o.markdown, o.goBench = path, bench
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for range 2 {
		if err := run(o, []string{"-backends", "12"}, io.Discard, log); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	if !strings.HasPrefix(doc, "# Benchmarks\n\ntext\n\n"+beginMarker) || strings.Count(doc, beginMarker) != 1 {
		t.Errorf("unexpected document:\n%s", doc)
	}
	for _, want := range []string{"| round robin |", "| least-loaded |", "| global weights |", "| per-node weights |",
		"### With noise", "| Solve | 3 | 11.0 ms |", "| solver, 1,000 nodes x 1,000 endpoints, subset 20, < 200.0 ms | 11.0 ms | yes |",
		"< 10% of one core | 0.5% | yes |", "`go run ./bench/weightsim -backends 12`"} {
		if !strings.Contains(doc, want) {
			t.Errorf("section lacks %q:\n%s", want, doc)
		}
	}
}

// TestPoliciesOnTinyFleet: noise-free, per-node weights balance better than
// round robin and settle; round robin never moves.
func TestPoliciesOnTinyFleet(t *testing.T) {
	m, err := simulateMode(tiny(), 0)
	if err != nil {
		t.Fatal(err)
	}
	rr, pn := m.find("round robin").medians(), m.find("per-node weights").medians()
	if rr.converged != 0 || rr.oscillation != 0 {
		t.Errorf("round robin moved: %+v", rr)
	}
	if !(pn.maxMean < rr.maxMean) || pn.converged < 0 {
		t.Errorf("per-node %+v not better than round robin %+v", pn, rr)
	}
	for _, p := range m.policies {
		if len(p.trials) != 2 || len(p.curve) != tiny().intervals || p.curve[0] != m.policies[0].curve[0] {
			t.Errorf("%s: %d trials, curve %v (every policy starts from round robin)", p.name, len(p.trials), p.curve)
		}
	}
}

func TestSummarize(t *testing.T) {
	flat := make([]float64, 30)
	for i := range flat {
		flat[i] = 1.5
	}
	mm := append([]float64{2, 1.8, 1.6}, flat...)
	st := summarize(series{maxMean: mm, maxMin: mm})
	if st.converged != 3 || st.oscillation != 0 || st.maxMean != 1.5 {
		t.Errorf("settling series: %+v", st)
	}
	for i := range mm {
		mm[i] = 1.5 + 0.1*float64(i%2) // 1.5, 1.6, ...: beyond the 2% band forever
	}
	st = summarize(series{maxMean: mm, maxMin: mm})
	if st.converged != -1 || st.oscillation < 0.06 {
		t.Errorf("oscillating series: %+v", st)
	}
}

func TestValidate(t *testing.T) {
	for name, mod := range map[string]func(*options){
		"no clients":     func(o *options) { o.clients = 0 },
		"few intervals":  func(o *options) { o.intervals = window },
		"zero util":      func(o *options) { o.util = 0 },
		"zero interval":  func(o *options) { o.interval = 0 },
		"negative noise": func(o *options) { o.noise = -1 },
		"zero damping":   func(o *options) { o.damping = 0 },
		"zero trials":    func(o *options) { o.trials = 0 },
	} {
		o := defaultOptions()
		mod(&o)
		if err := o.validate(); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if err := defaultOptions().validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
	if o := defaultOptions(); o.interval != 10*time.Second || o.backends != 100 || o.clients != 300 || o.size != 10 {
		t.Errorf("defaults changed: %+v", o)
	}
}
