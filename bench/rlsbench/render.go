package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// sectionName names this benchmark's section of BENCHMARKS.md.
const sectionName = "rlsbench"

// report is everything the section shows; render is a pure function of it.
type report struct {
	command         string
	load            LoadConfig
	rounds          int
	config          string // the YAML every leg serves
	machine         machine
	envoyLocalCache int // bytes
	// envoyPipelineWindow is its REDIS_PIPELINE_WINDOW; 0: its default.
	envoyPipelineWindow time.Duration
	xdsServer           string // ratelimit.server from the environment; "": the default
	topologies          []topologyResult
}

// topologyResult is what was measured on one Redis topology.
type topologyResult struct {
	name      string // topoSingle or topoCluster
	legs      []legInfo
	workloads []workloadResult
	sweep     []sweepPoint // the headline workload at more requests in flight (sweep.go)
}

// machine describes where it ran.
type machine struct {
	cpu, goVersion, kernel, redis, envoy, loadAvg string
	cores                                         int
}

type legInfo struct{ name, unavailable string }

type workloadResult struct {
	named namedWorkload
	runs  []legRun
}

// legRun is one measured run of one leg.
type legRun struct {
	leg   string
	round int
	res   *Result
	// CPU cores used while measuring: CPU time over elapsed time.
	cpuClient, cpuServer, cpuRedis float64
}

// legSummary is a leg's runs of one workload: medians over rounds, sums
// of counts.
type legSummary struct {
	runs                            int
	decisions                       []float64 // per run, in order
	decisionsPerSec, requestsPerSec float64
	p50, p99, p999                  time.Duration
	ok, over, unlimited, unknown    uint64
	errors                          uint64
	cpuClient, cpuServer, cpuRedis  float64
}

// summarize returns the summary of leg's runs (runs == 0 when none).
func summarize(runs []legRun, leg string) legSummary {
	var s legSummary
	var req, p50, p99, p999, cc, cs, cr []float64
	for _, r := range runs {
		if r.leg != leg {
			continue
		}
		s.runs++
		s.decisions = append(s.decisions, r.res.DecisionsPerSec())
		req = append(req, r.res.RequestsPerSec())
		p50 = append(p50, float64(r.res.Latency.Quantile(0.5)))
		p99 = append(p99, float64(r.res.Latency.Quantile(0.99)))
		p999 = append(p999, float64(r.res.Latency.Quantile(0.999)))
		cc, cs, cr = append(cc, r.cpuClient), append(cs, r.cpuServer), append(cr, r.cpuRedis)
		s.ok += r.res.OK
		s.over += r.res.OverLimit
		s.unlimited += r.res.Unlimited
		s.unknown += r.res.Unknown
		s.errors += r.res.Errors
	}
	s.decisionsPerSec, s.requestsPerSec = median(s.decisions), median(req)
	s.p50, s.p99, s.p999 = time.Duration(median(p50)), time.Duration(median(p99)), time.Duration(median(p999))
	s.cpuClient, s.cpuServer, s.cpuRedis = median(cc), median(cs), median(cr)
	return s
}

// median returns the median of xs (the mean of the middle two for an
// even count); 0 when empty. xs is not modified.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// render returns the Markdown section.
func render(r report) string {
	var b strings.Builder
	b.WriteString("## Rate-limit service (RLS v3): xds-server vs envoyproxy/ratelimit\n\n")
	fmt.Fprintf(&b, "Written by `make rlsbench` (= `bash scripts/rlsbench.sh`, also run by `make bench`), which runs\n"+
		"`%s`; do not edit by hand, run it again.\n\n", r.command)
	renderSetup(&b, r)
	if len(r.topologies) == 1 && r.topologies[0].name == topoSingle {
		renderTopology(&b, r.topologies[0], "###")
		renderSweep(&b, r.topologies[0], r.load.Concurrency, "###")
		return b.String()
	}
	for i, t := range r.topologies {
		if i > 0 {
			b.WriteString("\n")
		}
		if t.name == topoCluster {
			fmt.Fprintf(&b, "### Redis Cluster: %d masters, %d replicas\n\n", clusterMasters, clusterMasters*clusterReplicas)
			renderClusterSetup(&b, r)
		} else {
			b.WriteString("### Redis: one node\n\n")
		}
		renderTopology(&b, t, "####")
		renderSweep(&b, t, r.load.Concurrency, "####")
	}
	renderScaling(&b, r)
	return b.String()
}

// renderTopology writes the unmeasured legs, a table per workload and the
// ratios and targets of one topology, under headings of level h.
func renderTopology(b *strings.Builder, t topologyResult, h string) {
	missing := false
	for _, leg := range t.legs {
		if leg.unavailable != "" {
			fmt.Fprintf(b, "- **%s: not measured.** %s\n", legLabel(t.name, leg.name), leg.unavailable)
			missing = true
		}
	}
	if missing {
		b.WriteString("\n")
	}
	for _, w := range t.workloads {
		renderWorkload(b, t, w, h)
	}
	if t.name == topoCluster {
		renderClusterRatios(b, t, h)
	} else {
		renderRatios(b, t, h)
	}
}

// redisNote is the first sentence on the servers: the one Redis node,
// or where the cluster is described.
func redisNote(r report) string {
	for _, t := range r.topologies {
		if t.name == topoSingle {
			return fmt.Sprintf("One `%s` on 127.0.0.1 (no persistence), shared by the Redis legs and emptied "+
				"(`FLUSHALL`) before every run.", orUnknown(r.machine.redis))
		}
	}
	return fmt.Sprintf("`%s` on 127.0.0.1 (no persistence), as the Redis Cluster described below.", orUnknown(r.machine.redis))
}

// pipelineNote is envoyproxy/ratelimit's REDIS_PIPELINE_WINDOW.
func pipelineNote(window time.Duration) string {
	if window <= 0 {
		return "no pipeline window"
	}
	return fmt.Sprintf("`REDIS_PIPELINE_WINDOW=%v`", window)
}

// serverNote says which ratelimit.server the xds-server legs ran.
func serverNote(server string) string {
	if server == "" {
		return "behind its default `ratelimit.server` (lean: its own HTTP/2 server for ShouldRateLimit; " +
			"`XDS_SERVER_RATELIMIT_SERVER=grpc` in rlsbench's environment measures grpc-go instead)"
	}
	return fmt.Sprintf("with `XDS_SERVER_RATELIMIT_SERVER=%s` (ratelimit.server)", server)
}

func renderSetup(b *strings.Builder, r report) {
	m := r.machine
	fmt.Fprintf(b, "**Machine.** %s, %d cores, %s, %s; load average before the run: %s. "+
		"The load generator, the server under test and Redis share these cores.\n\n",
		orUnknown(m.cpu), m.cores, orUnknown(m.kernel), orUnknown(m.goVersion), orUnknown(m.loadAvg))
	fmt.Fprintf(b, "**Servers.** %s envoyproxy/ratelimit %s with its defaults (Redis pool of 10, %s) "+
		"except `REDIS_SOCKET_TYPE=tcp`, `USE_STATSD=false`, `LOG_LEVEL=warn` and "+
		"`LOCAL_CACHE_SIZE_IN_BYTES=%d` (its local over-limit cache, which xds-server also has). "+
		"xds-server built from this tree with `go build`, `--ratelimit.store redis --ratelimit.redis.address ...` "+
		"or `--ratelimit.store memory`, %s. All serve this file (envoyproxy/ratelimit's format, fixed windows):\n\n",
		redisNote(r), orUnknown(m.envoy), pipelineNote(r.envoyPipelineWindow), r.envoyLocalCache, serverNote(r.xdsServer))
	fmt.Fprintf(b, "```yaml\n%s```\n\n", r.config)
	l := r.load
	client := "its own lean HTTP/2 gRPC client (less CPU per call than grpc-go's, CPU the servers share; like grpc-go's and Envoy's clients it coalesces the writes of concurrent requests on a connection)"
	if l.Client == clientGRPC {
		client = "grpc-go"
	}
	fmt.Fprintf(b, "**Load.** `bench/rlsbench` with %s: closed loops, a fixed offered concurrency of **%d requests in flight** "+
		"over %d connections; %v warmup then %v measured per run; %d round(s), each running every leg once, "+
		"the order rotated between rounds. Figures are medians over rounds (decisions/s of each round in brackets); "+
		"decisions/s = requests/s x descriptors per request. Latency is per request, from a log-linear histogram "+
		"(within 0.4%%). CPU cores: the CPU time each process used while measuring over the time measured; "+
		"CPU per decision: that CPU time over the decisions made, which depends less on what else runs on the machine. "+
		"Where server + Redis + client stay below the %d cores, other processes on the machine had the rest.\n\n",
		client, l.Concurrency, l.Conns, l.Warmup, l.Duration, r.rounds, r.machine.cores)
}

func renderWorkload(b *strings.Builder, t topologyResult, w workloadResult, h string) {
	fmt.Fprintf(b, "%s %s\n\n", h, w.named.label)
	fmt.Fprintf(b, "Every request: %s.\n\n", w.named.w)
	redisCol := "Redis"
	if t.name == topoCluster {
		redisCol = fmt.Sprintf("Redis (sum of the %d nodes)", clusterNodes)
	}
	fmt.Fprintf(b, "| server | decisions/s | requests/s | p50 | p99 | p99.9 | OK | OVER_LIMIT | no limit | errors | CPU cores: server / %[1]s / client | CPU µs per decision: server / %[1]s |\n", redisCol)
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|\n")
	for _, leg := range t.legs {
		if leg.unavailable != "" {
			fmt.Fprintf(b, "| %s | not measured | | | | | | | | | | |\n", legLabel(t.name, leg.name))
			continue
		}
		s := summarize(w.runs, leg.name)
		if s.runs == 0 {
			continue
		}
		redis, redisPer := fmt.Sprintf("%.2f", s.cpuRedis), perDecision(s.cpuRedis, s.decisionsPerSec)
		if leg.name == legXDSMemory {
			redis, redisPer = "-", "-"
		}
		fmt.Fprintf(b, "| %s | **%s** (%s) | %s | %s | %s | %s | %s | %s | %s | %s | %.2f / %s / %.2f | %s / %s |\n",
			legLabel(t.name, leg.name), thousands(uint64(s.decisionsPerSec+0.5)), joinRates(s.decisions),
			thousands(uint64(s.requestsPerSec+0.5)), fmtLatency(s.p50), fmtLatency(s.p99), fmtLatency(s.p999),
			thousands(s.ok), thousands(s.over), thousands(s.unlimited+s.unknown), thousands(s.errors),
			s.cpuServer, redis, s.cpuClient, perDecision(s.cpuServer, s.decisionsPerSec), redisPer)
	}
	b.WriteString("\n")
}

// renderRatios writes the ratios per workload and the targets, judged on
// the first (headline) workload.
func renderRatios(b *strings.Builder, r topologyResult, h string) {
	if len(r.workloads) == 0 {
		return
	}
	fmt.Fprintf(b, "%s Ratios and targets\n\n", h)
	b.WriteString("| workload | xds-server Redis / envoyproxy/ratelimit: decisions/s | : p99 | xds-server memory / envoyproxy/ratelimit: decisions/s |\n")
	b.WriteString("|---|---:|---:|---:|\n")
	for _, w := range r.workloads {
		envoy, xr, xm := summarize(w.runs, legEnvoy), summarize(w.runs, legXDSRedis), summarize(w.runs, legXDSMemory)
		fmt.Fprintf(b, "| %s | %s | %s | %s |\n", w.named.name,
			ratio(xr.decisionsPerSec, envoy.decisionsPerSec, xr.runs > 0 && envoy.runs > 0),
			ratio(float64(xr.p99), float64(envoy.p99), xr.runs > 0 && envoy.runs > 0),
			ratio(xm.decisionsPerSec, envoy.decisionsPerSec, xm.runs > 0 && envoy.runs > 0))
	}
	head := r.workloads[0]
	envoy, xr, xm := summarize(head.runs, legEnvoy), summarize(head.runs, legXDSRedis), summarize(head.runs, legXDSMemory)
	fmt.Fprintf(b, "\nTargets, on the headline workload (%s):\n\n", head.named.name)
	if xr.runs > 0 && envoy.runs > 0 {
		tp, lat := xr.decisionsPerSec/envoy.decisionsPerSec, float64(xr.p99)/float64(envoy.p99)
		fmt.Fprintf(b, "- xds-server with Redis >= 2x envoyproxy/ratelimit's decisions/s at equal or lower p99 (issue 6): "+
			"%.2fx at %.2fx the p99 — **%s**\n", tp, lat, metOrMissed(tp >= 2 && lat <= 1))
		fmt.Fprintf(b, "- design guide §6, >= 3x envoyproxy/ratelimit's throughput on the same Redis: %.2fx — **%s**\n",
			tp, metOrMissed(tp >= 3))
	} else {
		b.WriteString("- xds-server with Redis vs envoyproxy/ratelimit: **not measured** (a leg is missing, see above)\n")
	}
	if xm.runs > 0 {
		fmt.Fprintf(b, "- xds-server in memory >= 50,000 decisions/s on this machine: %s — **%s**\n",
			thousands(uint64(xm.decisionsPerSec+0.5)), metOrMissed(xm.decisionsPerSec >= 50000))
	} else {
		b.WriteString("- xds-server in memory >= 50,000 decisions/s: **not measured**\n")
	}
}

// perDecision is the CPU time per decision, in µs, of a process that used
// cores while deciding perSec decisions/s.
func perDecision(cores, perSec float64) string {
	if perSec <= 0 {
		return "-"
	}
	return strconv.FormatFloat(cores/perSec*1e6, 'f', 1, 64)
}

func metOrMissed(ok bool) string {
	if ok {
		return "met"
	}
	return "missed"
}

func ratio(a, b float64, ok bool) string {
	if !ok || b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", a/b)
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// joinRates formats per-round rates as integers: "41,200 / 40,900".
func joinRates(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = thousands(uint64(x + 0.5))
	}
	return strings.Join(parts, " / ")
}

// fmtLatency formats d in µs below a millisecond, else in ms.
func fmtLatency(d time.Duration) string {
	if d < time.Millisecond {
		return strconv.FormatInt(d.Microseconds(), 10) + " µs"
	}
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 2, 64) + " ms"
}

// thousands formats n with comma separators: 1234567 -> "1,234,567".
func thousands(n uint64) string {
	s := strconv.FormatUint(n, 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// renderLoad is load mode's output.
func renderLoad(cfg LoadConfig, r *Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "rlsbench: %s; %s\n", cfg.Addr, cfg.Workload)
	fmt.Fprintf(&b, "  %d in flight over %d connection(s), %v measured after %v warmup\n",
		cfg.Concurrency, cfg.Conns, r.Elapsed.Round(time.Millisecond), cfg.Warmup)
	fmt.Fprintf(&b, "decisions/s  %s\n", thousands(uint64(r.DecisionsPerSec()+0.5)))
	fmt.Fprintf(&b, "requests/s   %s\n", thousands(uint64(r.RequestsPerSec()+0.5)))
	fmt.Fprintf(&b, "latency      p50 %s  p99 %s  p99.9 %s  max %s\n", fmtLatency(r.Latency.Quantile(0.5)),
		fmtLatency(r.Latency.Quantile(0.99)), fmtLatency(r.Latency.Quantile(0.999)), fmtLatency(r.Latency.Max()))
	fmt.Fprintf(&b, "decisions    OK %s  OVER_LIMIT %s  no limit %s  other %s\n",
		thousands(r.OK), thousands(r.OverLimit), thousands(r.Unlimited), thousands(r.Unknown))
	fmt.Fprintf(&b, "errors       %s", thousands(r.Errors))
	if r.FirstError != "" {
		fmt.Fprintf(&b, " (first: %s)", r.FirstError)
	}
	b.WriteString("\n")
	return b.String()
}
