package main

import (
	"strings"
	"testing"
	"time"

	"github.com/xds-server/xds-server/bench"
)

// TestRenderStages: p50 / p99 per stage over the changes of every run;
// a stage a drain lacks (no Consul read) is a dash; old runs render none.
func TestRenderStages(t *testing.T) {
	change := func(consul float64) map[string]float64 {
		return map[string]float64{"consul": consul, "discovery": 0.002, "debounce": 0.05, "translate": 0.004,
			"cache": 0.03, "first_write": 0.001, "last_write": 0.12, "last_node": 0.25}
	}
	run := bench.Run{Mode: "sotw", Nodes: 10000, Services: 50, Endpoints: 20, Latencies: []float64{0.2},
		Stages: []map[string]float64{change(0.01), change(0.03)}, DrainStages: []map[string]float64{{"debounce": 0.05, "last_node": 0.2}}}
	got := renderScale(groupScale([]bench.Run{run, run}), "make bench", "1m0s", time.Unix(0, 0).UTC())
	for _, want := range []string{
		"| variant | what | changes | consul | discovery | debounce | translate | cache | first write | last write | last node |",
		"| sotw, every endpoint | Consul change | 4 | 10 / 30 | 2.0 / 2.0 | 50 / 50 | 4.0 / 4.0 | 30 / 30 | 1.0 / 1.0 | 120 / 120 | 250 / 250 |",
		"| sotw, every endpoint | drain | 2 | - | - | 50 / 50 | - | - | - | - | 200 / 200 |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in\n%s", want, got)
		}
	}
	run.Stages, run.DrainStages = nil, nil
	if got := renderScale(groupScale([]bench.Run{run}), "", "1m0s", time.Unix(0, 0).UTC()); strings.Contains(got, "Where a change's time goes") {
		t.Error("runs without stages rendered a stages table")
	}
}
