package main

import (
	"strings"
	"testing"
	"time"

	"github.com/xds-server/xds-server/bench"
)

func TestRenderEnvoy(t *testing.T) {
	run := func(mode string, lat ...float64) bench.EnvoyRun {
		return bench.EnvoyRun{Mode: mode, Envoys: 4, Services: 50, Endpoints: 20, Poll: 0.02, SyncSeconds: 12, EnvoySync: []float64{3, 3},
			Latencies: lat, Changes: 2, ChangeSpread: []float64{0.01, 0.03}, ServerCPU: 0.1,
			RSSBefore: 50 << 20, RSSAfter: 54 << 20, HeapBefore: 10 << 20, HeapAfter: 11 << 20,
			EnvoyRSS: []float64{80 << 20, 82 << 20}, EnvoyPSS: []float64{30 << 20, 30 << 20}}
	}
	consul := run(bench.EnvoyModeConsul, 0.3, 0.5)
	consul.HeapBefore, consul.HeapAfter = 0, 0
	consul.Said = []string{"[warning][misc] Deprecated field: `x` (4 of 4 Envoys)"}
	rejected := bench.EnvoyRun{Mode: bench.EnvoyModeConsul, Envoys: 4, SyncSeconds: 120, RSSBefore: 1 << 30,
		Rejected: []string{"cluster_manager.cds.update_rejected: 1 (4 of 4 Envoys)"}}
	runs := []bench.EnvoyRun{run(bench.EnvoyModeSotW, 0.05, 0.1, 0.2, 0.08), consul, run(bench.EnvoyModeSotW, 0.07, 0.09), rejected}
	groups := groupEnvoy(runs)
	if len(groups) != 2 || len(groups[0].runs) != 2 || groups[1].mode != bench.EnvoyModeConsul {
		t.Fatalf("groups: %+v", groups)
	}
	got := renderEnvoy(groups, "make bench", "1m0s", time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC))
	for _, want := range []string{
		"## Real Envoys (issue 23)",
		"read every 20 ms",
		// pooled over both runs: 6 samples, p99 and max the largest; per-run p99s 200 and 90 ms
		"| xds-server, state of the world | 4 | 80 ms | 200 ms (6 samples) | 200 ms | 145 ms | 20 ms | 1.0 MiB (live Go heap 256.0 KiB) | 50 CPU-ms | 81.0 MiB (30.0 MiB) | 3.00 s |",
		"| xds-server, state of the world | 1 | 12.00 s | 80 ms | 200 ms |",
		"| Consul v1.14.11's own xDS (delta) | 4 | 300 ms | 500 ms (2 samples) | 500 ms | 500 ms | 20 ms | 1.0 MiB | 50 CPU-ms |",
		"- xds-server, state of the world: nothing; every Envoy accepted every update",
		"- Consul v1.14.11's own xDS (delta): **rejected**: cluster_manager.cds.update_rejected: 1 (4 of 4 Envoys); logged:",
		"  - `[warning][misc] Deprecated field: 'x' (4 of 4 Envoys)`",
		"| Consul v1.14.11's own xDS (delta) | 2 | 120.00 s | not measured |", // the run Envoy rejected
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in\n%s", want, got)
		}
	}
	if !strings.Contains(got, "```sh\nmake bench\n```") {
		t.Errorf("no commands block in\n%s", got)
	}
	only := renderEnvoy(groupEnvoy([]bench.EnvoyRun{rejected}), "", "1s", time.Now())
	if !strings.Contains(only, "not measured: Envoy did not take what the server sent") {
		t.Errorf("a mode with no measured run:\n%s", only)
	}
}
