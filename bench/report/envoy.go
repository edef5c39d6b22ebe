package main

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/xds-server/xds-server/bench"
)

// envoySection is the name of the real-Envoy section of BENCHMARKS.md
// (issue 23), written by this command with -envoy.
const envoySection = "envoy"

// envoyGroup is the runs of one mode (xDS server and protocol).
type envoyGroup struct {
	mode string
	runs []bench.EnvoyRun
}

func (g envoyGroup) name() string {
	switch g.mode {
	case bench.EnvoyModeSotW:
		return "xds-server, state of the world"
	case bench.EnvoyModeDelta:
		return "xds-server, delta"
	case bench.EnvoyModeConsul:
		return "Consul v1.14.11's own xDS (delta)"
	}
	return g.mode
}

// groupEnvoy groups runs by mode, in first-seen order.
func groupEnvoy(runs []bench.EnvoyRun) []envoyGroup {
	var out []envoyGroup
	for _, r := range runs {
		i := slices.IndexFunc(out, func(g envoyGroup) bool { return g.mode == r.Mode })
		if i < 0 {
			out = append(out, envoyGroup{mode: r.Mode})
			i = len(out) - 1
		}
		out[i].runs = append(out[i].runs, r)
	}
	return out
}

// envoyFigures are one group's figures: samples pooled over runs, the
// rest per run (medians taken when rendering).
type envoyFigures struct {
	lat                                      []float64 // every Envoy of every change of every run
	runP99, perEnvoy, heapPerEnvoy, cpu, spr []float64 // per run (spr: per change of every run)
	sync                                     []float64 // every Envoy of every run
	envoyRSS, envoyPSS                       []float64 // every Envoy of every run
	measured                                 int       // runs with latencies
	rejected, said                           []string  // distinct, over the runs
}

func computeEnvoy(g envoyGroup) envoyFigures {
	var f envoyFigures
	for _, r := range g.runs {
		f.rejected = appendNew(f.rejected, r.Rejected...)
		f.said = appendNew(f.said, r.Said...)
		f.sync = append(f.sync, r.EnvoySync...)
		if len(r.Latencies) == 0 {
			continue
		}
		f.measured++
		f.lat = append(f.lat, r.Latencies...)
		f.runP99 = append(f.runP99, bench.Percentile(r.Latencies, 99))
		f.perEnvoy = append(f.perEnvoy, r.RSSPerEnvoy())
		if r.HeapAfter > 0 {
			f.heapPerEnvoy = append(f.heapPerEnvoy, r.HeapPerEnvoy())
		}
		f.cpu = append(f.cpu, r.ServerCPU/float64(max(r.Changes, 1)))
		f.spr = append(f.spr, r.ChangeSpread...)
		f.envoyRSS = append(f.envoyRSS, r.EnvoyRSS...)
		f.envoyPSS = append(f.envoyPSS, r.EnvoyPSS...)
	}
	return f
}

// appendNew appends the elements of add not in xs yet.
func appendNew(xs []string, add ...string) []string {
	for _, a := range add {
		if !slices.Contains(xs, a) {
			xs = append(xs, a)
		}
	}
	return xs
}

// runEnvoy rewrites the real-Envoy section of out from the runs at path.
func runEnvoy(path, commandsPath, wall, out string) error {
	return rewriteSection(out, envoySection, path, commandsPath, "real-Envoy runs", bench.ReadEnvoyRuns,
		func(runs []bench.EnvoyRun, cmds string) string {
			return renderEnvoy(groupEnvoy(runs), cmds, wall, time.Now().UTC())
		})
}

// renderEnvoy renders the body of the real-Envoy section.
func renderEnvoy(groups []envoyGroup, commands, wall string, at time.Time) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	first := groups[0].runs[0]
	p("## Real Envoys (issue 23)")
	p("")
	p("Written by `make bench` on %s (%d run(s) per row; wall time of this part %s). %d Envoy 1.40.0 processes",
		at.Format("2006-01-02 15:04 MST"), len(groups[0].runs), wall, first.Envoys)
	p("(`--concurrency 1`) on one xDS server, the xDS server, Consul and the Envoys on the same two cores;")
	p("%d services x %d endpoints in a real Consul v1.14.11. A change is one endpoint's health flipped in", first.Services, first.Endpoints)
	p("Consul; its latency, per Envoy, runs from the flip call until that Envoy's admin API shows the")
	p("cluster's new healthy host count, read every %s. Percentiles are over every sample (every Envoy of", secs(first.Poll))
	p("every change of every run); other figures are medians over runs, Envoy memory over every Envoy of every run.")
	p("")
	p("| xDS server | Envoys | change -> every Envoy, p50 | p99 | max | median of per-run p99 | first -> last Envoy of a change (median) | server RSS per Envoy | server CPU per change | Envoy RSS (PSS) | an Envoy's start -> synced (median) |")
	p("|---|---|---|---|---|---|---|---|---|---|---|")
	for _, g := range groups {
		f := computeEnvoy(g)
		if f.measured == 0 {
			p("| %s | %d | not measured: Envoy did not take what the server sent (below) | | | | | | | | |", g.name(), g.runs[0].Envoys)
			continue
		}
		per := bytesFmt(bench.Median(f.perEnvoy))
		if len(f.heapPerEnvoy) > 0 {
			per += fmt.Sprintf(" (live Go heap %s)", bytesFmt(bench.Median(f.heapPerEnvoy)))
		}
		p("| %s | %d | %s | %s (%d samples) | %s | %s | %s | %s | %.0f CPU-ms | %s (%s) | %s |", g.name(), g.runs[0].Envoys,
			secs(bench.Percentile(f.lat, 50)), secs(bench.Percentile(f.lat, 99)), len(f.lat), secs(bench.Percentile(f.lat, 100)),
			secs(bench.Median(f.runP99)), secs(bench.Median(f.spr)), per, bench.Median(f.cpu)*1e3,
			bytesFmt(bench.Median(f.envoyRSS)), bytesFmt(bench.Median(f.envoyPSS)), secs(bench.Median(f.sync)))
	}
	p("")
	renderEnvoySaid(p, groups)
	renderEnvoyRuns(p, groups)
	renderEnvoyMethod(p, commands)
	return b.String()
}

// renderEnvoySaid lists, per server, what the Envoys rejected and logged.
func renderEnvoySaid(p func(string, ...any), groups []envoyGroup) {
	p("What the Envoys said (their rejection stats, then every distinct warning or error line of their logs):")
	p("")
	for _, g := range groups {
		f := computeEnvoy(g)
		switch {
		case len(f.rejected) == 0 && len(f.said) == 0:
			p("- %s: nothing; every Envoy accepted every update (`update_rejected` 0, no cluster or listener warming, connected).", g.name())
			continue
		case len(f.rejected) == 0:
			p("- %s: nothing rejected (`update_rejected` 0, no cluster or listener warming, connected); logged:", g.name())
		default:
			p("- %s: **rejected**: %s; logged:", g.name(), strings.Join(f.rejected, "; "))
		}
		for _, s := range f.said {
			p("  - `%s`", strings.ReplaceAll(s, "`", "'"))
		}
	}
	p("")
}

func renderEnvoyRuns(p func(string, ...any), groups []envoyGroup) {
	p("| xDS server | run | all Envoys started and synced after | p50 | p99 | server RSS before | after | per Envoy | server CPU over the changes | Envoy RSS (median) |")
	p("|---|---|---|---|---|---|---|---|---|---|")
	for _, g := range groups {
		for i, r := range g.runs {
			if len(r.Latencies) == 0 {
				p("| %s | %d | %s | not measured | | %s | | | | |", g.name(), i+1, secs(r.SyncSeconds), bytesFmt(r.RSSBefore))
				continue
			}
			p("| %s | %d | %s | %s | %s | %s | %s | %s | %.2f CPU-s | %s |", g.name(), i+1, secs(r.SyncSeconds),
				secs(bench.Percentile(r.Latencies, 50)), secs(bench.Percentile(r.Latencies, 99)), bytesFmt(r.RSSBefore),
				bytesFmt(r.RSSAfter), signedBytes(r.RSSPerEnvoy()), r.ServerCPU, bytesFmt(bench.Median(r.EnvoyRSS)))
		}
	}
	p("")
}

func renderEnvoyMethod(p func(string, ...any), commands string) {
	for _, line := range []string{
		"Method: `BenchmarkEnvoyFleet`, one fresh Consul agent (`consul agent -dev`, loopback, its gRPC port open),",
		"catalog, xDS server and Envoys per run. The catalog is registered through Consul's catalog API, one",
		"node per endpoint with a node check, as agents on other machines would register it; a change is a",
		"catalog write turning one node check critical (or back). Each Envoy is read through its admin API",
		"from the flip on: `/stats?type=Gauges&filter=` of the changed cluster's `membership_healthy`, which Envoy",
		"updates in the same main-thread pass that changes the hosts of `/clusters` (polling `/clusters?format=json`",
		"itself, about 1 MB at this catalog and tens of ms of Envoy's CPU per read, would load the two cores more",
		"than the change does); at the end of each run every Envoy's `/clusters?format=json` is read and every",
		"host of every service must have the health Consul has for it, or the run fails.",
		"**xds-server**: the binary of this tree with its defaults, on the Consul HTTP API; Envoys bootstrapped",
		"by `xds-server envoy bootstrap` (`--delta` for delta), one node id each; the server's memory is its VmRSS",
		"(and Go heap after a forced GC) with the catalog loaded before any Envoy, then with every Envoy synced.",
		"**Consul**: the same agent serves xDS (Consul 1.14 speaks delta ADS only). Each endpoint also has a",
		"Connect sidecar registered on its node (nothing runs it: Consul's xDS gives an Envoy a service's",
		"sidecars, with the health of the node); Envoy i is the sidecar proxy of its own `bench-envoy` instance",
		"on the agent, with an upstream to every service (on Unix sockets), bootstrapped by",
		"`consul connect envoy -bootstrap -proxy-id bench-envoy-NNN-sidecar-proxy -admin-bind 127.0.0.1:0`.",
		"Consul's memory per Envoy is the agent's VmRSS difference (it is also the catalog). Server CPU is",
		"user + system of its process (`/proc/<pid>/stat`) from each flip to the last Envoy updated, summed over",
		"the changes, per change. Envoy RSS is each Envoy's VmRSS, PSS its Pss (shared pages of the binary",
		"split between the Envoys).",
	} {
		p("%s", line)
	}
	renderCommands(p, commands)
}
