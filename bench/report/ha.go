package main

import (
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/xds-server/xds-server/bench"
)

// Targets of issue 15.
const (
	haDrainTarget  = 1.0      // seconds: drain through one replica -> every node of every replica, p99
	haWritesTarget = 1.0      // Consul writes per second per replica, on average
	haChangeTarget = 1.0      // seconds: Consul change -> every node of every replica, p99 (issue 29)
	haSetTarget    = 1.0      // Consul writes per second of the whole set of replicas (issue 29)
	haNodeTarget   = 64 << 10 // bytes of RSS per connected node per replica (issue 29, as on one replica)
)

// haSection is the name of the HA benchmark's section of BENCHMARKS.md.
const haSection = "ha"

// haStats are the figures of the HA benchmark over its runs.
type haStats struct {
	runs                         []bench.HARun
	drains, undrains             []float64 // pooled over every node of every replica and drain of every run
	runDrainP99                  []float64
	writes, background, extra    []float64 // per replica of every run: writes/s, writes/s of kinds other than drain_*, RSS over the baseline
	baseAfter, haAfter, haBefore []float64
	extraHeap, baseHeap, haHeap  []float64 // live heap after a forced GC
	first                        []float64 // per drain and replica: its first node's latency
	drainCount                   int
	changes, runChangeP99        []float64 // pooled Consul change samples; per-run p99
	changeCount                  int
	setWrites, setBackground     []float64 // per run: writes/s of the set, and without drain_* kinds
	perNode                      []float64 // per replica of every run: RSS per node
	replicaCores, loadGenCores   []float64 // per replica of every run; per run: CPU over the write window, in cores
	changeCores, changeLoadGen   []float64 // per run: all replicas' CPU and the load generator's over the changes, in cores
	changeCPU                    []float64 // per run: all replicas' CPU plus the load generator's per change (gaps included), CPU-seconds
}

func computeHA(runs []bench.HARun) haStats {
	s := haStats{runs: runs}
	for _, r := range runs {
		s.drains = append(s.drains, r.DrainLatencies...)
		s.undrains = append(s.undrains, r.UndrainLatencies...)
		s.runDrainP99 = append(s.runDrainP99, bench.Percentile(r.DrainLatencies, 99))
		s.drainCount += r.Drains
		s.writes = append(s.writes, r.WritesPerSecond()...)
		s.background = append(s.background, backgroundWrites(r)...)
		s.extra = append(s.extra, r.ExtraRSS()...)
		s.baseAfter = append(s.baseAfter, r.BaseRSSAfter)
		s.haAfter = append(s.haAfter, r.RSSAfter...)
		s.haBefore = append(s.haBefore, r.RSSBefore...)
		s.extraHeap = append(s.extraHeap, r.ExtraHeap()...)
		s.baseHeap, s.haHeap = append(s.baseHeap, r.BaseHeapAfter), append(s.haHeap, r.HeapAfter...)
		s.first = append(s.first, r.DrainFirst...)
		s.changes = append(s.changes, r.ChangeLatencies...)
		if r.Changes > 0 {
			s.runChangeP99 = append(s.runChangeP99, bench.Percentile(r.ChangeLatencies, 99))
		}
		s.changeCount += r.Changes
		s.setWrites = append(s.setWrites, r.TotalWritesPerSecond())
		s.setBackground = append(s.setBackground, sum(backgroundWrites(r)))
		s.perNode = append(s.perNode, r.RSSPerNode()...)
		s.replicaCores = append(s.replicaCores, cores(r, r.ReplicaCPU)...)
		if r.ChangeSeconds > 0 {
			s.changeCores = append(s.changeCores, sum(r.ChangeCPU)/r.ChangeSeconds)
			s.changeLoadGen = append(s.changeLoadGen, r.LoadGenChangeCPU/r.ChangeSeconds)
			if r.Changes > 0 {
				s.changeCPU = append(s.changeCPU, (sum(r.ChangeCPU)+r.LoadGenChangeCPU)/float64(r.Changes))
			}
		}
		if r.LoadGenCPU > 0 {
			s.loadGenCores = append(s.loadGenCores, cores(r, []float64{r.LoadGenCPU})...)
		}
	}
	return s
}

func sum(xs []float64) float64 {
	var t float64
	for _, x := range xs {
		t += x
	}
	return t
}

// cores is each CPU-seconds figure of r over its write window, in cores.
func cores(r bench.HARun, cpu []float64) []float64 {
	out := make([]float64, len(cpu))
	for i, v := range cpu {
		if r.WriteSeconds > 0 {
			out[i] = v / r.WriteSeconds
		}
	}
	return out
}

// backgroundWrites is each replica's write rate without the drain writes
// the benchmark itself causes (kinds drain_*).
func backgroundWrites(r bench.HARun) []float64 {
	out := make([]float64, len(r.Writes))
	for i, w := range r.Writes {
		for kind, v := range w {
			if !strings.HasPrefix(kind, "drain_") {
				out[i] += v
			}
		}
		if r.WriteSeconds > 0 {
			out[i] /= r.WriteSeconds
		}
	}
	return out
}

// renderHA renders the body of the HA section.
func renderHA(runs []bench.HARun, commands string, at time.Time) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	s, first := computeHA(runs), runs[0]
	d99, u99 := bench.Percentile(s.drains, 99), bench.Percentile(s.undrains, 99)
	w, bg := bench.Median(s.writes), bench.Median(s.background)
	wmax, bgmax := bench.Percentile(s.writes, 100), bench.Percentile(s.background, 100)
	p("## High availability: %d replicas x %d nodes (issues 15, 29)", first.Replicas, first.Nodes)
	p("")
	p("Written by `BENCH_ONLY=ha make bench` on %s (%d run(s); medians over runs and replicas,", at.Format("2006-01-02 15:04 MST"), len(runs))
	p("percentiles over every sample of every run). %d services x %d endpoints in Consul.", first.Services, first.Endpoints)
	p("")
	p("| what | target | measured | ratio to target | met |")
	p("|---|---|---|---|---|")
	p("| drain through replica A -> every node of every replica has the endpoint DRAINING, p99 (%d drains, %d samples) | < 1 s | %s (p50 %s; median of per-run p99 %s) | %.2f | %s |",
		s.drainCount, len(s.drains), secs(d99), secs(bench.Percentile(s.drains, 50)), secs(bench.Median(s.runDrainP99)), d99/haDrainTarget, yes(d99 < haDrainTarget))
	p("| undrain through the last replica -> every node of every replica has it HEALTHY again, p99 (%d samples) | < 1 s | %s (p50 %s) | %.2f | %s |",
		len(s.undrains), secs(u99), secs(bench.Percentile(s.undrains, 50)), u99/haDrainTarget, yes(u99 < haDrainTarget))
	renderHAScale(p, s)
	p("| Consul writes per second of the busiest replica, over the run (`xds_ha_consul_writes_total`) | <= 1/s | %.2f/s (median replica %.2f/s) | %.2f | %s |",
		wmax, w, wmax/haWritesTarget, yes(wmax <= haWritesTarget))
	p("| the same without the benchmark's own drain writes (kinds other than `drain_*`) | <= 1/s | %.2f/s (median replica %.2f/s) | %.2f | %s |",
		bgmax, bg, bgmax/haWritesTarget, yes(bgmax <= haWritesTarget))
	if bench.Median(s.baseAfter) > 0 { // measured with -ha-baseline
		p("| extra RSS per replica that HA costs (HA replica with %d nodes minus one replica without HA with the same nodes, both in steady state) | no target | %s (replica without HA: %s; HA replica: %s) | | |",
			first.Nodes, signedBytes(bench.Median(s.extra)), bytesFmt(bench.Median(s.baseAfter)), bytesFmt(bench.Median(s.haAfter)))
		p("| extra live Go heap per replica that HA costs (heap in use right after a forced GC, same moments) | no target | %s (replica without HA: %s; HA replica: %s) | | |",
			signedBytes(bench.Median(s.extraHeap)), bytesFmt(bench.Median(s.baseHeap)), bytesFmt(bench.Median(s.haHeap)))
	}
	p("| drain through A -> the first node of each replica has it (Consul KV watch, before the fan-out), p50 / p99 over drains x replicas | no target | %s / %s | | |",
		secs(bench.Percentile(s.first, 50)), secs(bench.Percentile(s.first, 99)))
	p("")
	renderHARuns(p, s)
	renderHAMethod(p, first, commands)
	return b.String()
}

// renderHAScale renders issue 29's rows: Consul changes on every node of
// every replica, the whole set's Consul writes, RSS per node per replica
// and where the CPU went (rows without data in the runs are left out).
func renderHAScale(p func(string, ...any), s haStats) {
	if len(s.changes) > 0 {
		c99 := bench.Percentile(s.changes, 99)
		p("| Consul change (one endpoint's check) -> every node of every replica updated, p99 (%d changes, %d samples) | < 1 s | %s (p50 %s; median of per-run p99 %s) | %.2f | %s |",
			s.changeCount, len(s.changes), secs(c99), secs(bench.Percentile(s.changes, 50)), secs(bench.Median(s.runChangeP99)), c99/haChangeTarget, yes(c99 < haChangeTarget))
	}
	sw := bench.Percentile(s.setWrites, 100)
	p("| Consul writes per second of the whole set (sum over the replicas), worst run | <= 1/s | %.2f/s (median run %.2f/s; without the benchmark's own `drain_*` writes %.2f/s) | %.2f | %s |",
		sw, bench.Median(s.setWrites), bench.Percentile(s.setBackground, 100), sw/haSetTarget, yes(sw <= haSetTarget))
	if len(s.perNode) > 0 {
		pn := bench.Percentile(s.perNode, 100)
		p("| RSS per connected node per replica after sync (RSS right after sync minus before the nodes, over its nodes), worst replica | <= 64 KiB | %s (median replica %s) | %.2f | %s |",
			bytesFmt(pn), bytesFmt(bench.Median(s.perNode)), pn/haNodeTarget, yes(pn <= haNodeTarget))
	}
	if len(s.replicaCores) > 0 {
		p("| CPU over the write window: each replica / the load generator (of the machine's 2 cores) | no target | %.2f / %.2f cores (max replica %.2f) | | |",
			bench.Median(s.replicaCores), bench.Median(s.loadGenCores), bench.Percentile(s.replicaCores, 100))
	}
	if len(s.changeCores) > 0 {
		p("| CPU over the Consul changes (with their gaps): all replicas together / the load generator | no target | %.2f / %.2f cores | | |",
			bench.Median(s.changeCores), bench.Median(s.changeLoadGen))
	}
	if len(s.changeCPU) > 0 {
		c, cores := bench.Median(s.changeCPU), float64(runtime.NumCPU())
		p("| CPU per Consul change, all replicas plus the load generator (gaps included, so an upper bound), and the least time it needs on the machine's %d cores | no target | %.2f CPU-s: %s | | |",
			int(cores), c, secs(c/cores))
	}
}

func renderHARuns(p func(string, ...any), s haStats) {
	p("| run | connect + first config (all replicas) | drain p50 | drain p99 | drain p99 per replica | undrain p99 | change p99 per replica | writes/s per replica (set) | writes by kind (replica A) | RSS without HA (before -> after) | RSS per HA replica (after) | RSS per node per replica | extra RSS per replica | extra live heap per replica | CPU cores per replica (load generator) |")
	p("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	two := func(v float64) string { return fmt.Sprintf("%.2f", v) }
	for i, r := range s.runs {
		p("| %d | %s | %s | %s | %s | %s | %s | %s (%.2f) | %s | %s -> %s | %s | %s | %s | %s | %s (%.2f) |", i+1, secs(r.ConnectSeconds),
			secs(bench.Percentile(r.DrainLatencies, 50)), secs(bench.Percentile(r.DrainLatencies, 99)), list(r.ReplicaDrainP99, secs),
			secs(bench.Percentile(r.UndrainLatencies, 99)), list(r.ReplicaChangeP99, secs), list(r.WritesPerSecond(), two), r.TotalWritesPerSecond(),
			kinds(r), bytesFmt(r.BaseRSSBefore), bytesFmt(r.BaseRSSAfter), list(r.RSSAfter, bytesFmt), list(r.RSSPerNode(), bytesFmt),
			list(r.ExtraRSS(), signedBytes), list(r.ExtraHeap(), signedBytes), list(cores(r, r.ReplicaCPU), two), cores(r, []float64{r.LoadGenCPU})[0])
	}
	p("")
}

func renderHAMethod(p func(string, ...any), first bench.HARun, commands string) {
	p("Method (`BenchmarkHAFleet`): a fresh real Consul agent and catalog per run. First one `xds-server`")
	p("without HA (`--discovery.source consul --subsetting.index_source consul`, defaults otherwise, so that")
	p("it differs from a replica by `ha.enabled` alone) gets %d nodes; its RSS", first.Nodes)
	p("(`process_resident_memory_bytes`) and its Go heap in use right after a GC forced through")
	p("`/debug/pprof/heap?gc=1`, read after the same drains (through itself) and the same idle hold as the")
	p("HA replicas, at least 15s after its nodes synced (weights' blackout 10s + one publish interval), are")
	p("the baseline; it is then stopped. The HA replicas' are read the same way at the end of the run.")
	p("The %d `xds-server` processes have the same flags plus `--ha.enabled`", first.Replicas)
	p("(defaults otherwise: `ha.publish_interval` 5s) and share that Consul; one load generator (the `go test`")
	p("process) opens %d raw ADS streams to each (distinct node ids, CDS/EDS/LDS/RDS wildcard,", first.Nodes)
	if first.StreamsPerConn > 1 {
		p("%d nodes per gRPC connection, since one process may hold only so many connections: its open-file limit,", first.StreamsPerConn)
		p("not the servers, sets this; every stream is still a node of its own to the server,")
	}
	p("every response ACKed). Each drain is `POST /v1/drain` on replica A; a sample is, per node of every")
	p("replica, the time from just before the call until the node reads the EDS response with the")
	p("endpoint DRAINING (the first node of a replica to get it tells when that replica learnt it).")
	p("Each drain is then undone with `DELETE /v1/drain` on the last replica (same")
	p("measure, back to HEALTHY) before the next drain. Consul writes are the increase of each replica's")
	p("`xds_ha_consul_writes_total` (all kinds; a transaction counts once) from every replica ready to the")
	p("end of the drains, the changes and an idle hold, over that time (%.0f s in run 1); the set's rate is their sum.", first.WriteSeconds)
	if first.Changes > 0 {
		p("After the drains, %d Consul changes one at a time: a TTL check of one endpoint flipped, as", first.Changes)
		p("`BenchmarkConsulFleet` does; a sample is, per node of every replica, the time from just before the")
		p("flip until the node reads the EDS response with the new health.")
	}
	p("RSS per node per replica is each replica's RSS right after every node synced (plus 2 s) minus its RSS")
	p("before any node connected, over its %d nodes. CPU is each replica's `process_cpu_seconds_total` and the", first.Nodes)
	p("load generator's own `getrusage` over the write window, in cores.")
	if first.LoadInterval > 0 {
		p("Every service has weights from `POST /v1/load` (`services.<name>.weights: {enabled: true, sources: [http]}`,")
		p("`weights.*` at their defaults, in the baseline too); every %s each replica gets one batch with the", secs(first.LoadInterval))
		p("reports of its third of the endpoints (endpoint e to replica e mod %d; utilization fixed per", first.Replicas)
		p("endpoint in [0.3, 0.7] with a jitter of 0.01, qps 100), so only the shared summaries make the whole.")
	} else {
		p("No load reports (ORCA, LRS, `POST /v1/load`) are sent, so the summaries carry no load.")
	}
	p("Every process (Consul, %d replicas, the load generator) shares the machine's cores.", first.Replicas)
	renderCommands(p, commands)
}

// kinds lists writes by kind of the first replica of r, sorted by kind.
func kinds(r bench.HARun) string {
	if len(r.Writes) == 0 {
		return ""
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(r.Writes[0])) {
		parts = append(parts, fmt.Sprintf("%s %.0f", k, r.Writes[0][k]))
	}
	return strings.Join(parts, ", ")
}

func list(xs []float64, f func(float64) string) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = f(x)
	}
	return strings.Join(parts, " / ")
}

func signedBytes(b float64) string {
	if b < 0 {
		return "-" + bytesFmt(-b)
	}
	return "+" + bytesFmt(b)
}
