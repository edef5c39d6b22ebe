package main

import (
	"fmt"
	"strings"

	"github.com/xds-server/xds-server/bench"
)

// slowFactor marks a change as slow: its p99 over the median change's.
const slowFactor = 1.3

// changeP99s are the p99 of each change of r (its latencies are the
// changes' samples one after the other, ChangeSampled of each).
func changeP99s(r bench.Run) []float64 {
	out := make([]float64, 0, len(r.ChangeSampled))
	off := 0
	for _, n := range r.ChangeSampled {
		if off+n > len(r.Latencies) {
			break
		}
		out = append(out, bench.Percentile(r.Latencies[off:off+n], 99))
		off += n
	}
	return out
}

// renderSlowChanges writes, per group, the changes much slower than the
// median change and the garbage collections during them and during the
// others (issue 29: what makes one run slow). Runs without GC counts
// (older results) are left out.
func renderSlowChanges(p func(string, ...any), groups []scaleGroup) {
	type row struct {
		name               string
		all, slow          int
		med                float64
		slowP99            []string
		srvSlow, srvRest   []float64
		loadSlow, loadRest []float64
		quiet              float64
		syncRel, laterRel  float64 // memory releases by the RSS reading, and after it
	}
	var rows []row
	for _, g := range groups {
		rw := row{name: g.name()}
		var p99s []float64
		type change struct {
			p99, srv, load float64
		}
		var cs []change
		for _, r := range g.runs {
			ps := changeP99s(r)
			if len(r.ChangeServerGCs) != len(ps) || len(r.ChangeLoadGenGCs) != len(ps) {
				continue
			}
			rw.quiet += r.QuietGCs
			rw.syncRel, rw.laterRel = rw.syncRel+r.SyncReleases, rw.laterRel+max(r.Releases-r.SyncReleases, 0)
			for i, v := range ps {
				cs = append(cs, change{v, r.ChangeServerGCs[i], r.ChangeLoadGenGCs[i]})
				p99s = append(p99s, v)
			}
		}
		if len(cs) == 0 {
			continue
		}
		rw.all, rw.med = len(cs), bench.Median(p99s)
		for _, c := range cs {
			if c.p99 > slowFactor*rw.med {
				rw.slow++
				rw.slowP99 = append(rw.slowP99, secs(c.p99))
				rw.srvSlow, rw.loadSlow = append(rw.srvSlow, c.srv), append(rw.loadSlow, c.load)
			} else {
				rw.srvRest, rw.loadRest = append(rw.srvRest, c.srv), append(rw.loadRest, c.load)
			}
		}
		rows = append(rows, rw)
	}
	if len(rows) == 0 {
		return
	}
	p("Slow changes (issue 29: what makes one run slow): a change is slow when its own p99 is over %.1fx the", slowFactor)
	p("median change's. GCs: garbage collections that ended while a change spread (flip -> every node had it),")
	p("mean per change, in the server (`go_gc_duration_seconds_count`) and in the load generator (its own).")
	p("")
	p("Quiet GCs: the server's collections between pushes over the change phases (`xds_gc_between_pushes_total`,")
	p("`runtime.gc_between_pushes`), which are not during a change. Memory releases: the server's returns of a")
	p("burst's garbage to the system once quiet (`xds_memory_releases_total`, `runtime.release_free_memory`), summed")
	p("over the runs: by the reading of the RSS after the connect storm / after it (during the measured phases).")
	p("")
	p("| variant | changes | median change p99 | slow changes | their p99 | server GCs: slow / others | load generator GCs: slow / others | quiet GCs | memory releases: by the RSS reading / after |")
	p("|---|---|---|---|---|---|---|---|---|")
	for _, rw := range rows {
		their := strings.Join(rw.slowP99, ", ")
		if their == "" {
			their = "-"
		}
		p("| %s | %d | %s | %d | %s | %s / %s | %s / %s | %.0f | %.0f / %.0f |", rw.name, rw.all, secs(rw.med), rw.slow, their,
			meanOr(rw.srvSlow), meanOr(rw.srvRest), meanOr(rw.loadSlow), meanOr(rw.loadRest), rw.quiet, rw.syncRel, rw.laterRel)
	}
	p("")
}

// meanOr is the mean of xs with one decimal, or "-" when there is none.
func meanOr(xs []float64) string {
	if len(xs) == 0 {
		return "-"
	}
	sum := 0.0
	for _, x := range xs {
		sum += x
	}
	return fmt.Sprintf("%.1f", sum/float64(len(xs)))
}
