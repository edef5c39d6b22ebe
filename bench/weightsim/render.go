package main

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/xds-server/xds-server/weights"
)

// results is everything one run measured.
type results struct {
	command string
	opts    options
	modes   []modeResult // noise-free first
	goBench []goBench    // optional: -go-bench
}

// Targets of the design guide (§6) and issue 4.
const (
	globalTarget      = 1.35                   // global weights: max/mean utilization
	perNodeTarget     = 1.05                   // per-node weights: max/mean utilization
	roundRobinRef     = 1.7                    // round robin, for reference
	roundRobinTol     = 0.15                   // "about": within this of roundRobinRef
	convergeTarget    = 10                     // report intervals
	oscillationTarget = 0.05                   // steady-state peak-to-peak of max/mean
	solveTarget       = 200 * time.Millisecond // 1,000 nodes x 1,000 endpoints, subset 20
	ingestTarget      = 0.10                   // of one core for 10,000 endpoints reporting every second
)

// printer appends one formatted line.
type printer func(format string, args ...any)

// render returns the Markdown section (without its markers).
func render(r results) string {
	var b strings.Builder
	p := printer(func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) })
	o := r.opts
	p("## Weights (simulator)")
	p("")
	p("Written by `%s` (run by `scripts/bench.sh` after the report); do not edit by hand, run it again.", r.command)
	p("Targets: design guide §6 and issue 4. %d backends with capacities uniform in [1, 2] x %d requests/s,", o.backends, capUnit)
	p("%d clients with lognormal rates (sigma %g) summing to %g of the total capacity, subsets of %d from", o.clients, o.sigma, o.util, o.size)
	p("`subsetting.NewSlotted` (backend j in slot j, client indices 0..%d, as xds serves them). Each policy", o.clients-1)
	p("starts from round robin and runs %d report intervals of %s; %d trial(s) (seeds %d..%d), figures are", o.intervals, o.interval, o.trials, o.seed, o.seed+uint64(o.trials)-1)
	p("medians over trials. Utilization is the load the clients' splits put on each backend over its capacity;")
	p("steady state is the mean over the last %d intervals; converged is the first interval from which", window)
	p("max/mean stays within %.0f%% of its steady-state value (\"no\" if only inside that window);", band*100)
	p("oscillation is max/mean's peak-to-peak over the window relative to its mean.")
	p("The issue fixes no sigma for the rates; the default 0.7 is where round robin reproduces the reference")
	p("simulation's max/mean of about 1.7 (sigma 1 gives about 1.9); `-sigma` varies it.")
	p("")
	p("- **round robin**: each client splits its rate evenly over its subset.")
	p("- **least-loaded**: each client alone, from the utilization its subset's members reported last interval,")
	p("  moves %g of the way to the split with shares proportional to share/utilization (shifting load", o.damping)
	p("  from members above its average to those below). It sees more than the SRE book's least-loaded")
	p("  round robin (its own active requests), but nothing of the other clients.")
	p("- **global weights**: the product's loop, `weights.Runner` (one `Step` per interval) over a `weights.Tracker`")
	p("  (`DefaultConfig`: blackout 10 s, smoothing 0.5, overload guard 0.9/0.8 moving at most once per %s on the", weights.DefaultOverloadPeriod)
	p("  period's mean utilization) fed every backend's report (qps, CPU utilization) each interval: one integer weight")
	p("  per backend, published when `weights.Changed` (5%%) says so and at most once per %s (xds-server's", minPushInterval)
	p("  `weights.min_push_interval`); clients split in proportion.")
	p("  This is the formula alone (the backends' ORCA reports, no LRS: `weights.balance` has nothing to work on).")
	p("- **global weights, balanced**: as above, and the tracker is also fed every client's rate to each member")
	p("  (LRS); the runner's `Adjust` is `weights.BalanceService` (`DefaultBalanceConfig`), as xds-server's")
	p("  pipeline does with `weights.balance: true` (the default) when nodes send LRS. Still one")
	p("  weight per backend for every client.")
	p("- **per-node weights**: the tracker is also fed every client's rate to each member (LRS); the runner's")
	p("  `PublishNodes` is `weights.PerNode.Plan` (`DefaultSolveConfig`: damping 0.5 from the weights last sent;")
	p("  a node keeps its weights unless a share moved by more than 5%%), as in xds-server.")
	p("")
	for _, m := range r.modes {
		renderMode(p, m, o)
	}
	renderGoBench(p, r.goBench)
	renderTargets(p, r)
	return b.String()
}

func renderMode(p printer, m modeResult, o options) {
	if m.noise == 0 {
		p("### Noise-free (the targets are judged on this run)")
		p("")
		p("Reports carry the exact expected qps and utilization.")
	} else {
		p("### With noise (for information)")
		p("")
		p("Poisson arrivals and request costs with coefficient of variation %g (normal approximations), so", m.noise)
		p("every report over %s carries sampling noise; the spread is still measured on the expected", o.interval)
		p("utilization of the splits, which no policy can make less noisy than the reports.")
	}
	p("")
	p("| policy | max/mean | max/min | converged after | oscillation | worst trial: max/mean, oscillation | trials not settled |")
	p("|---|---|---|---|---|---|---|")
	for _, pr := range m.policies {
		st, w := pr.medians(), pr.worst()
		p("| %s | %.3f | %s | %s | %s | %.3f, %s | %d of %d |", pr.name, st.maxMean, ratio(st.maxMin), intervals(st.converged),
			pct(st.oscillation), w.maxMean, pct(w.oscillation), pr.unsettled(), len(pr.trials))
	}
	p("")
	p("max/mean over time (median over trials; interval 0 is round robin for every policy):")
	p("")
	p("| interval | %s |", strings.Join(policyNames, " | "))
	p("|---%s|", strings.Repeat("|---", len(policyNames)))
	for _, t := range curvePoints(o.intervals) {
		cells := make([]string, len(m.policies))
		for k, pr := range m.policies {
			cells[k] = fmt.Sprintf("%.3f", pr.curve[t])
		}
		p("| %d | %s |", t, strings.Join(cells, " | "))
	}
	p("")
}

// curvePoints are the intervals shown over time.
func curvePoints(n int) []int {
	var out []int
	for _, t := range []int{0, 1, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30, 40, 50} {
		if t < n-1 {
			out = append(out, t)
		}
	}
	return append(out, n-1)
}

func renderGoBench(p printer, bs []goBench) {
	if len(bs) == 0 {
		return
	}
	p("### Solver and ingestion")
	p("")
	p("`go test ./weights -run '^$' -bench 'Solve|Balance|Ingest' -benchmem -count 5`, medians of the runs.")
	p("BenchmarkSolve: `Solve` for 1,000 nodes x 1,000 endpoints, subsets of 20, lognormal rates, capacities")
	p("1-2x (input building excluded); BenchmarkBalance: `Balance` (global balancing) on the same fleet, one")
	p("update of one service. BenchmarkIngest: 10,000 endpoints (100 services x 100) each observed")
	p("once, then one `Update`: one second's work of the tracker at one report per endpoint per second")
	p("(decoding not included), so ns/op / 1 s is the fraction of one core. BenchmarkIngestORCA adds decoding")
	p("each endpoint's `OrcaLoadReport` from its wire bytes; BenchmarkIngestLRS instead decodes 100")
	p("`LoadStatsRequest`s of 100 endpoints each and resolves their addresses (gRPC framing aside in both).")
	p("BenchmarkWeightPushes (package xds): see push amplification below.")
	p("")
	p("| benchmark | runs | time/op | B/op | allocs/op | other |")
	p("|---|---|---|---|---|---|")
	for _, b := range bs {
		var extra []string
		for _, unit := range slices.Sorted(maps.Keys(b.metrics)) {
			if unit != "ns/op" && unit != "B/op" && unit != "allocs/op" {
				extra = append(extra, fmt.Sprintf("%g %s", b.metrics[unit], unit))
			}
		}
		p("| %s | %d | %s | %.1f KiB | %.0f | %s |", b.name, b.runs, ms(time.Duration(b.metrics["ns/op"])),
			b.metrics["B/op"]/1024, b.metrics["allocs/op"], strings.Join(extra, ", "))
	}
	p("")
}

func renderTargets(p printer, r results) {
	p("### Targets")
	p("")
	p("| target | measured | met |")
	p("|---|---|---|")
	m := r.modes[0] // noise-free
	rr, gl, pn := m.find("round robin").medians(), m.find("global weights"), m.find("per-node weights").medians()
	lo, hi := math.Inf(1), 0.0
	for _, s := range m.find("round robin").trials {
		lo, hi = min(lo, s.maxMean), max(hi, s.maxMean)
	}
	p("| round robin max/mean about %.1f (reference; within %.2f) | %.3f (trials %.3f-%.3f) | %s |", roundRobinRef,
		roundRobinTol, rr.maxMean, lo, hi, yes(math.Abs(rr.maxMean-roundRobinRef) <= roundRobinTol))
	glm, glb := gl.medians(), m.find("global weights, balanced").medians()
	p("| global weights max/mean <= %.2f | formula alone (no LRS) %.3f; balanced with LRS %.3f | %s |", globalTarget,
		glm.maxMean, glb.maxMean, yesPart(glb.maxMean <= globalTarget, glm.maxMean <= globalTarget, "with LRS; formula alone: no"))
	p("| per-node weights max/mean <= %.2f | %.3f | %s |", perNodeTarget, pn.maxMean, yes(pn.maxMean <= perNodeTarget))
	for _, name := range []string{"global weights", "global weights, balanced", "per-node weights"} {
		pr := m.find(name)
		st, w, n := pr.medians(), pr.worst(), len(pr.trials)
		p("| %s converge within %d report intervals | %s median; %d of %d trials never settle | %s |", name, convergeTarget,
			intervals(st.converged), pr.unsettled(), n, yes(st.converged >= 0 && st.converged <= convergeTarget))
		p("| %s steady-state oscillation < %.0f%% | %s median, %s worst trial | %s |", name, oscillationTarget*100,
			pct(st.oscillation), pct(w.oscillation), yes(st.oscillation < oscillationTarget))
	}
	if b, ok := findBench(r.goBench, "Solve"); ok {
		d := time.Duration(b.metrics["ns/op"])
		p("| solver, 1,000 nodes x 1,000 endpoints, subset 20, < %s | %s | %s |", ms(solveTarget), ms(d), yes(d < solveTarget))
	}
	for _, in := range []struct{ name, what string }{
		{"Ingest", "tracker only"}, {"IngestORCA", "ORCA reports decoded"}, {"IngestLRS", "LRS requests decoded"},
	} {
		if b, ok := findBench(r.goBench, in.name); ok {
			f := b.metrics["ns/op"] / 1e9
			p("| ingestion, 10,000 endpoints reporting every second (%s), < %.0f%% of one core | %s | %s |",
				in.what, ingestTarget*100, pct(f), yes(f < ingestTarget))
		}
	}
	for _, mode := range []string{"global", "per_node"} {
		if b, ok := findBench(r.goBench, "WeightPushes/"+mode); ok {
			gap := b.metrics["min-gap-s"]
			p("| push amplification (%s): 1,000 nodes, reports every second, at most one push per node per 5 s | shortest gap %gs, %.1f pushes/node/min | %s |",
				mode, gap, b.metrics["pushes/node/min"], yes(gap >= 5))
		}
	}
	p("")
	renderGlobalNotes(p, gl, glb)
}

// renderGlobalNotes explains the global weights' misses, if any.
func renderGlobalNotes(p printer, gl policyResult, balanced stats) {
	st, w := gl.medians(), gl.worst()
	if st.maxMean > globalTarget {
		p("The formula alone misses %.2f: it sets each backend's weight to its capacity, which cannot undo the", globalTarget)
		p("imbalance that subsets of clients with unequal rates put on the backends (on these fleets exact")
		p("capacity weights give %.3f, as the reference's \"about 1.35\"). With the clients' rates from LRS,", st.maxMean)
		p("`weights.BalanceService` predicts every backend's load from the subsets and picks the one weight set")
		p("that evens it out: %.3f, still one weight per backend for every node.", balanced.maxMean)
		p("")
	}
	if w.oscillation >= oscillationTarget || gl.unsettled() > 0 {
		p("Noise-free, the capacity estimates are exact and constant, so what moves global weights in steady")
		p("state is the overload guard: it cuts a backend whose mean utilization over %s is above %.1f and gives",
			weights.DefaultOverloadPeriod, weights.DefaultOverloadThreshold)
		p("the weight back below %.1f, in proportion to the distance from the band between them (%d of %d trials",
			weights.DefaultOverloadRecover, gl.unsettled(), len(gl.trials))
		p("did not settle, up to %s peak to peak).", pct(w.oscillation))
		p("")
	}
}

func intervals(n int) string {
	if n < 0 {
		return "no"
	}
	return fmt.Sprintf("%d intervals", n)
}

func ratio(x float64) string {
	if math.IsInf(x, 1) {
		return "inf"
	}
	return fmt.Sprintf("%.3f", x)
}

func pct(f float64) string { return fmt.Sprintf("%.1f%%", f*100) }

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }

// yesPart is yes, or "yes, <qualifier>" when only the first condition holds.
func yesPart(ok, fully bool, qualifier string) string {
	if ok && !fully {
		return "yes, " + qualifier
	}
	return yes(ok)
}

func yes(ok bool) string {
	if ok {
		return "yes"
	}
	return "**no**"
}
