package main

import (
	"math"
	"slices"
)

// convergeBand is "converged": the smoothed spread stays within this
// fraction of the final spread (issue 18: within 5%).
const convergeBand = 0.05

// sample is one utilization report of a backend.
type sample struct {
	At   float64 // seconds since the policy started
	Util float64 // in [0, 1]
}

// grid bins every backend's samples into whole seconds [0, secs): the mean
// of the samples of each second; a second without one repeats the last
// value (0 before the first).
func grid(samples [][]sample, secs int) [][]float64 {
	out := make([][]float64, len(samples))
	for b, ss := range samples {
		sum, n := make([]float64, secs), make([]int, secs)
		for _, s := range ss {
			if k := int(math.Floor(s.At)); k >= 0 && k < secs {
				sum[k] += s.Util
				n[k]++
			}
		}
		out[b] = make([]float64, secs)
		last := 0.0
		for k := range secs {
			if n[k] > 0 {
				last = sum[k] / float64(n[k])
			}
			out[b][k] = last
		}
	}
	return out
}

// means is every backend's mean utilization over seconds [from, to).
func means(util [][]float64, from, to int) []float64 {
	out := make([]float64, len(util))
	for b, u := range util {
		from, to := max(0, from), min(len(u), to)
		if to <= from {
			continue
		}
		sum := 0.0
		for _, x := range u[from:to] {
			sum += x
		}
		out[b] = sum / float64(to-from)
	}
	return out
}

// spread is max/mean and p99/mean (p99 by linear interpolation between
// ranks, so that it is not simply the max of a dozen backends) of us; 0s
// when the mean is 0.
func spread(us []float64) (maxMean, p99Mean float64) {
	if len(us) == 0 {
		return 0, 0
	}
	s := slices.Clone(us)
	slices.Sort(s)
	sum := 0.0
	for _, u := range s {
		sum += u
	}
	mean := sum / float64(len(s))
	if !(mean > 0) {
		return 0, 0
	}
	pos := 0.99 * float64(len(s)-1)
	lo := int(math.Floor(pos))
	hi := min(lo+1, len(s)-1)
	p99 := s[lo] + (pos-float64(lo))*(s[hi]-s[lo])
	return s[len(s)-1] / mean, p99 / mean
}

// figures are one policy's measured spread.
type figures struct {
	MaxMean, P99Mean float64   // of the backends' mean utilization over the final window
	Settled          float64   // the smoothed spread's mean over the final window
	Converge         float64   // seconds until the smoothed spread stays within convergeBand of Settled; -1: never
	Oscillation      float64   // standard deviation of the smoothed spread after convergence, relative to Settled
	Smoothed         []float64 // by second: max/mean of the backends' means over the trailing window
	MeanUtil         float64   // mean utilization over the final window
}

// analyze computes the figures of a run of secs seconds: util by backend
// and second (grid), smoothing window w seconds, final window f seconds
// (the last f seconds of the run).
func analyze(util [][]float64, secs, w, f int) figures {
	final := means(util, secs-f, secs)
	var fig figures
	fig.MaxMean, fig.P99Mean = spread(final)
	for _, u := range final {
		fig.MeanUtil += u / float64(max(1, len(final)))
	}
	fig.Smoothed = smoothed(util, secs, w)
	// The reference of convergence is the smoothed spread's own level over
	// the final window, not MaxMean: the max of a dozen noisy w-second
	// means sits above the max of their f-second means, and comparing the
	// two would call a settled fleet unsettled.
	fig.Settled = mean(fig.Smoothed[max(0, secs-f):])
	fig.Converge = converged(fig.Smoothed, fig.Settled)
	from := int(fig.Converge)
	if fig.Converge < 0 {
		from = secs - f
	}
	fig.Oscillation = relStd(fig.Smoothed[max(from, w-1):], fig.Settled)
	return fig
}

// mean of xs; 0 for none.
func mean(xs []float64) float64 {
	sum := 0.0
	for _, x := range xs {
		sum += x
	}
	return sum / float64(max(1, len(xs)))
}

// smoothed is, for each second s, the max/mean of every backend's mean
// over the trailing window (s-w, s] (shorter at the start).
func smoothed(util [][]float64, secs, w int) []float64 {
	out := make([]float64, secs)
	for s := range secs {
		out[s], _ = spread(means(util, s-w+1, s+1))
	}
	return out
}

// converged is the second from which every smoothed value stays within
// convergeBand of final (it includes the smoothing window's lag, up to w
// seconds); -1 if the last one is not.
func converged(sm []float64, final float64) float64 {
	if len(sm) == 0 || !(final > 0) {
		return -1
	}
	for s := len(sm) - 1; s >= 0; s-- {
		if math.Abs(sm[s]-final) > convergeBand*final {
			if s == len(sm)-1 {
				return -1
			}
			return float64(s + 1)
		}
	}
	return 0
}

// relStd is the standard deviation of xs relative to ref; 0 for fewer
// than two values.
func relStd(xs []float64, ref float64) float64 {
	if len(xs) < 2 || !(ref > 0) {
		return 0
	}
	mean := 0.0
	for _, x := range xs {
		mean += x / float64(len(xs))
	}
	v := 0.0
	for _, x := range xs {
		v += (x - mean) * (x - mean)
	}
	return math.Sqrt(v/float64(len(xs)-1)) / ref
}
