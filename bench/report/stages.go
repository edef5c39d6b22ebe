package main

import (
	"fmt"
	"strings"

	"github.com/xds-server/xds-server/bench"
)

// renderStages renders where the changes' and drains' time went (issue
// 29): per variant and kind, p50 / p99 of each stage over every change
// of every run. Runs without stages (before issue 29) render nothing.
func renderStages(p func(string, ...any), groups []scaleGroup) {
	var rows []string
	for _, g := range groups {
		var changes, drains []map[string]float64
		for _, r := range g.runs {
			changes, drains = append(changes, r.Stages...), append(drains, r.DrainStages...)
		}
		for _, k := range []struct {
			what    string
			samples []map[string]float64
		}{{"Consul change", changes}, {"drain", drains}} {
			if len(k.samples) > 0 {
				rows = append(rows, stageRow(g.name(), k.what, k.samples))
			}
		}
	}
	if len(rows) == 0 {
		return
	}
	p("Where a change's time goes (issue 29): for each change, the server's reconcile pass that took it")
	p("(`GET /debug/changes`, the same stamps as `xds_change_stage_seconds`); p50 / p99 in ms over every change")
	p("of every run. **consul**: the bench's call (TTL update, maintenance) -> Consul's blocking query")
	p("returned to the server (none for a drain through the admin API); **discovery**: -> the snapshot")
	p("reached the reconcile loop (`discovery.consul.min_interval`, removal guard, drains); **debounce**:")
	p("-> the pass started (`xds.debounce`); **translate**: -> translated, shared snapshots built;")
	p("**cache**: -> every node's snapshot set; **first / last write**: translated -> the first / last")
	p("response of the pass handed to a node's stream (they overlap the cache stage); **last node**: the")
	p("call -> the last node received it (the fleet's clock, which shares the cores with the server).")
	p("")
	p("| variant | what | changes | consul | discovery | debounce | translate | cache | first write | last write | last node |")
	p("|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		p("%s", r)
	}
	p("")
}

// stageRow is one row of the stages table: p50 / p99 of every stage.
func stageRow(variant, what string, samples []map[string]float64) string {
	cells := []string{variant, what, fmt.Sprint(len(samples))}
	for _, stage := range bench.Stages {
		var xs []float64
		for _, s := range samples {
			if v, ok := s[stage]; ok {
				xs = append(xs, v)
			}
		}
		if len(xs) == 0 {
			cells = append(cells, "-")
			continue
		}
		cells = append(cells, fmt.Sprintf("%s / %s", ms(bench.Percentile(xs, 50)), ms(bench.Percentile(xs, 99))))
	}
	return "| " + strings.Join(cells, " | ") + " |"
}

// ms formats seconds as milliseconds, with a decimal below 10 ms.
func ms(s float64) string {
	if s < 0.01 {
		return fmt.Sprintf("%.1f", s*1e3)
	}
	return fmt.Sprintf("%.0f", s*1e3)
}
