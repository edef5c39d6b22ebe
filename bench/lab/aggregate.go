package main

import "math"

// summary is one policy over the lab's runs: the figures the lab reports.
type summary struct {
	med   result   // every figure the median over runs; errors and codes the sum; no util, mismatched 0
	runs  []result // in run order
	chart int      // index in runs of the run whose max/mean is the median: its chart is shown
}

// aggregate gathers runs (runs[k] is run k's results, every run the same
// policies in the same order) into one summary per policy. A run that did
// not converge (Converge -1) counts as +inf in the median of converge
// times; a median of +inf is reported as -1 (not converged).
func aggregate(runs [][]result) []summary {
	if len(runs) == 0 {
		return nil
	}
	out := make([]summary, len(runs[0]))
	for i := range out {
		rs := make([]result, len(runs))
		for k := range runs {
			rs[k] = runs[k][i]
		}
		out[i] = summarize(rs)
	}
	return out
}

// summarize is one policy's summary over its runs rs (at least one).
func summarize(rs []result) summary {
	med := func(f func(r result) float64) float64 {
		xs := make([]float64, len(rs)) // median sorts it; +inf sorts last
		for k, r := range rs {
			xs[k] = f(r)
		}
		return median(xs)
	}
	m := result{policy: rs[0].policy, ui: rs[len(rs)-1].ui, run: -1}
	m.fig.MaxMean = med(func(r result) float64 { return r.fig.MaxMean })
	m.fig.P99Mean = med(func(r result) float64 { return r.fig.P99Mean })
	m.fig.Settled = med(func(r result) float64 { return r.fig.Settled })
	m.fig.Oscillation = med(func(r result) float64 { return r.fig.Oscillation })
	m.fig.MeanUtil = med(func(r result) float64 { return r.fig.MeanUtil })
	m.fig.Converge = med(func(r result) float64 {
		if r.fig.Converge < 0 {
			return math.Inf(1)
		}
		return r.fig.Converge
	})
	if math.IsInf(m.fig.Converge, 1) {
		m.fig.Converge = -1
	}
	m.p50 = med(func(r result) float64 { return r.p50 })
	m.p99 = med(func(r result) float64 { return r.p99 })
	m.requests = int64(math.Round(med(func(r result) float64 { return float64(r.requests) })))
	m.simMaxMean = med(func(r result) float64 { return r.simMaxMean })
	m.floor = med(func(r result) float64 { return r.floor })
	m.cpuLoad = med(func(r result) float64 { return r.cpuLoad })
	m.cpuServer = med(func(r result) float64 { return r.cpuServer })
	for _, r := range rs {
		m.errors += r.errors
		if len(r.codes) > 0 && m.codes == nil {
			m.codes = map[string]int64{}
		}
		for code, n := range r.codes {
			m.codes[code] += n
		}
	}
	return summary{med: m, runs: rs, chart: closest(rs, m.fig.MaxMean)}
}

// closest is the index of the first run whose max/mean is nearest to mm
// (the median run when the count is odd).
func closest(rs []result, mm float64) int {
	best := 0
	for k, r := range rs {
		if math.Abs(r.fig.MaxMean-mm) < math.Abs(rs[best].fig.MaxMean-mm) {
			best = k
		}
	}
	return best
}
