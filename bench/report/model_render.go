package main

import (
	"crypto/sha256"
	"fmt"
	"math"
	"os"
	"strings"
	"time"

	"github.com/xds-server/xds-server/bench"
)

// modelSource names the results file the model was fitted on.
type modelSource struct {
	path   string // as given to -model
	digest string // sha256 of its bytes, hex
	runs   int    // its lines
}

// modelSectionFile renders the model section from the results file at
// path, measured on a machine of the given cores.
func modelSectionFile(path, commandsPath string, q modelQuestion, cores float64, at time.Time) (string, error) {
	if err := q.Validate(); err != nil {
		return "", err
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("report: model: %w", err)
	}
	runs, err := bench.ReadRuns(path)
	if err != nil {
		return "", err
	}
	cmds, err := readCommands(commandsPath)
	if err != nil {
		return "", err
	}
	src := modelSource{path: path, digest: fmt.Sprintf("%x", sha256.Sum256(raw)), runs: len(runs)}
	return renderModelRuns(runs, src, q, cores, cmds, at)
}

// renderModelRuns fits every variant of runs measured at enough sizes and
// renders the section; an error when none is.
func renderModelRuns(runs []bench.Run, src modelSource, q modelQuestion, cores float64, commands string, at time.Time) (string, error) {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	p("## Cost model to %d nodes (issue 29)", q.Nodes)
	p("")
	p("Written by `bench/report -model` on %s from %d BenchmarkConsulFleet runs (results file sha256 `%.12s`), measured",
		at.Format("2006-01-02 15:04 MST"), src.runs, src.digest)
	p("on %.0f cores shared with the load generator and Consul. Every input below is read from that file; nothing is typed in.", cores)
	p("Each cost is a least-squares line over the fleet size n (nodes on the replica); its error is the largest")
	p("relative residual over the measured runs (a row each below) and R². With a run or two per size the fits are")
	p("a first cut: more runs (`BENCH_MODEL_RUNS`) narrow them.")
	fitted := 0
	var skipped []string
	for _, g := range groupScale(runs) {
		points, err := modelPoints(g.runs)
		if err != nil {
			return "", err
		}
		m, err := fitModel(points, cores)
		if err != nil {
			skipped = append(skipped, fmt.Sprintf("%s (%v)", g.name(), err))
			continue
		}
		fitted++
		renderModel(p, g, m, q)
	}
	if fitted == 0 {
		return "", fmt.Errorf("report: model: no variant measured at %d sizes or more: %s", minModelSizes, strings.Join(skipped, "; "))
	}
	if len(skipped) > 0 {
		p("")
		p("Not modelled (too few sizes): %s.", strings.Join(skipped, "; "))
	}
	renderModelMethod(p, commands)
	return b.String(), nil
}

// renderModel renders one variant's fits, its check against the measured
// p99s and its answer to q.
func renderModel(p func(string, ...any), g scaleGroup, m costModel, q modelQuestion) {
	first := g.runs[0]
	p("")
	p("### %s: %d services x %d endpoints, %d sizes (%s nodes)", g.name(), first.Services, first.Endpoints, m.sizes, modelSizes(m))
	p("")
	p("| cost | fixed (a) | per node (b) | max relative residual | R² |")
	p("|---|---|---|---|---|")
	row := func(what string, f fit, fixed, per string) {
		p("| %s | %s | %s | %s | %.3f |", what, fixed, per, pct(f.maxRel), f.r2)
	}
	cpuA := func(f fit) string { return fmt.Sprintf("%.1f CPU-ms", f.a*1e3) }
	cpuB := func(f fit) string { return fmt.Sprintf("%.2f CPU-µs", f.b*1e6) }
	row("server CPU per single change", m.changeCPU, cpuA(m.changeCPU), cpuB(m.changeCPU))
	row(fmt.Sprintf("server CPU per full push (all %d services)", first.Services), m.pushCPU, cpuA(m.pushCPU), cpuB(m.pushCPU))
	row("bytes sent per single change", m.changeB, bytesFmt(m.changeB.a), fmt.Sprintf("%.0f B", m.changeB.b))
	row("bytes sent per full push", m.pushB, bytesFmt(m.pushB.a), fmt.Sprintf("%.0f B", m.pushB.b))
	row("RSS after sync over the catalog's (fixed: the one group of equal nodes)", m.rssNodes, bytesFmt(m.rssNodes.a), bytesFmt(m.rssNodes.b))
	row("peak RSS (VmHWM)", m.rssPeak, bytesFmt(m.rssPeak.a), bytesFmt(m.rssPeak.b))
	row("Consul blocking queries per single change (per replica)", m.changeRead, fmt.Sprintf("%.2f", m.changeRead.a), fmt.Sprintf("%.2g", m.changeRead.b))
	row("Consul blocking queries per full push (per replica)", m.pushRead, fmt.Sprintf("%.1f", m.pushRead.a), fmt.Sprintf("%.2g", m.pushRead.b))
	row("change -> every node, p99", m.changeP99, secs(m.changeP99.a), fmt.Sprintf("%.1f µs", m.changeP99.b*1e6))
	row("full push -> every node, p99 (median of pushes)", m.pushP99, secs(m.pushP99.a), fmt.Sprintf("%.1f µs", m.pushP99.b*1e6))
	p("")
	p("Catalog RSS (no node): %s. Consul writes per replica over a run: %.0f (one replica, `ha.enabled` off; the HA", bytesFmt(m.rssCatalog), m.writes)
	p("section measures them with replicas). The load generator used %.2f of the %.0f cores.", m.loadGen, m.machine)
	renderModelCheck(p, m)
	renderModelAnswer(p, m, q)
}

// renderModelCheck shows the p99 projection against every measured run.
func renderModelCheck(p func(string, ...any), m costModel) {
	ec, ep := m.efficiency(m.changeCPU, m.changeP99), m.efficiency(m.pushCPU, m.pushP99)
	p("")
	p("p99 is projected as fixed + n x CPU per node / (e x cores): the fixed part is the p99 line's intercept")
	p("(Consul's blocking query, debounce, translate), the per-node part the CPU line's slope, and e the share of")
	p("the cores the fan-out had here (CPU slope / p99 slope / %.0f cores): %.2f for a change, %.2f for a full", m.machine, ec, ep)
	p("push (at most 1 is used). Against each measured run:")
	p("")
	p("| nodes | change p99 measured | modelled | full push p99 measured | modelled | RSS after sync over the catalog's, / n | CPU per change / n |")
	p("|---|---|---|---|---|---|---|")
	for _, pt := range m.points {
		p("| %.0f | %s | %s | %s | %s | %s | %.2f CPU-µs |", pt.nodes, secs(pt.changeP99), secs(m.changeP99.at(pt.nodes)),
			secs(pt.pushP99), secs(m.pushP99.at(pt.nodes)), bytesFmt(pt.rssNodes/pt.nodes), pt.changeCPU/pt.nodes*1e6)
	}
}

// renderModelAnswer renders the projection to q and its answer.
func renderModelAnswer(p func(string, ...any), m costModel, q modelQuestion) {
	ss := m.project(q, replicaCounts(q.MinReplicas))
	p("")
	p("Projection to %d nodes at a change's p99 <= %s and a full push's p99 <= %s, a replica at most %d cores and %s peak RSS:",
		q.Nodes, secs(q.P99), secs(q.PushP99), q.MaxCores, bytesFmt(q.MaxMemory))
	p("")
	p("| replicas | nodes each | cores each for a change | for a full push | cores each | change p99 | full push p99 | RSS each | peak RSS each | Consul queries per change (all replicas) | fits |")
	p("|---|---|---|---|---|---|---|---|---|---|---|")
	for _, s := range ss {
		p("| %d | %d | %s | %s | %d | %s | %s | %s | %s | %.1f | %s |", s.replicas, s.nodes, coresFmt(s.changeCores), coresFmt(s.pushCores),
			s.cores, secs(s.changeAtMax), secs(s.pushAtMax), bytesFmt(s.memory), bytesFmt(s.peak), s.changeReads, yes(s.fits))
	}
	p("")
	a, ok := answer(ss)
	if !ok {
		p("**Answer**: no replica count up to %d fits a replica of %d cores and %s: the fixed part or memory rules it out.",
			ss[len(ss)-1].replicas, q.MaxCores, bytesFmt(q.MaxMemory))
		return
	}
	p("**Answer**: %d replicas x %d cores (%d cores in all), %d nodes and %s peak RSS each; change p99 %s, full push p99 %s.",
		a.replicas, a.cores, a.replicas*a.cores, a.nodes, bytesFmt(a.peak), secs(a.changeAtMax), secs(a.pushAtMax))
	changes := q
	changes.PushP99 = math.Inf(1)
	if c, ok := answer(m.project(changes, replicaCounts(q.MinReplicas))); ok {
		p("For a change's p99 alone (full pushes unbounded): %d replicas x %d cores (%d cores in all), change p99 %s, full push p99 %s.",
			c.replicas, c.cores, c.replicas*c.cores, secs(c.changeAtMax), secs(c.pushAtMax))
	}
	p("Assumptions, the most stretched past what was measured first (the first is the one that breaks first):")
	p("")
	for i, as := range m.assumptions(q, a) {
		p("%d. %s: x%.1f.", i+1, as.text, as.stretch)
	}
}

func renderModelMethod(p func(string, ...any), commands string) {
	p("")
	p("Method: `BenchmarkConsulFleet` (one replica, a real Consul, every node connecting at once) at each size records")
	p("the server's CPU (`process_cpu_seconds_total`) and Consul queries (`xds_discovery_consul_queries_total`)")
	p("over the single changes (gaps included) and over each full push, the bytes of every response its nodes")
	p("received (encoded messages, HTTP/2 framing excluded), RSS before and after the nodes synced and VmHWM;")
	p("`bench/report -model` fits them. Services, endpoints and subset size enter as variants: a change's bytes")
	p("and CPU per node follow the changed load assignment (the endpoints a node sees), a full push's follow the")
	p("services; a variant is modelled only when measured at %d sizes or more, and fewer refuse to render.", minModelSizes)
	renderCommands(p, commands)
}

func modelSizes(m costModel) string {
	var out []string
	for i, pt := range m.points {
		if i == 0 || pt.nodes != m.points[i-1].nodes {
			out = append(out, fmt.Sprintf("%.0f", pt.nodes))
		}
	}
	return strings.Join(out, ", ")
}

func pct(x float64) string {
	if math.IsInf(x, 0) || math.IsNaN(x) {
		return "n/a"
	}
	return fmt.Sprintf("%.1f%%", x*100)
}

func coresFmt(c float64) string {
	if math.IsInf(c, 1) {
		return "none suffice"
	}
	return fmt.Sprintf("%.2f", c)
}
