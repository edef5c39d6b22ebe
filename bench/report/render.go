package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/xds-server/xds-server/bench"
)

// Targets of the design guide, §6.
const (
	latencyTarget = 1.0   // seconds: p99 of Consul change -> every node updated, 1,000 nodes
	memoryTarget  = 1.5e9 // bytes: server memory with 10,000 streams
	memoryNodes   = 10000
)

type report struct {
	machine   machine
	invoked   string
	commands  string
	wall      time.Duration
	modes     [][]bench.Run // runs grouped by protocol
	inprocess []goBench
	at        time.Time
}

// stats are the figures of one protocol over its runs.
type stats struct {
	mode                       string
	runs                       []bench.Run
	samples                    int
	p50, p99, max              float64 // pooled over every node x change of every run
	runP50, runP99             []float64
	perNode, heapPerNode       []float64 // bytes per connected node, per run
	goalPerNode, peakPerNode   []float64 // heap goal and peak RSS (minus RSS before) per node, per run
	end, peak                  []float64 // RSS bytes at the end of the run and at its peak, per run
	before, after              []float64 // RSS bytes, per run
	connect, goroutinesPerNode []float64
	pushCPU, pushWall, pushP99 []float64 // every full push of every run
	pushEDS, pushReconciles    []float64
	drains                     []float64 // drain propagation, pooled
	drainCount                 int
}

func compute(runs []bench.Run) stats {
	s := stats{mode: runs[0].Mode, runs: runs}
	var pooled []float64
	for _, r := range runs {
		pooled = append(pooled, r.Latencies...)
		s.drains = append(s.drains, r.DrainLatencies...)
		s.drainCount += r.Drains
		s.runP50 = append(s.runP50, bench.Percentile(r.Latencies, 50))
		s.runP99 = append(s.runP99, bench.Percentile(r.Latencies, 99))
		n := float64(r.Nodes)
		s.perNode = append(s.perNode, (r.RSSAfter-r.RSSBefore)/n)
		s.heapPerNode = append(s.heapPerNode, (r.HeapAfter-r.HeapBefore)/n)
		s.goalPerNode = append(s.goalPerNode, (r.GoalAfter-r.GoalBefore)/n)
		s.peakPerNode = append(s.peakPerNode, (r.RSSPeak-r.RSSBefore)/n)
		s.end, s.peak = append(s.end, r.RSSEnd), append(s.peak, r.RSSPeak)
		s.before, s.after = append(s.before, r.RSSBefore), append(s.after, r.RSSAfter)
		s.connect = append(s.connect, r.ConnectSeconds)
		s.goroutinesPerNode = append(s.goroutinesPerNode, r.Goroutines/n)
		for _, p := range r.Pushes {
			s.pushCPU = append(s.pushCPU, p.CPUSeconds)
			s.pushWall = append(s.pushWall, p.WallSeconds)
			s.pushP99 = append(s.pushP99, p.P99Seconds)
			s.pushEDS = append(s.pushEDS, p.EDSPerNode)
			s.pushReconciles = append(s.pushReconciles, p.Reconciles)
		}
	}
	s.samples = len(pooled)
	s.p50, s.p99, s.max = bench.Percentile(pooled, 50), bench.Percentile(pooled, 99), bench.Percentile(pooled, 100)
	return s
}

func render(r report) string {
	var b strings.Builder
	all := make([]stats, 0, len(r.modes))
	for _, runs := range r.modes {
		all = append(all, compute(runs))
	}
	first := r.modes[0][0]
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	renderHeader(p, r)
	renderSummary(p, r, all)
	renderMethod(p, r, first)
	for _, s := range all {
		renderMode(p, s)
	}
	renderInProcess(p, r.inprocess)
	return b.String()
}

// renderHeader writes the title, where the file comes from and the machine.
func renderHeader(p func(string, ...any), r report) {
	p("# Benchmarks")
	p("")
	p("Written by `%s` (`scripts/bench.sh`) on %s; do not edit by hand, run it again.", r.invoked, r.at.Format("2006-01-02 15:04 MST"))
	p("Targets: design guide §6 (issue 2). Every figure is a median over runs or a percentile over all")
	p("samples of all runs, never a single run.")
	p("")
	p("## Machine")
	p("")
	p("| | |")
	p("|---|---|")
	p("| CPU | %s, %d cores (`nproc`) |", r.machine.cpu, r.machine.cores)
	p("| memory | %s |", r.machine.memory)
	p("| OS | %s |", r.machine.kernel)
	p("| Go | %s |", r.machine.goVersion)
	p("| Consul | %s (`consul agent -dev` on 127.0.0.1) |", r.machine.consul)
	if r.wall > 0 {
		p("| wall time of the whole benchmark | %s |", r.wall.Round(time.Second))
	}
	p("")
}

// renderSummary writes the table of every mode's figures against the
// design guide's targets.
func renderSummary(p func(string, ...any), r report, all []stats) {
	first := r.modes[0][0]
	p("## Summary against the targets")
	p("")
	p("%d nodes, %d services x %d endpoints in Consul, %d runs per protocol.", first.Nodes, first.Services, first.Endpoints, len(r.modes[0]))
	p("")
	p("| what | target | measured | ratio to target | met |")
	p("|---|---|---|---|---|")
	for _, s := range all {
		p("| Consul change -> every node updated, p99 (%s, %d samples) | < 1 s | %s (p50 %s; median of per-run p99 %s) | %.2f | %s |",
			s.mode, s.samples, secs(s.p99), secs(s.p50), secs(bench.Median(s.runP99)), s.p99/latencyTarget, yes(s.p99 < latencyTarget))
	}
	for _, s := range all {
		if len(s.drains) == 0 {
			continue
		}
		d99 := bench.Percentile(s.drains, 99)
		p("| drain propagation (Consul maintenance or admin drain call -> every node has the endpoint DRAINING), p99 (%s, %d drains, %d samples) | < 1 s | %s (p50 %s) | %.2f | %s |",
			s.mode, s.drainCount, len(s.drains), secs(d99), secs(bench.Percentile(s.drains, 50)), d99/latencyTarget, yes(d99 < latencyTarget))
	}
	budget := memoryTarget / memoryNodes
	for _, s := range all {
		per, peak := bench.Median(s.perNode), bench.Median(s.peakPerNode)
		ext := bench.Median(s.before) + memoryNodes*per
		p("| server RSS per connected node, 2s after every node synced (%s) | <= %s (1.5 GB / 10,000) | %s | %.2f | %s |",
			s.mode, bytesFmt(budget), bytesFmt(per), per/budget, yes(per <= budget))
		p("| server peak RSS (VmHWM) over the run, minus RSS before, per node (%s) | <= %s | %s | %.2f | %s |",
			s.mode, bytesFmt(budget), bytesFmt(peak), peak/budget, yes(peak <= budget))
		p("| server RSS with 10,000 nodes, extrapolated linearly from %d (%s) | < 1.5 GB | %s | %.2f | %s |",
			first.Nodes, s.mode, bytesFmt(ext), ext/memoryTarget, yes(ext < memoryTarget))
	}
	for _, s := range all {
		cpu := bench.Median(s.pushCPU)
		p("| server CPU per full push (%s): all %d services changed, every node updated | no target | %.2f CPU-s (%.2f CPU-ms per node) | | |",
			s.mode, first.Services, cpu, cpu/float64(first.Nodes)*1e3)
	}
	p("")
}

func renderMethod(p func(string, ...any), r report, first bench.Run) {
	p("## Method")
	p("")
	p("- **Processes.** A real Consul agent (`consul agent -dev`, loopback, free ports) and the real")
	p("  `xds-server` binary built from this tree, run as a separate process with")
	p("  `--discovery.source consul` and every other setting at its default (debounce 50ms,")
	p("  `discovery.consul.min_interval` 100ms). Each run starts a fresh agent and server.")
	p("- **Catalog.** %d services x %d endpoints registered through the agent HTTP API, each endpoint with", first.Services, first.Endpoints)
	p("  its own TTL check (1h, passing), distinct addresses `10.0.<service>.<endpoint+1>:8080`.")
	p("- **Nodes.** %d simulated nodes in one Go process (the `go test` binary, sharing the 2 cores", first.Nodes)
	p("  with the server and Consul): one raw ADS stream per node (`%s` protocol per table below),", "sotw/delta")
	p("  %d node(s) per gRPC connection with Envoy's HTTP/2 flow control (static 256 MiB stream and", first.StreamsPerConn)
	p("  connection windows, no BDP pings; `-grpc-windows` gives grpc-go's 64 KiB windows grown by BDP")
	p("  pings, which cost the server a ping answer per response), wildcard subscriptions to CDS, EDS,")
	p("  LDS and RDS; every response")
	p("  is ACKed at once. The client reads only the version, type and nonce of a response; an EDS")
	p("  resource is decoded once per distinct version for the whole fleet (versions are content")
	p("  hashes), so the clients stay light; SotW EDS responses (which carry only the load")
	p("  assignments that changed) are merged by name. The arrival time is taken when the response is read.")
	p("- **Latency.** A change flips one endpoint's TTL check (passing <-> critical) with")
	p("  `PUT /v1/agent/check/update/:id`; a node's sample is the time from just before that call")
	p("  until it reads the first EDS response in which that endpoint has the new health")
	p("  (HEALTHY/UNHEALTHY). The next change starts once every node has the previous one, plus a")
	p("  quiet gap, so changes never coalesce; each change touches another service. p50/p99 are")
	p("  nearest-rank over all node x change samples of all runs.")
	p("- **Drain propagation.** After the full pushes, endpoints are put into lame duck one at a")
	p("  time, alternately with Consul service maintenance (`PUT /v1/agent/service/maintenance/:id`)")
	p("  and xds-server's `POST /v1/drain`; a node's sample is the time from just before that call")
	p("  until it reads the first EDS response with that endpoint DRAINING. Each is undrained, and")
	p("  every node has seen that, before the next.")
	p("- **Memory.** Server RSS (`process_resident_memory_bytes` on `/metrics`, i.e. VmRSS), Go heap")
	p("  in use and Go heap goal (`go_memstats_next_gc_bytes`, about twice what was live at the last")
	p("  GC), 2s after the catalog is loaded with no node connected (before) and 2s after every node")
	p("  has its full config (after): (after - before) / nodes. No GC is forced: this is what the")
	p("  process holds, garbage of the connect burst included, so the figure varies between runs. The")
	p("  peak RSS is the process's VmHWM (`/proc/<pid>/status`) at the end of the run, i.e. the most")
	p("  it was ever resident, during the connect burst, the changes or the full pushes.")
	p("- **CPU per full push.** One endpoint of every service flipped at once (parallel API calls);")
	p("  `process_cpu_seconds_total` delta of the server from just before the flips until every node")
	p("  has all %d changes, plus 250ms. The Consul watch handling is included; Consul's and the", first.Services)
	p("  clients' CPU are not. The changes reach the server over a few reconciles, so a node may get")
	p("  more than one EDS response per full push (column `EDS/node`).")
	if r.commands != "" {
		p("")
		p("Commands run:")
		p("")
		p("```sh")
		p("%s", r.commands)
		p("```")
	}
	p("")
}

func renderMode(p func(string, ...any), s stats) {
	p("## Consul -> nodes, %s", s.mode)
	p("")
	p("| run | connect + first config | p50 | p99 | max | RSS before | RSS after | RSS/node | heap in use/node | heap goal/node | RSS end | peak RSS | goroutines/node | full push CPU (median) | full push wall (median) | EDS/node per full push |")
	p("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for i, r := range s.runs {
		var cpu, wall, eds []float64
		for _, push := range r.Pushes {
			cpu, wall, eds = append(cpu, push.CPUSeconds), append(wall, push.WallSeconds), append(eds, push.EDSPerNode)
		}
		p("| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %.1f | %.2f CPU-s | %s | %.2f |", i+1, secs(r.ConnectSeconds),
			secs(bench.Percentile(r.Latencies, 50)), secs(bench.Percentile(r.Latencies, 99)), secs(bench.Percentile(r.Latencies, 100)),
			bytesFmt(r.RSSBefore), bytesFmt(r.RSSAfter), bytesFmt(s.perNode[i]), bytesFmt(s.heapPerNode[i]), bytesFmt(s.goalPerNode[i]),
			bytesFmt(r.RSSEnd), bytesFmt(r.RSSPeak), s.goroutinesPerNode[i], bench.Median(cpu), secs(bench.Median(wall)), bench.Median(eds))
	}
	p("| **median** | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %.1f | %.2f CPU-s | %s | %.2f |", secs(bench.Median(s.connect)),
		secs(bench.Median(s.runP50)), secs(bench.Median(s.runP99)), "", bytesFmt(bench.Median(s.before)), bytesFmt(bench.Median(s.after)),
		bytesFmt(bench.Median(s.perNode)), bytesFmt(bench.Median(s.heapPerNode)), bytesFmt(bench.Median(s.goalPerNode)),
		bytesFmt(bench.Median(s.end)), bytesFmt(bench.Median(s.peak)), bench.Median(s.goroutinesPerNode),
		bench.Median(s.pushCPU), secs(bench.Median(s.pushWall)), bench.Median(s.pushEDS))
	p("")
	p("Pooled over %d samples: p50 %s, p99 %s, max %s. Full pushes: %d, median CPU %.2f CPU-s,",
		s.samples, secs(s.p50), secs(s.p99), secs(s.max), len(s.pushCPU), bench.Median(s.pushCPU))
	p("median p99 arrival %s, median %.0f reconcile(s) each.", secs(bench.Median(s.pushP99)), bench.Median(s.pushReconciles))
	p("")
}

func renderInProcess(p func(string, ...any), results []goBench) {
	if len(results) == 0 {
		return
	}
	names, groups := groupGoBench(results)
	p("## In-process push (`BenchmarkInProcessPush`)")
	p("")
	p("`xds.Server` alone (xds.New, Update, Run, Serve on loopback; debounce 1µs) with the same")
	p("fleet of nodes and catalog in the same process, no Consul and no process boundary. One op is")
	p("one endpoint's health changing in a discovery snapshot until every node has read the EDS")
	p("response showing it. B/op and allocs/op include the clients. Medians over %d counts.", len(groups[names[0]]))
	p("")
	p("| benchmark | ns/op (= time until every node updated) | p99 node arrival | B/op | allocs/op |")
	p("|---|---|---|---|---|")
	for _, name := range names {
		var ns, p99, bop, allocs []float64
		for _, g := range groups[name] {
			ns, p99 = append(ns, g.metrics["ns/op"]), append(p99, g.metrics["p99-ms"])
			bop, allocs = append(bop, g.metrics["B/op"]), append(allocs, g.metrics["allocs/op"])
		}
		p("| %s | %s (%s) | %s | %s | %.0f |", name, fmt.Sprintf("%.0f", bench.Median(ns)), secs(bench.Median(ns)/1e9),
			secs(bench.Median(p99)/1e3), bytesFmt(bench.Median(bop)), bench.Median(allocs))
	}
	p("")
	p("Profile it with `go test ./bench -run '^$' -bench InProcessPush/sotw -benchtime 5x -cpuprofile cpu.out`.")
}

func secs(s float64) string {
	if s < 1 {
		return fmt.Sprintf("%.0f ms", s*1e3)
	}
	return fmt.Sprintf("%.2f s", s)
}

func bytesFmt(b float64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.2f GiB", b/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", b/(1<<20))
	default:
		return fmt.Sprintf("%.1f KiB", b/(1<<10))
	}
}

func yes(ok bool) string {
	if ok {
		return "yes"
	}
	return "**no**"
}
