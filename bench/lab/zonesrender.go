package main

import (
	"fmt"
	"io"
	"runtime"
	"strings"
	"time"

	"github.com/xds-server/xds-server/bench/section"
)

// zonesSection is the zone lab's section of BENCHMARKS.md.
const zonesSection = "lab-zones"

// writeZones prints the zone lab's table and verdict and, with
// o.markdown, rewrites its section there.
func (e *env) writeZones(ps []zonePolicy, runs [][]zoneFigures, f zoneFleet, args []string, took time.Duration, stdout io.Writer) error {
	tbl := zoneTable(ps, runs)
	verdict := zoneVerdict(ps, runs)
	fmt.Fprintf(stdout, "%s\n%s\nlogs, configs and diagnostics: %s; took %s\n", tbl, verdict, e.dir, took.Round(time.Second))
	if e.o.markdown == "" {
		return nil
	}
	o := e.o
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	p("## Load lab: zone-skewed fleet (issue 26)")
	p("")
	p("Written by `%s` (`make lab ARGS=--zones`) on %s in %s, on %d cores (%s); do not edit by hand, run it again.",
		command(args), time.Now().UTC().Format("2006-01-02 15:04 UTC"), took.Round(time.Second), runtime.NumCPU(), runtime.GOOS+"/"+runtime.GOARCH)
	p("")
	p("%s", zoneFleetProse(f, o))
	p("")
	b.WriteString(tbl)
	p("")
	p("%s", verdict)
	return section.Rewrite(o.markdown, zonesSection, b.String())
}

// zoneFleetProse says what the zone lab ran.
func zoneFleetProse(f zoneFleet, o options) string {
	count := func(zs []string, z string) int {
		n := 0
		for _, x := range zs {
			if x == z {
				n++
			}
		}
		return n
	}
	return fmt.Sprintf("Real processes on loopback as in the load lab: a Consul agent, the xds-server binary (a fresh one per policy),\n"+
		"%d example backends of %.0f requests/s each (`-slots %d`), %d in zone `a` and %d in zone `b` (service meta `zone`), and\n"+
		"%d grpc-go xDS clients (node `locality.zone`), %d in zone `a` and %d in zone `b`, each %.1f requests/s open loop (Poisson):\n"+
		"a mean utilization of %.2f, zone `a`'s clients asking %.2f of zone `a`'s capacity and zone `b`'s %.2f of zone `b`'s.\n"+
		"Policies: **round_robin** (no locality settings), **strict failover** (`locality.failover: [zone]`), **distribute**\n"+
		"(`failover: [zone]`, `distribute: %g`), all three `lb_policy: round_robin` with weights off; **spill** (`failover: [zone]`,\n"+
		"`weights: { enabled: true, mode: global, sources: [orca, lrs] }`, `ring_hash`; spill on by default, product defaults\n"+
		"for `weights.overload_threshold` 0.9, `overload_recover` 0.8, `overload_period` 5s). Each run lasts %s; **in zone** is the\n"+
		"share of successful requests sent in the last %s that the client's own zone served (the call's peer), **max/mean**\n"+
		"and the zones' utilization are over the backends' ORCA utilization averaged over the same %s; **latency p99** is over\n"+
		"every successful request of the run (spill's first seconds, before it moves traffic, included). %d runs: medians,\n"+
		"each run's max/mean and in-zone share in run order; requests and errors summed over the runs.",
		len(f.caps), zoneCapacity, o.slots, count(f.backendZones, zoneA), count(f.backendZones, zoneB),
		len(f.rates), count(f.clientZones, zoneA), count(f.clientZones, zoneB), f.rates[0],
		o.util, f.demandOverCapacity(zoneA), f.demandOverCapacity(zoneB), o.distribute, o.duration, o.final, o.final, o.runs)
}

// zoneTable is the medians of every zone policy as a Markdown table.
func zoneTable(ps []zonePolicy, runs [][]zoneFigures) string {
	var b strings.Builder
	b.WriteString("| policy | in zone | max/mean | zone a utilization | zone b utilization | mean utilization | latency p99 | requests | errors |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
	for k, p := range ps {
		m := medianZoneFigures(runs[k])
		fmt.Fprintf(&b, "| %s | %.1f%% %s | %.3f %s | %.2f | %.2f | %.2f | %.1f ms | %d | %d |\n", p.name,
			100*m.InZone, eachRun(runs[k], func(r zoneFigures) string { return fmt.Sprintf("%.1f", 100*r.InZone) }),
			m.MaxMean, eachRun(runs[k], func(r zoneFigures) string { return fmt.Sprintf("%.3f", r.MaxMean) }),
			m.ZoneUtil[zoneA], m.ZoneUtil[zoneB], m.MeanUtil, m.P99, m.Requests, m.Errors)
	}
	return b.String()
}

// eachRun is every run's figure in run order, "(a / b / c)"; empty for
// one run.
func eachRun(runs []zoneFigures, cell func(zoneFigures) string) string {
	if len(runs) < 2 {
		return ""
	}
	var each []string
	for _, r := range runs {
		each = append(each, cell(r))
	}
	return "(" + strings.Join(each, " / ") + ")"
}

// zoneVerdict judges spill's medians against issue 26's target.
func zoneVerdict(ps []zonePolicy, runs [][]zoneFigures) string {
	for k, p := range ps {
		if !p.spill {
			continue
		}
		m := medianZoneFigures(runs[k])
		met := "met"
		if !spillMeets(m) {
			met = "**not met**"
		}
		return fmt.Sprintf("Issue 26's target for spill, max/mean <= %.2f with >= %.0f%% of requests in zone: %s (max/mean %.3f, %.1f%% in zone).",
			spillMaxMeanTarget, 100*spillInZoneTarget, met, m.MaxMean, 100*m.InZone)
	}
	return ""
}
