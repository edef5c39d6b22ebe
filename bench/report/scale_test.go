package main

import (
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
			Pushes:     []bench.Push{{CPUSeconds: 4, LoadGenCPU: 2}, {CPUSeconds: 6, LoadGenCPU: 2}},
			LoadGenCPU: 30, RunSeconds: 60, LoadGenConnectCPU: 5, ChangeSampled: []int{2500, 2500}}
	}
	runs := []bench.Run{run("sotw", 5, 1.2e9), run("sotw", 0, 1.6e9), run("sotw", 0, 1.4e9), run("sotw", 0, 1.3e9)}
	runs[2].Refused = 1
	groups := groupScale(runs)
	if len(groups) != 2 || groups[0].subset != 0 || len(groups[0].runs) != 3 {
		t.Fatalf("groups: %+v", groups)
	}
	got := renderScale(groups, "make bench", "1m0s", time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC))
	for _, want := range []string{
		"## 10000 nodes on one replica (issue 17)",
		"| Consul change -> every node updated, p99 (9 samples) | sotw, every endpoint | < 1 s | 1.20 s", // pooled over runs
		"| peak RSS (VmHWM) over the run | sotw, every endpoint | < 1.5 GB (1.40 GiB) | 1.30 GiB (max 1.49 GiB) | 0.93 | yes |",
		"| RSS per connected node after sync | sotw, every endpoint | <= 100 KiB | 90.0 KiB | 0.90 | yes |",
		"| server CPU per full push (all 50 services change) per node | sotw, every endpoint | <= 0.5 CPU-ms | 0.50 CPU-ms | 1.00 | yes |",
		"all synced (refused: 1) | sotw, every endpoint | < 10 s, none refused | 8.00 s | 0.80 | **no** |", // a refusal fails it
		"| sotw, subset_size 5 | 0.50 | 5.0 CPU-s | 2.00 CPU-s | 1 |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in\n%s", want, got)
		}
	}
}
