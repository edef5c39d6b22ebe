package weights

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// fleet is a random service for the solver's tests and benchmark:
// backends of capacity 1-2 (requests/s at utilization 1, times a unit),
// clients with lognormal rates and random subsets.
type fleet struct {
	ids     []string
	caps    []float64 // by backend
	rates   []float64 // by client, requests/s
	subsets [][]int   // by client: backend indices
}

func randomFleet(rng *rand.Rand, backends, clients, k int, sigma float64) fleet {
	f := fleet{ids: make([]string, backends), caps: make([]float64, backends)}
	for j := range backends {
		f.ids[j] = fmt.Sprintf("10.0.%d.%d:8080", j/250, j%250)
		f.caps[j] = 1 + rng.Float64()
	}
	for range clients {
		f.rates = append(f.rates, math.Exp(sigma*rng.NormFloat64()))
		f.subsets = append(f.subsets, rng.Perm(backends)[:k])
	}
	return f
}

// problem is the fleet as the solver sees it: every rate known (all of a
// client's rate reported against its first backend: only the sum counts)
// and the capacities as global weights.
func (f fleet) problem() Problem {
	p := Problem{}
	for j, id := range f.ids {
		p.Endpoints = append(p.Endpoints, EndpointLoad{ID: id, Capacity: f.caps[j], Global: f.caps[j]})
	}
	for i, sub := range f.subsets {
		n := NodeLoad{Node: fmt.Sprintf("node-%d", i), Rates: map[string]float64{f.ids[sub[0]]: f.rates[i]}}
		for _, j := range sub {
			n.Subset = append(n.Subset, f.ids[j])
		}
		p.Nodes = append(p.Nodes, n)
	}
	return p
}

// spread is max/mean utilization when client i splits its rate over its
// subset in proportion to split(i) (aligned with the subset).
func (f fleet) spread(split func(i int) []float64) float64 {
	load := make([]float64, len(f.caps))
	for i, sub := range f.subsets {
		w := split(i)
		sum := 0.0
		for _, x := range w {
			sum += x
		}
		for t, j := range sub {
			load[j] += f.rates[i] * w[t] / sum
		}
	}
	return maxMean(load, f.caps)
}

func maxMean(load, caps []float64) float64 {
	hi, sum := 0.0, 0.0
	for j := range load {
		u := load[j] / caps[j]
		hi, sum = max(hi, u), sum+u
	}
	return hi / (sum / float64(len(load)))
}

func roundRobin(f fleet) func(int) []float64 {
	return func(i int) []float64 {
		w := make([]float64, len(f.subsets[i]))
		for t := range w {
			w[t] = 1
		}
		return w
	}
}

// global weights every client by the backends' capacities, scaled to
// integers as the tracker would.
func global(f fleet) func(int) []float64 {
	ints, _ := Scale(f.caps, DefaultMaxRatio)
	return func(i int) []float64 {
		var w []float64
		for _, j := range f.subsets[i] {
			w = append(w, float64(ints[j]))
		}
		return w
	}
}

func perNode(sol Solution) func(int) []float64 {
	return func(i int) []float64 {
		var w []float64
		for _, x := range sol.Nodes[i].Weights {
			w = append(w, float64(x))
		}
		return w
	}
}
