package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xds-server/xds-server/bench"
)

func haTestRun() bench.HARun {
	return bench.HARun{Replicas: 3, Nodes: 10, Services: 2, Endpoints: 2, Drains: 2, ConnectSeconds: 3,
		DrainLatencies:   []float64{0.1, 0.2, 0.3, 1.5},
		UndrainLatencies: []float64{0.1, 0.1},
		ReplicaDrainP99:  []float64{0.3, 1.5, 0.2},
		Writes: []map[string]float64{
			{"drain_put": 20, "summary": 2}, {"summary": 2}, {"summary": 4, "drain_delete": 2},
		},
		WriteSeconds:  10,
		RSSBefore:     []float64{40 << 20, 40 << 20, 40 << 20},
		RSSAfter:      []float64{60 << 20, 62 << 20, 64 << 20},
		BaseRSSBefore: 38 << 20, BaseRSSAfter: 58 << 20,
		HeapAfter: []float64{20 << 20, 21 << 20, 22 << 20}, BaseHeapAfter: 19 << 20,
		DrainFirst:      []float64{0.05, 0.06, 0.07, 0.08, 0.09, 0.5},
		ChangeLatencies: []float64{0.2, 0.3, 0.4, 0.9}, ReplicaChangeP99: []float64{0.9, 0.4, 0.3}, Changes: 1,
		RSSSynced:  []float64{40<<20 + 10*70<<10, 40<<20 + 10*50<<10, 40<<20 + 10*60<<10},
		ReplicaCPU: []float64{5, 6, 7}, LoadGenCPU: 4,
		ChangeSeconds: 2, ChangeCPU: []float64{0.5, 0.5, 1}, LoadGenChangeCPU: 1}
}

func TestRenderHAFigures(t *testing.T) {
	got := renderHA([]bench.HARun{haTestRun()}, "make bench", time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC))
	for _, want := range []string{
		"## High availability: 3 replicas x 10 nodes (issues 15, 29)",
		"(1 changes, 4 samples) | < 1 s | 900 ms (p50 300 ms; median of per-run p99 900 ms) | 0.90 | yes |",
		"| <= 1/s | 3.00/s (median run 3.00/s; without the benchmark's own `drain_*` writes 0.80/s) | 3.00 | **no** |", // 22 + 2 + 6 writes in 10 s
		"| <= 64 KiB | 70.0 KiB (median replica 60.0 KiB) | 1.09 | **no** |",
		"| no target | 0.60 / 0.40 cores (max replica 0.70) | | |",
		"all replicas together / the load generator | no target | 1.00 / 0.50 cores | | |",
		"| 900 ms / 400 ms / 300 ms | 2.20 / 0.20 / 0.60 (3.00) |",
		"| < 1 s | 1.50 s (p50 200 ms; median of per-run p99 1.50 s) | 1.50 | **no** |", // a drain sample over 1 s
		"| <= 1/s | 2.20/s (median replica 0.60/s) | 2.20 | **no** |",                   // replica A: 22 writes in 10 s
		"| <= 1/s | 0.40/s (median replica 0.20/s) | 0.40 | yes |",                      // without drain_*: C's 4
		"| no target | +4.0 MiB (replica without HA: 58.0 MiB; HA replica: 62.0 MiB) |",
		"drain_put 20, summary 2",
		"| no target | +2.0 MiB (replica without HA: 19.0 MiB; HA replica: 21.0 MiB) |",
		"| no target | 70 ms / 500 ms |",
		"+2.0 MiB / +4.0 MiB / +6.0 MiB",
		"```sh\nmake bench\n```",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("HA section lacks %q:\n%s", want, got)
		}
	}
}

func TestRunHARewritesOnlyItsSection(t *testing.T) {
	dir := t.TempDir()
	out, runs := filepath.Join(dir, "BENCHMARKS.md"), filepath.Join(dir, "ha.jsonl")
	before := "# Benchmarks\n\nfleet figures\n\n<!-- rlsbench:begin -->\nR\n<!-- rlsbench:end -->\n"
	if err := os.WriteFile(out, []byte(before), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := bench.AppendHARun(runs, haTestRun()); err != nil {
		t.Fatal(err)
	}
	if err := runHA(runs, "", out); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	if !strings.HasPrefix(doc, before) || !strings.Contains(doc, "<!-- ha:begin -->\n## High availability") {
		t.Fatalf("want the old text kept and the HA section appended, got:\n%s", doc)
	}
	if kept := markedBlocks(doc); !strings.Contains(kept, "<!-- ha:begin -->") || !strings.Contains(kept, "<!-- rlsbench:begin -->") {
		t.Errorf("the fleet report would not keep the HA section; kept:\n%s", kept)
	}
}
