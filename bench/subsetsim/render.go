package main

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/xds-server/xds-server/bench"
)

// results is everything one run measured.
type results struct {
	command string
	trials  int
	seed    uint64
	configs []configResult
	timings []timing
	xds     []xdsBench // optional: -xds-bench
}

// Targets of the design guide, §6.
const (
	balanceTarget = 1.05                   // steady: max/mean connections per backend
	churnTarget   = 2.0                    // steady: connections moved per backend change, in units of 1/n
	timingTarget  = 100 * time.Millisecond // New + Order for 10,000 clients x 1,000 backends
)

// render returns the Markdown section (without its markers).
func render(r results) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	p("## Subsetting")
	p("")
	p("Written by `%s` (run by `scripts/bench.sh` after the report); do not edit by hand, run it again.", strings.TrimSpace(r.command))
	p("Targets: design guide §6. %d trials per configuration, each with fresh random backend ids", r.trials)
	p("(`api-<hex>-<hex>-<hex>`, seed %d), so an added or removed backend lands at a random sort position.", r.seed)
	p("Figures are medians over trials; \"worst\" is the worst trial. Churn is the fraction of the clients'")
	p("connections (client, backend id) that are gone after the change, and in parentheses the same as a")
	p("multiple of 1/n (n = backends before the change). Clients keep their indices (the xds registry makes")
	p("them sticky): a joining client takes the next index, a leaving one frees its own. Steady is simulated")
	p("as xds serves it, over endpoint slots that stick to ids (the xds slot table): the backends take slots")
	p("0..n-1 in arrival order, an added one the next free slot, a removed one leaves its slot reserved.")
	p("")
	for _, c := range r.configs {
		renderConfig(p, c)
	}
	renderTimings(p, r.timings)
	renderXDSBench(p, r.xds)
	renderTargets(p, r)
	p("Why steady needs endpoint slots to meet both the balance and the churn target, and what was")
	p("measured without them, is in `subsetting/doc.go`.")
	return b.String()
}

func renderConfig(p func(string, ...any), c configResult) {
	n := float64(c.cfg.backends)
	p("### %s", c.cfg)
	p("")
	p("2/n = %s of connections.", pct(2/n))
	p("")
	p("| algorithm | min | mean | max | max/mean (worst) | %s |", strings.Join(events, " | "))
	p("|---|---|---|---|---|---|---|---|---|")
	for _, a := range c.algs {
		cells := make([]string, len(events))
		for i, e := range events {
			m := median(a.churn[e])
			cells[i] = fmt.Sprintf("%s (%.2f/n)", pct(m), m*n)
		}
		p("| %s | %.0f | %.1f | %.0f | %.3f (%.3f) | %s |", a.name, median(a.min), median(a.mean), median(a.max),
			median(a.load), slices.Max(a.load), strings.Join(cells, " | "))
	}
	p("")
}

func renderTimings(p func(string, ...any), ts []timing) {
	if len(ts) == 0 {
		return
	}
	p("### Computing %s", timingConfig)
	p("")
	p("`subsetting.New` plus `Order(dst, client, 20)` for every client 0..9,999 with a reused `dst`, on one")
	p("goroutine, with caches cold (a new plan each run); %d runs. `go test ./subsetting -run '^$' -bench .`", len(ts[0].runs))
	p("measures the same (BenchmarkPlan10000x1000).")
	p("")
	p("| algorithm | median | fastest | slowest | per client |")
	p("|---|---|---|---|---|")
	for _, t := range ts {
		p("| %s | %s | %s | %s | %s |", t.name, ms(medianDuration(t.runs)), ms(slices.Min(t.runs)), ms(slices.Max(t.runs)), t.perCall.Round(time.Nanosecond))
	}
	p("")
}

func renderTargets(p func(string, ...any), r results) {
	p("### Targets")
	p("")
	p("| target | measured | met |")
	p("|---|---|---|")
	for _, c := range r.configs {
		cl, st := find(c, "classic"), find(c, "steady")
		if c.cfg == (config{300, 300, 10}) && cl != nil {
			exact := slices.Min(cl.min) == 10 && slices.Max(cl.max) == 10
			p("| classic, %s: every backend exactly 10 | min %.0f, max %.0f over all trials | %s |", c.cfg, slices.Min(cl.min), slices.Max(cl.max), yes(exact))
		}
		if st == nil {
			continue
		}
		if c.cfg == (config{300, 300, 10}) || c.cfg == (config{1000, 200, 20}) {
			m := median(st.load)
			p("| steady, %s: max/mean <= %.2f | %.3f (worst %.3f) | %s |", c.cfg, balanceTarget, m, slices.Max(st.load), yes(m <= balanceTarget))
		}
		n := float64(c.cfg.backends)
		for _, e := range events[:2] {
			m := median(st.churn[e]) * n
			p("| steady, %s: churn %s <= 2/n | %.2f/n median, %.2f/n mean, worst %.2f/n | %s |", c.cfg, e, m,
				mean(st.churn[e])*n, slices.Max(st.churn[e])*n, yes(m <= churnTarget))
		}
		worst := max(slices.Max(st.churn["+1 client"]), slices.Max(st.churn["-1 client"]))
		p("| steady, %s: a client joining or leaving changes no other client's subset | %s of the others' connections moved, worst trial | %s |", c.cfg, pct(worst), yes(worst == 0))
	}
	for _, t := range r.timings {
		if t.name == "random" {
			continue
		}
		m := medianDuration(t.runs)
		p("| %s: %s computed in < %s | %s | %s |", t.name, timingConfig, ms(timingTarget), ms(m), yes(m < timingTarget))
	}
	p("")
}

func find(c configResult, name string) *algStats {
	for i := range c.algs {
		if c.algs[i].name == name {
			return &c.algs[i]
		}
	}
	return nil
}

// median is bench.Median, with 0 (not NaN) for no samples.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	return bench.Median(xs)
}

func mean(xs []float64) float64 {
	sum := 0.0
	for _, x := range xs {
		sum += x
	}
	return sum / float64(max(1, len(xs)))
}

func medianDuration(ds []time.Duration) time.Duration {
	s := slices.Sorted(slices.Values(ds))
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

func pct(f float64) string { return fmt.Sprintf("%.2f%%", f*100) }

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }

func yes(ok bool) string {
	if ok {
		return "yes"
	}
	return "**no**"
}
