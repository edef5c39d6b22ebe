package main

import (
	"math"
	"math/rand/v2"
	"slices"
)

// noiseFloor is the max/mean utilization a perfectly balanced fleet still
// measures over a window of secs seconds: every backend at utilization u
// serves a Poisson number of requests (mean u x capacity x secs), and the
// max of a dozen noisy means sits above their mean. It is the median over
// trials draws from a fixed seed. Below it, no policy can be told apart.
func noiseFloor(caps []float64, u, secs float64, trials int) float64 {
	if len(caps) == 0 || !(u > 0) || !(secs > 0) || trials < 1 {
		return 0
	}
	rng := rand.New(rand.NewPCG(18, 0xf1002))
	got := make([]float64, trials)
	us := make([]float64, len(caps))
	for t := range got {
		for j, c := range caps {
			lambda := u * c * secs
			n := max(0, math.Round(lambda+math.Sqrt(lambda)*rng.NormFloat64())) // Poisson, by its normal approximation (hundreds at least)
			us[j] = n / (c * secs)
		}
		got[t], _ = spread(us)
	}
	return median(got)
}

// median of xs (sorted in place); 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}
