package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/xds-server/xds-server/subsetting"
)

// capUnit is the capacity of the slowest backend, requests/s at
// utilization 1: capacities are uniform in [1, 2] x capUnit.
const capUnit = 100

// fleet is one trial's service: backends with capacities, clients with
// rates and the subsets xds serves them.
type fleet struct {
	ids     []string  // backend ids, by backend index (= slot)
	caps    []float64 // requests/s at utilization 1, by backend
	rates   []float64 // requests/s, by client
	subsets [][]int   // backend indices, by client
}

// newFleet draws capacities uniform in [1, 2] x capUnit and lognormal
// client rates scaled so that the total rate is o.util of the total
// capacity. Backend j takes slot j, client i index i: the subsets are
// those of subsetting.NewSlotted, as xds serves them.
func newFleet(o options, rng *rand.Rand) (fleet, error) {
	f := fleet{ids: make([]string, o.backends), caps: make([]float64, o.backends),
		rates: make([]float64, o.clients), subsets: make([][]int, o.clients)}
	slots := make(map[string]int, o.backends)
	index := make(map[string]int, o.backends)
	totalCap := 0.0
	for j := range f.ids {
		f.ids[j] = fmt.Sprintf("10.0.%d.%d:8080", j/250, j%250+1)
		f.caps[j] = capUnit * (1 + rng.Float64())
		slots[f.ids[j]], index[f.ids[j]] = j, j
		totalCap += f.caps[j]
	}
	totalRate := 0.0
	for i := range f.rates {
		f.rates[i] = math.Exp(o.sigma * rng.NormFloat64())
		totalRate += f.rates[i]
	}
	for i := range f.rates {
		f.rates[i] *= o.util * totalCap / totalRate
	}
	plan, err := subsetting.NewSlotted(slots, o.size)
	if err != nil {
		return fleet{}, fmt.Errorf("weightsim: subsets: %w", err)
	}
	names := plan.Backends()
	for i := range f.subsets {
		for _, b := range plan.Order(nil, i, plan.Size()) {
			f.subsets[i] = append(f.subsets[i], index[names[b]])
		}
	}
	return f, nil
}

// observation is what the reports of one interval say: each backend's
// qps and CPU utilization (ORCA) and each client's qps to each member of
// its subset (LRS).
type observation struct {
	at     time.Time
	qps    []float64   // by backend
	util   []float64   // by backend
	client [][]float64 // by client, aligned with its subset
}

// interval plays one report interval: clients send by splits (by client,
// aligned with the subset, summing to 1). It returns the expected
// utilization of every backend (the split's effect, which the spread is
// measured on) and the reports. With noise == 0 the reports are the
// expected values; otherwise arrivals are Poisson and each request's cost
// has coefficient of variation noise (both by their normal approximation:
// counts are in the tens at least), so reports carry sampling noise.
func (f fleet) interval(splits [][]float64, secs, noise float64, rng *rand.Rand) ([]float64, observation) {
	n := len(f.caps)
	load := make([]float64, n)
	obs := observation{qps: make([]float64, n), util: make([]float64, n), client: make([][]float64, len(f.rates))}
	for i, sub := range f.subsets {
		obs.client[i] = make([]float64, len(sub))
		for t, j := range sub {
			rate := f.rates[i] * splits[i][t]
			load[j] += rate
			if noise > 0 {
				rate = poissonish(rate*secs, rng) / secs
			}
			obs.client[i][t] = rate
			obs.qps[j] += rate
		}
	}
	util := make([]float64, n)
	for j := range util {
		util[j] = load[j] / f.caps[j]
		work := obs.qps[j] * secs // requests served, each costing 1/caps[j] s on average
		if noise > 0 {
			work = max(0, work+math.Sqrt(work)*noise*rng.NormFloat64())
		}
		obs.util[j] = min(work/secs/f.caps[j], 100)
	}
	return util, obs
}

// poissonish draws a count of mean lambda: Poisson by its normal
// approximation, rounded and at least 0.
func poissonish(lambda float64, rng *rand.Rand) float64 {
	if lambda <= 0 {
		return 0
	}
	return max(0, math.Round(lambda+math.Sqrt(lambda)*rng.NormFloat64()))
}

// spread is max/mean and max/min of utilizations (max/min is +Inf when
// some backend is idle).
func spread(util []float64) (maxMean, maxMin float64) {
	hi, lo, sum := 0.0, math.Inf(1), 0.0
	for _, u := range util {
		hi, lo, sum = max(hi, u), min(lo, u), sum+u
	}
	mean := sum / float64(len(util))
	if !(mean > 0) {
		return 0, 0
	}
	if lo <= 0 {
		return hi / mean, math.Inf(1)
	}
	return hi / mean, hi / lo
}

// even returns the round-robin splits of the fleet.
func (f fleet) even() [][]float64 {
	out := make([][]float64, len(f.subsets))
	for i, sub := range f.subsets {
		out[i] = make([]float64, len(sub))
		for t := range sub {
			out[i][t] = 1 / float64(len(sub))
		}
	}
	return out
}

// normalize scales w (>= 0) in place to sum 1; all zeros become even.
func normalize(w []float64) {
	sum := 0.0
	for _, x := range w {
		sum += x
	}
	for t := range w {
		if sum > 0 {
			w[t] /= sum
		} else {
			w[t] = 1 / float64(len(w))
		}
	}
}
