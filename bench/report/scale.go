package main

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/xds-server/xds-server/bench"
)

// scaleSection is the name of the 10,000-node section of BENCHMARKS.md
// (issue 17), written by this command with -scale.
const scaleSection = "scale"

// Targets of issue 17 at 10,000 nodes, all met since; the table keeps
// them as a column so that a regression shows.
const (
	scaleLatency = 1.0       // seconds: change or drain -> every node, p99
	scalePeak    = 1.5e9     // bytes: VmHWM over the run
	scalePerNode = 100 << 10 // bytes: RSS per connected node after sync
	scaleCPU     = 0.5e-3    // CPU-seconds per node per full push
	scaleStorm   = 10.0      // seconds: every node connecting at once -> all synced
)

// Targets of issue 29 at 10,000 nodes, judged by the table.
const (
	scale29Latency = 0.5      // seconds: change or drain -> every node, p99, every variant
	scale29Push    = 1.2      // seconds: full push -> every node, p99
	scale29PerNode = 64 << 10 // bytes: RSS per connected node after sync
	scale29Peak    = 1 << 30  // bytes: VmHWM, max of runs
	scale29Storm   = 3.0      // seconds: connect storm, none refused
	scale29Spread  = 1.3      // worst run's change p99 over the median run's
)

// scaleGroup is the runs of one variant (subset size) and protocol.
type scaleGroup struct {
	subset int
	mode   string
	flags  string // the server's flags beyond the defaults
	runs   []bench.Run
}

func (g scaleGroup) name() string {
	name := g.mode + ", every endpoint"
	if g.subset > 0 {
		name = fmt.Sprintf("%s, subset_size %d", g.mode, g.subset)
	}
	if g.flags != "" {
		name += ", `" + g.flags + "`"
	}
	return name
}

// groupScale groups runs by variant then protocol, in first-seen order.
func groupScale(runs []bench.Run) []scaleGroup {
	var out []scaleGroup
	for _, r := range runs {
		i := slices.IndexFunc(out, func(g scaleGroup) bool {
			return g.subset == r.SubsetSize && g.mode == r.Mode && g.flags == r.ServerFlags
		})
		if i < 0 {
			out = append(out, scaleGroup{subset: r.SubsetSize, mode: r.Mode, flags: r.ServerFlags})
			i = len(out) - 1
		}
		out[i].runs = append(out[i].runs, r)
	}
	slices.SortStableFunc(out, func(a, b scaleGroup) int {
		return cmp.Or(cmp.Compare(a.flags, b.flags), cmp.Compare(a.subset, b.subset))
	})
	return out
}

// scaleFigures are one group's figures: pooled samples and per-run medians.
type scaleFigures struct {
	lat, drain                          []float64 // pooled over every sampled node of every change (drain) of every run
	runP99, perNode, peak, storm, cpuPN []float64 // per run (cpuPN: per full push of every run)
	pushP99                             []float64 // per full push of every run: its p99 arrival
	loadCPU, loadCores, loadPushCPU     []float64
	serverStormCPU                      []float64 // per run: the server's CPU over the connect storm (0: not measured)
	refused, samples                    float64
}

func computeScale(g scaleGroup) scaleFigures {
	var f scaleFigures
	for _, r := range g.runs {
		f.lat = append(f.lat, r.Latencies...)
		f.drain = append(f.drain, r.DrainLatencies...)
		f.runP99 = append(f.runP99, bench.Percentile(r.Latencies, 99))
		f.perNode = append(f.perNode, (r.RSSAfter-r.RSSBefore)/float64(r.Nodes))
		f.peak = append(f.peak, r.RSSPeak)
		f.storm = append(f.storm, r.ConnectSeconds)
		f.loadCPU = append(f.loadCPU, r.LoadGenConnectCPU)
		if r.ServerConnectCPU > 0 {
			f.serverStormCPU = append(f.serverStormCPU, r.ServerConnectCPU)
		}
		if r.RunSeconds > 0 {
			f.loadCores = append(f.loadCores, r.LoadGenCPU/r.RunSeconds)
		}
		for _, p := range r.Pushes {
			f.cpuPN = append(f.cpuPN, p.CPUSeconds/float64(r.Nodes))
			f.pushP99 = append(f.pushP99, p.P99Seconds)
			f.loadPushCPU = append(f.loadPushCPU, p.LoadGenCPU)
		}
		f.refused += r.Refused
	}
	f.samples = float64(len(f.lat))
	return f
}

// runScale rewrites the 10,000-node section of out from the runs at path.
func runScale(path, commandsPath, wall, out string) error {
	return rewriteSection(out, scaleSection, path, commandsPath, "runs", bench.ReadRuns,
		func(runs []bench.Run, cmds string) string {
			return renderScale(groupScale(runs), cmds, wall, time.Now().UTC())
		})
}

// renderScale renders the body of the 10,000-node section.
func renderScale(groups []scaleGroup, commands, wall string, at time.Time) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	first := groups[0].runs[0]
	p("## %d nodes on one replica (issues 17, 29)", first.Nodes)
	p("")
	p("Written by `make bench` on %s (%d run(s) per row; wall time of this part %s). %d services x %d endpoints",
		at.Format("2006-01-02 15:04 MST"), len(groups[0].runs), wall, first.Services, first.Endpoints)
	p("in a real Consul, every node subscribed to every service; the subset variant gives every service")
	p("`subset_size`. Percentiles are over every sample of every run; other figures are medians over runs")
	p("(and over full pushes). A node that misses a change fails the run. The wall-clock figures")
	p("(latencies, connect storm) depend on what else runs on the two cores; the load generator's")
	p("own CPU is below.")
	p("")
	p("Targets are issue 29's; the last column judges the same figure against issue 17's (all met when")
	p("issue 17 closed), so that a regression shows.")
	p("")
	p("| measure | variant | target (issue 29) | measured | ratio to target | met | issue 17's target: met |")
	p("|---|---|---|---|---|---|---|")
	// row writes one measure; a measure without an issue 29 target has
	// target "none" (and no ratio), one without an issue 17 target old "none".
	row := func(measure, variant, target, measured string, ratio float64, met bool, old string, oldMet bool) {
		judged, was := fmt.Sprintf("%.2f | %s", ratio, yes(met)), old+": "+yes(oldMet)
		if target == "none" {
			judged = " | "
		}
		if old == "none" {
			was = ""
		}
		p("| %s | %s | %s | %s | %s | %s |", measure, variant, target, measured, judged, was)
	}
	for _, g := range groups {
		f := computeScale(g)
		p99 := bench.Percentile(f.lat, 99)
		row(fmt.Sprintf("Consul change -> every node updated, p99 (%d samples)", len(f.lat)), g.name(), "<= 500 ms",
			fmt.Sprintf("%s (p50 %s; median of per-run p99 %s)", secs(p99), secs(bench.Percentile(f.lat, 50)), secs(bench.Median(f.runP99))),
			p99/scale29Latency, p99 <= scale29Latency, "< 1 s", p99 < scaleLatency)
		if len(f.drain) > 0 {
			d99 := bench.Percentile(f.drain, 99)
			row(fmt.Sprintf("drain (Consul maintenance or `POST /v1/drain`) -> every node DRAINING, p99 (%d samples)", len(f.drain)), g.name(), "<= 500 ms",
				fmt.Sprintf("%s (p50 %s)", secs(d99), secs(bench.Percentile(f.drain, 50))), d99/scale29Latency, d99 <= scale29Latency, "< 1 s", d99 < scaleLatency)
		}
		if len(f.runP99) > 1 {
			worst, med := bench.Percentile(f.runP99, 100), bench.Median(f.runP99)
			spread := worst / med
			row("worst run's change p99 / the median run's", g.name(), fmt.Sprintf("<= %.1fx", scale29Spread),
				fmt.Sprintf("%.2fx (%s / %s)", spread, secs(worst), secs(med)), spread/scale29Spread, spread <= scale29Spread, "none", true)
		}
	}
	for _, g := range groups {
		f := computeScale(g)
		peak, maxPeak, per, cpu := bench.Median(f.peak), bench.Percentile(f.peak, 100), bench.Median(f.perNode), bench.Median(f.cpuPN)
		if len(f.pushP99) > 0 {
			push := bench.Percentile(f.pushP99, 50)
			row(fmt.Sprintf("full push (all %d services change) -> every node, p99 (median of %d pushes)", first.Services, len(f.pushP99)), g.name(), "<= 1.2 s",
				fmt.Sprintf("%s (worst push %s)", secs(push), secs(bench.Percentile(f.pushP99, 100))), push/scale29Push, push <= scale29Push, "none", true)
		}
		row("peak RSS (VmHWM) over the run, max of runs", g.name(), "<= 1 GiB", fmt.Sprintf("%s (median %s)", bytesFmt(maxPeak), bytesFmt(peak)),
			maxPeak/scale29Peak, maxPeak <= scale29Peak, "< 1.5 GB, median", peak < scalePeak)
		row("RSS per connected node after sync", g.name(), "<= 64 KiB", bytesFmt(per), per/scale29PerNode, per <= scale29PerNode, "<= 100 KiB", per <= scalePerNode)
		row(fmt.Sprintf("server CPU per full push (all %d services change) per node", first.Services), g.name(), "none",
			fmt.Sprintf("%.2f CPU-ms", cpu*1e3), 0, false, "<= 0.5 CPU-ms", cpu <= scaleCPU)
		storm := bench.Median(f.storm)
		row(fmt.Sprintf("connect storm: %d nodes connecting at once -> all synced (refused: %.0f)", first.Nodes, f.refused), g.name(), "<= 3 s, none refused",
			secs(storm), storm/scale29Storm, storm <= scale29Storm && f.refused == 0, "< 10 s", storm < scaleStorm && f.refused == 0)
	}
	p("")
	p("The load generator (the `go test` process holding every node's stream) shares the two cores with the")
	p("server and Consul:")
	p("")
	p("| variant | load generator CPU over a run (cores) | its CPU during the connect storm | its CPU per full push | runs |")
	p("|---|---|---|---|---|")
	for _, g := range groups {
		f := computeScale(g)
		p("| %s | %.2f | %.1f CPU-s | %.2f CPU-s | %d |", g.name(), bench.Median(f.loadCores), bench.Median(f.loadCPU), bench.Median(f.loadPushCPU), len(g.runs))
	}
	p("")
	renderFloors(p, groups)
	renderStages(p, groups)
	renderSlowChanges(p, groups)
	renderScaleRuns(p, groups)
	renderScaleMethod(p, first, commands)
	return b.String()
}

func renderScaleRuns(p func(string, ...any), groups []scaleGroup) {
	p("| variant | run | connect storm | p50 | p99 | drain p99 | RSS before | RSS after | RSS/node | peak RSS | full push CPU (median) | full push p99 arrival | nodes per change (median) |")
	p("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, g := range groups {
		for i, r := range g.runs {
			cpu, arrival := make([]float64, 0, len(r.Pushes)), make([]float64, 0, len(r.Pushes))
			for _, ps := range r.Pushes {
				cpu, arrival = append(cpu, ps.CPUSeconds), append(arrival, ps.P99Seconds)
			}
			sampled := make([]float64, len(r.ChangeSampled))
			for k, n := range r.ChangeSampled {
				sampled[k] = float64(n)
			}
			p("| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %.2f CPU-s | %s | %.0f |", g.name(), i+1, secs(r.ConnectSeconds),
				secs(bench.Percentile(r.Latencies, 50)), secs(bench.Percentile(r.Latencies, 99)), secs(bench.Percentile(r.DrainLatencies, 99)),
				bytesFmt(r.RSSBefore), bytesFmt(r.RSSAfter), bytesFmt((r.RSSAfter-r.RSSBefore)/float64(r.Nodes)), bytesFmt(r.RSSPeak),
				bench.Median(cpu), secs(bench.Median(arrival)), bench.Median(sampled))
		}
	}
	p("")
}

func renderScaleMethod(p func(string, ...any), first bench.Run, commands string) {
	p("Method: `BenchmarkConsulFleet` as above (fresh Consul agent, catalog and `xds-server` per run, raw ADS")
	p("streams, one connection per node, every response ACKed), with every node's stream opened at once")
	p("(`-openers 0`): the time from the first dial until every node has every type and every endpoint is")
	p("the connect storm; a refused node or connection (`xds_nodes_refused_total`,")
	p("`listener_connections_refused_total{listener=\"xds\"}`) fails the run. With subsets, a change reaches")
	p("only the nodes that have the endpoint (members show it UNHEALTHY or DRAINING, a replacement that stops")
	p("serving leaves the view): those are sampled, and every one of them must get it. CPU per full push is")
	p("the server's `process_cpu_seconds_total` over the push divided by all %d nodes. The load generator's", first.Nodes)
	p("CPU is its own `getrusage` (user + system).")
	renderCommands(p, commands)
}
