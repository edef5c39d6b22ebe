package main

import (
	"math"
	"testing"
)

func TestGridBinsAndCarries(t *testing.T) {
	got := grid([][]sample{{{At: 0.2, Util: 0.4}, {At: 0.7, Util: 0.6}, {At: 2.5, Util: 0.9}}, {}}, 4)
	want := [][]float64{{0.5, 0.5, 0.9, 0.9}, {0, 0, 0, 0}}
	for b := range want {
		for k := range want[b] {
			if math.Abs(got[b][k]-want[b][k]) > 1e-9 {
				t.Fatalf("grid = %v, want %v", got, want)
			}
		}
	}
}

func TestSpread(t *testing.T) {
	for name, tc := range map[string]struct {
		us            []float64
		maxMean, p99m float64
	}{
		"even":              {us: []float64{0.5, 0.5, 0.5, 0.5}, maxMean: 1, p99m: 1},
		"one at twice":      {us: []float64{0.4, 0.4, 0.4, 0.8}, maxMean: 1.6, p99m: (0.4 + 0.97*0.4) / 0.5},
		"idle fleet is 0/0": {us: []float64{0, 0}},
	} {
		t.Run(name, func(t *testing.T) {
			mm, p99 := spread(tc.us)
			if math.Abs(mm-tc.maxMean) > 1e-9 || math.Abs(p99-tc.p99m) > 1e-9 {
				t.Errorf("spread = %v, %v; want %v, %v", mm, p99, tc.maxMean, tc.p99m)
			}
		})
	}
}

// TestAnalyzeConvergence: two backends start 3:1 and are even from second
// 20 on: the final spread is 1, convergence is when the smoothing window
// holds only even seconds (within 5%), and an even fleet does not
// oscillate.
func TestAnalyzeConvergence(t *testing.T) {
	const secs, w, f = 60, 5, 20
	util := [][]float64{make([]float64, secs), make([]float64, secs)}
	for s := range secs {
		util[0][s], util[1][s] = 0.5, 0.5
		if s < 20 {
			util[0][s], util[1][s] = 0.75, 0.25
		}
	}
	fig := analyze(util, secs, w, f)
	if math.Abs(fig.MaxMean-1) > 1e-9 || math.Abs(fig.MeanUtil-0.5) > 1e-9 {
		t.Errorf("final max/mean %v, mean %v; want 1, 0.5", fig.MaxMean, fig.MeanUtil)
	}
	// One 3:1 second in the window (s-5, s] already makes 1.1: the
	// window is within 5% of 1 once it holds none, from s = 24 on.
	if fig.Converge != 24 {
		t.Errorf("converged at %vs, want 24s (smoothed %v)", fig.Converge, fig.Smoothed[15:30])
	}
	if fig.Oscillation > 1e-12 {
		t.Errorf("oscillation %v, want 0", fig.Oscillation)
	}
}

func TestAnalyzeNeverConverged(t *testing.T) {
	const secs = 30
	util := [][]float64{make([]float64, secs), make([]float64, secs)}
	for s := range secs {
		util[0][s], util[1][s] = 0.5, 0.5
		if s%2 == 0 || s == secs-1 { // flapping, and off at the end
			util[0][s], util[1][s] = 0.9, 0.1
		}
	}
	fig := analyze(util, secs, 1, 10)
	if fig.Converge != -1 {
		t.Errorf("converged at %v, want -1 (never)", fig.Converge)
	}
	if fig.Oscillation < 0.1 {
		t.Errorf("oscillation %v of a flapping fleet, want large", fig.Oscillation)
	}
}

// TestNoiseFloor: a balanced fleet measured over a short window shows a
// spread above 1 that shrinks as the window grows (more requests per
// backend), and more backends raise it (the max of more noisy means).
func TestNoiseFloor(t *testing.T) {
	caps := []float64{100, 120, 150, 200, 110, 130, 170, 190, 105, 140, 160, 180}
	short, long := noiseFloor(caps, 0.5, 5, 501), noiseFloor(caps, 0.5, 100, 501)
	if !(short > long && long > 1 && short < 1.25) {
		t.Errorf("floor over 5s %.3f, over 100s %.3f: want 1 < long < short < 1.25", short, long)
	}
	// sqrt(N) noise: 12 backends at ~70 requests/s for 25s: per-backend
	// sd about 2.4%, the max of 12 about 1.6 sd above the mean.
	if f := noiseFloor(caps, 0.5, 25, 501); math.Abs(f-1.04) > 0.015 {
		t.Errorf("floor over 25s %.3f, want about 1.04", f)
	}
	if few := noiseFloor(caps[:3], 0.5, 25, 501); few >= noiseFloor(caps, 0.5, 25, 501) {
		t.Errorf("3 backends floor %.3f not below 12 backends'", few)
	}
}
