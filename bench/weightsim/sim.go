package main

import (
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/xds-server/xds-server/bench"
)

const (
	// window is the steady state: the last intervals of a run.
	window = 20
	// band is the convergence band: within 2% of the steady-state value.
	band = 0.02
)

// start is the simulated clock's origin.
var start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// series is one policy's run: max/mean and max/min utilization per
// interval (of the expected utilization the splits produce).
type series struct {
	maxMean, maxMin []float64
}

// runPolicy plays o.intervals intervals of policy name on fleet f. The
// noise of the reports comes from rng.
func runPolicy(name string, f fleet, o options, noise float64, rng *rand.Rand) (series, error) {
	p, err := newPolicy(name, f, o)
	if err != nil {
		return series{}, err
	}
	var s series
	secs := o.interval.Seconds()
	for t := range o.intervals {
		util, obs := f.interval(p.splits(), secs, noise, rng)
		mm, mn := spread(util)
		s.maxMean, s.maxMin = append(s.maxMean, mm), append(s.maxMin, mn)
		obs.at = start.Add(time.Duration(t+1) * o.interval)
		if err := p.observe(obs); err != nil {
			return series{}, err
		}
	}
	return s, nil
}

// stats summarize one series.
type stats struct {
	maxMean     float64 // mean over the steady-state window
	maxMin      float64 // mean over the steady-state window
	converged   int     // first interval from which max/mean stays within band of maxMean; -1 if only inside the window
	oscillation float64 // peak-to-peak of max/mean over the window, relative to maxMean
}

// summarize computes the steady-state figures of s.
func summarize(s series) stats {
	n := len(s.maxMean)
	w := s.maxMean[n-window:]
	st := stats{maxMean: avg(w), maxMin: avg(s.maxMin[n-window:])}
	st.oscillation = (slices.Max(w) - slices.Min(w)) / st.maxMean
	st.converged = 0
	for t := n - 1; t >= 0; t-- {
		if math.Abs(s.maxMean[t]-st.maxMean) > band*st.maxMean {
			st.converged = t + 1
			break
		}
	}
	if st.converged > n-window {
		st.converged = -1
	}
	return st
}

// modeResult is every policy's figures at one noise level, over trials.
type modeResult struct {
	noise    float64
	policies []policyResult // in policyNames order
}

// policyResult is one policy's figures over trials.
type policyResult struct {
	name   string
	trials []stats
	curve  []float64 // median max/mean over trials, per interval
}

// simulateMode runs every policy on o.trials fleets (seeds o.seed,
// o.seed+1, ...) at one noise level.
func simulateMode(o options, noise float64) (modeResult, error) {
	m := modeResult{noise: noise, policies: make([]policyResult, len(policyNames))}
	curves := make([][][]float64, len(policyNames)) // policy, trial, interval
	for trial := range o.trials {
		seed := o.seed + uint64(trial)
		f, err := newFleet(o, newRand(seed, fleetStream))
		if err != nil {
			return modeResult{}, err
		}
		for k, name := range policyNames {
			// Every policy sees the same noise sequence.
			s, err := runPolicy(name, f, o, noise, newRand(seed, noiseStream))
			if err != nil {
				return modeResult{}, err
			}
			m.policies[k].name = name
			m.policies[k].trials = append(m.policies[k].trials, summarize(s))
			curves[k] = append(curves[k], s.maxMean)
		}
	}
	for k := range m.policies {
		c := make([]float64, o.intervals)
		for t := range c {
			at := make([]float64, 0, len(curves[k]))
			for _, tr := range curves[k] {
				at = append(at, tr[t])
			}
			c[t] = median(at)
		}
		m.policies[k].curve = c
	}
	return m, nil
}

// medians of a policy's figures over trials; converged is the median
// with "not converged" (-1) ranked last, so -1 when most trials did not.
func (p policyResult) medians() stats {
	var mm, mn, osc, conv []float64
	for _, s := range p.trials {
		mm, mn, osc = append(mm, s.maxMean), append(mn, s.maxMin), append(osc, s.oscillation)
		c := float64(s.converged)
		if c < 0 {
			c = math.Inf(1)
		}
		conv = append(conv, c)
	}
	st := stats{maxMean: median(mm), maxMin: median(mn), oscillation: median(osc), converged: -1}
	if c := median(conv); !math.IsInf(c, 1) {
		st.converged = int(math.Ceil(c))
	}
	return st
}

// worst is the worst trial's figures: the largest max/mean, max/min and
// oscillation, and the latest convergence (-1 if some trial never
// settled).
func (p policyResult) worst() stats {
	var w stats
	for _, s := range p.trials {
		w.maxMean, w.maxMin, w.oscillation = max(w.maxMean, s.maxMean), max(w.maxMin, s.maxMin), max(w.oscillation, s.oscillation)
		if w.converged >= 0 {
			w.converged = max(w.converged, s.converged)
			if s.converged < 0 {
				w.converged = -1
			}
		}
	}
	return w
}

// unsettled counts the trials that did not converge before the window.
func (p policyResult) unsettled() int {
	n := 0
	for _, s := range p.trials {
		if s.converged < 0 {
			n++
		}
	}
	return n
}

// find returns the result of the named policy.
func (m modeResult) find(name string) policyResult {
	for _, p := range m.policies {
		if p.name == name {
			return p
		}
	}
	return policyResult{name: name}
}

func avg(xs []float64) float64 {
	sum := 0.0
	for _, x := range xs {
		sum += x
	}
	return sum / float64(max(1, len(xs)))
}

// median is bench.Median, with 0 (not NaN) for no samples.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	return bench.Median(xs)
}
