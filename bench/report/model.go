package main

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/xds-server/xds-server/bench"
)

// modelSection is the name of the cost model's section of BENCHMARKS.md
// (issue 29), written by this command with -model.
const modelSection = "model"

// minModelSizes is the fewest distinct fleet sizes a fit is made on.
const minModelSizes = 4

// modelPoint is what the cost model reads of one BenchmarkConsulFleet run
// (one line of its -results file). Every figure is measured.
type modelPoint struct {
	nodes                  float64 // connected nodes
	changeCPU, pushCPU     float64 // server CPU-seconds per single change (gaps included) and per full push (median)
	changeBytes, pushBytes float64 // bytes the nodes received per single change and per full push (median)
	changeReads, pushReads float64 // the server's Consul blocking queries per change and per full push (median)
	writes                 float64 // the server's Consul writes over the run
	rssCatalog             float64 // RSS with the catalog loaded, no node connected, bytes
	rssNodes               float64 // RSS after every node synced minus rssCatalog, bytes
	rssPeak                float64 // VmHWM over the run, bytes
	changeP99, pushP99     float64 // seconds: p99 of a change's arrival over every node, median over full pushes of their p99
	loadGenCores           float64 // the load generator's CPU over the run / its wall time
}

// modelPoints reads the runs of one variant into points; a run that lacks
// an input (a results file from before the cost model's fields) is an
// error, so the model's inputs are always measured.
func modelPoints(runs []bench.Run) ([]modelPoint, error) {
	out := make([]modelPoint, 0, len(runs))
	var errs []error
	for i, r := range runs {
		pushCPU, pushBytes, pushReads, pushP99 := pushMedians(r.Pushes)
		p := modelPoint{nodes: float64(r.Nodes), pushCPU: pushCPU, pushBytes: pushBytes, pushReads: pushReads, pushP99: pushP99,
			writes: r.ConsulWrites, rssCatalog: r.RSSBefore, rssNodes: r.RSSAfter - r.RSSBefore, rssPeak: r.RSSPeak,
			changeP99: bench.Percentile(r.Latencies, 99)}
		if r.Changes > 0 {
			c := float64(r.Changes)
			p.changeCPU, p.changeBytes, p.changeReads = r.ChangeCPUSeconds/c, r.ChangeBytes/c, r.ChangeConsulReads/c
		}
		if r.RunSeconds > 0 {
			p.loadGenCores = r.LoadGenCPU / r.RunSeconds
		}
		if r.Nodes <= 0 || r.Changes == 0 || len(r.Pushes) == 0 || p.changeCPU <= 0 || p.changeBytes <= 0 ||
			p.pushCPU <= 0 || p.pushBytes <= 0 || r.RSSBefore <= 0 || r.RSSAfter <= 0 || math.IsNaN(p.changeP99) {
			errs = append(errs, fmt.Errorf("run %d (%s, %d nodes) lacks a measured input (changes, full pushes, CPU, bytes, RSS or latencies): "+
				"not a results file of this BenchmarkConsulFleet", i+1, r.Mode, r.Nodes))
			continue
		}
		out = append(out, p)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("report: model: %w", errors.Join(errs...))
	}
	return out, nil
}

// pushMedians are the medians over a run's full pushes of their CPU,
// bytes, Consul reads and p99 arrival.
func pushMedians(pushes []bench.Push) (cpu, bytes, reads, p99 float64) {
	var c, b, r, l []float64
	for _, p := range pushes {
		c, b, r, l = append(c, p.CPUSeconds), append(b, p.Bytes), append(r, p.ConsulReads), append(l, p.P99Seconds)
	}
	return bench.Median(c), bench.Median(b), bench.Median(r), bench.Median(l)
}

// fit is a least-squares line y = a + b x and its error over the points it
// was fitted on.
type fit struct {
	a, b float64
	// maxRel is the largest |y - fitted| / |y| over the points; r2 the
	// coefficient of determination (1 when every y is equal and fitted).
	maxRel, r2 float64
	n          int // points
}

func (f fit) at(x float64) float64 { return f.a + f.b*x }

// fitLine fits y = a + b x by ordinary least squares; xs and ys have the
// same length, at least two distinct xs.
func fitLine(xs, ys []float64) fit {
	n := float64(len(xs))
	var sx, sy float64
	for i := range xs {
		sx, sy = sx+xs[i], sy+ys[i]
	}
	mx, my := sx/n, sy/n
	var sxx, sxy, syy float64
	for i := range xs {
		dx, dy := xs[i]-mx, ys[i]-my
		sxx, sxy, syy = sxx+dx*dx, sxy+dx*dy, syy+dy*dy
	}
	f := fit{b: sxy / sxx, n: len(xs), r2: 1}
	f.a = my - f.b*mx
	var ssr float64
	for i := range xs {
		res := ys[i] - f.at(xs[i])
		ssr += res * res
		if ys[i] != 0 {
			f.maxRel = max(f.maxRel, math.Abs(res/ys[i]))
		} else if res != 0 {
			f.maxRel = math.Inf(1)
		}
	}
	if syy > 0 {
		f.r2 = 1 - ssr/syy
	}
	return f
}

// costModel is the fits of one variant, each over the node count.
type costModel struct {
	points     []modelPoint // sorted by nodes
	sizes      int          // distinct node counts
	machine    float64      // cores of the machine the runs were measured on
	changeCPU  fit          // CPU-seconds per change: a fixed + b per node
	pushCPU    fit          // CPU-seconds per full push
	changeB    fit          // bytes per change
	pushB      fit          // bytes per full push
	rssNodes   fit          // RSS after sync over the catalog's: a per group (one group of equal nodes), b per node
	rssPeak    fit          // VmHWM
	changeP99  fit          // seconds: the p99 of a change's arrival; a is the fixed part, b the fan-out per node
	pushP99    fit          // seconds: a full push's p99 arrival
	changeRead fit          // Consul blocking queries per change
	pushRead   fit          // Consul blocking queries per full push
	rssCatalog float64      // median RSS with the catalog and no node
	writes     float64      // most Consul writes of a run
	loadGen    float64      // median cores the load generator used
}

// fitModel fits the cost model on points measured on a machine of the
// given cores; it refuses fewer than minModelSizes distinct node counts.
func fitModel(points []modelPoint, machine float64) (costModel, error) {
	ps := slices.Clone(points)
	slices.SortStableFunc(ps, func(a, b modelPoint) int { return cmp.Compare(a.nodes, b.nodes) })
	sizes := 0
	for i, p := range ps {
		if i == 0 || p.nodes != ps[i-1].nodes {
			sizes++
		}
	}
	if sizes < minModelSizes {
		return costModel{}, fmt.Errorf("report: model: %d distinct fleet sizes measured, want at least %d", sizes, minModelSizes)
	}
	if machine <= 0 {
		return costModel{}, fmt.Errorf("report: model: machine cores %v, want > 0", machine)
	}
	col := func(get func(modelPoint) float64) fit {
		xs, ys := make([]float64, len(ps)), make([]float64, len(ps))
		for i, p := range ps {
			xs[i], ys[i] = p.nodes, get(p)
		}
		return fitLine(xs, ys)
	}
	m := costModel{points: ps, sizes: sizes, machine: machine,
		changeCPU: col(func(p modelPoint) float64 { return p.changeCPU }), pushCPU: col(func(p modelPoint) float64 { return p.pushCPU }),
		changeB: col(func(p modelPoint) float64 { return p.changeBytes }), pushB: col(func(p modelPoint) float64 { return p.pushBytes }),
		rssNodes: col(func(p modelPoint) float64 { return p.rssNodes }), rssPeak: col(func(p modelPoint) float64 { return p.rssPeak }),
		changeP99: col(func(p modelPoint) float64 { return p.changeP99 }), pushP99: col(func(p modelPoint) float64 { return p.pushP99 }),
		changeRead: col(func(p modelPoint) float64 { return p.changeReads }), pushRead: col(func(p modelPoint) float64 { return p.pushReads }),
	}
	var cat, load []float64
	for _, p := range ps {
		cat, load = append(cat, p.rssCatalog), append(load, p.loadGenCores)
		m.writes = max(m.writes, p.writes)
	}
	m.rssCatalog, m.loadGen = bench.Median(cat), bench.Median(load)
	return m, nil
}

// efficiency is the share of the machine's cores a fan-out effectively
// had: the CPU per node of the work (cpu.b, CPU-seconds) over the time per
// node it added to the p99 (lat.b, seconds), per machine core. Above 1
// the fan-out is not CPU-bound the way the model assumes.
func (m costModel) efficiency(cpu, lat fit) float64 {
	if lat.b <= 0 {
		return math.Inf(1)
	}
	return cpu.b / lat.b / m.machine
}
