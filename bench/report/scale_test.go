package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/xds-server/xds-server/bench"
)

func TestRenderScaleFigures(t *testing.T) {
	run := func(mode string, subset int, peak float64) bench.Run {
		return bench.Run{Mode: mode, Nodes: 10000, Services: 50, Endpoints: 20, SubsetSize: subset, Openers: 10000,
			ConnectSeconds: 8, RSSBefore: 50 << 20, RSSAfter: 50<<20 + 10000*90<<10, RSSPeak: peak,
			Latencies: []float64{0.2, 0.4, 1.2}, DrainLatencies: []float64{0.3, 0.5},
			Pushes:     []bench.Push{{CPUSeconds: 4, LoadGenCPU: 2, P99Seconds: 1}, {CPUSeconds: 6, LoadGenCPU: 2, P99Seconds: 1}},
			LoadGenCPU: 30, RunSeconds: 60, LoadGenConnectCPU: 5, ServerConnectCPU: 3, ChangeSampled: []int{2500, 2500}}
	}
	runs := []bench.Run{run("sotw", 5, 1.2e9), run("sotw", 0, 1.6e9), run("sotw", 0, 1.4e9), run("sotw", 0, 1.3e9)}
	runs[2].Refused = 1
	groups := groupScale(runs)
	if len(groups) != 2 || groups[0].subset != 0 || len(groups[0].runs) != 3 {
		t.Fatalf("groups: %+v", groups)
	}
	got := renderScale(groups, "make bench", "1m0s", time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC))
	for _, want := range []string{
		"## 10000 nodes on one replica (issues 17, 29)",
		"| Consul change -> every node updated, p99 (9 samples) | sotw, every endpoint | <= 500 ms | 1.20 s", // pooled over runs
		"| peak RSS (VmHWM) over the run, max of runs | sotw, every endpoint | <= 1 GiB | 1.49 GiB (median 1.30 GiB) | 1.49 | **no** | < 1.5 GB, median: yes |",
		"| RSS per connected node after sync | sotw, every endpoint | <= 64 KiB | 90.0 KiB | 1.41 | **no** | <= 100 KiB: yes |",
		"| server CPU per full push (all 50 services change) per node | sotw, every endpoint | none | 0.50 CPU-ms |  |  | <= 0.5 CPU-ms: yes |",
		"all synced (refused: 1) | sotw, every endpoint | <= 3 s, none refused | 8.00 s | 2.67 | **no** | < 10 s: **no** |", // a refusal fails it
		"| full push (all 50 services change) -> every node, p99 (median of 6 pushes) | sotw, every endpoint | <= 1.2 s | 1.00 s (worst push 1.00 s) | 0.83 | yes |  |",
		"| sotw, every endpoint | 3.00 / 5.00 CPU-s | ", // the connect storm's CPU: server / load generator
		"| worst run's change p99 / the median run's | sotw, every endpoint | <= 1.3x | 1.00x (1.20 s / 1.20 s) | 0.77 | yes |  |",
		"| sotw, subset_size 5 | 0.50 | 5.0 CPU-s | 2.00 CPU-s | 1 |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in\n%s", want, got)
		}
	}
}

func TestRenderSlowChanges(t *testing.T) {
	// Three changes of 2 samples each: the third is slow (p99 1.0 s
	// against a median change p99 of 0.3 s) and had a server GC.
	r := bench.Run{Mode: "sotw", ChangeSampled: []int{2, 2, 2}, Latencies: []float64{0.1, 0.3, 0.2, 0.3, 0.4, 1.0},
		ChangeServerGCs: []float64{0, 0, 2}, ChangeLoadGenGCs: []float64{1, 1, 0}, QuietGCs: 3}
	old := bench.Run{Mode: "delta", ChangeSampled: []int{1}, Latencies: []float64{0.1}} // no GC counts: left out
	var b strings.Builder
	renderSlowChanges(func(f string, a ...any) { b.WriteString(fmt.Sprintf(f, a...) + "\n") }, groupScale([]bench.Run{r, old}))
	got := b.String()
	if want := "| sotw, every endpoint | 3 | 300 ms | 1 | 1.00 s | 2.0 / 0.0 | 0.0 / 1.0 | 3 |"; !strings.Contains(got, want) {
		t.Errorf("missing %q in\n%s", want, got)
	}
	if strings.Contains(got, "delta") {
		t.Errorf("a run without GC counts is listed:\n%s", got)
	}
}
