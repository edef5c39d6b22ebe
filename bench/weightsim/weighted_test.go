package main

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestWeightedPushInterval: with reports every second, the weighted
// policies change the clients' splits at most once per 5s (xds-server's
// weights.min_push_interval, applied by weights.Runner), as the product
// does, and do change them (noise moves the weights by more than 5%).
func TestWeightedPushInterval(t *testing.T) {
	o := tiny()
	o.interval = time.Second
	f, err := newFleet(o, rand.New(rand.NewPCG(1, 0x5eed)))
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []weightMode{modeFormula, modeBalanced, modePerNode} {
		p, err := newWeighted(f, o, mode)
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(2, 0x7015e))
		var changes []int
		prev := clone(p.splits())
		for i := range 60 {
			_, obs := f.interval(p.splits(), 1, 1, rng)
			obs.at = start.Add(time.Duration(i+1) * time.Second)
			if err := p.observe(obs); err != nil {
				t.Fatal(err)
			}
			if cur := p.splits(); !equalSplits(prev, cur) {
				changes = append(changes, i)
				prev = clone(cur)
			}
		}
		if len(changes) < 2 {
			t.Fatalf("mode %d: splits changed at %v, want several changes", mode, changes)
		}
		for k := 1; k < len(changes); k++ {
			if changes[k]-changes[k-1] < int(minPushInterval/time.Second) {
				t.Errorf("mode %d: splits changed at %v: two within %v", mode, changes, minPushInterval)
			}
		}
	}
}

func clone(s [][]float64) [][]float64 {
	out := make([][]float64, len(s))
	for i := range s {
		out[i] = slices.Clone(s[i])
	}
	return out
}

func equalSplits(a, b [][]float64) bool {
	return slices.EqualFunc(a, b, func(x, y []float64) bool { return slices.Equal(x, y) })
}
