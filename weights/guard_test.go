package weights

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// guardRun feeds endpoint b of a two-endpoint service one backend report a
// second for len(utils) seconds (b's utilization utils[i], its qps 100
// times that, so its formula weight stays 100 and only the guard moves)
// and returns b's guard after each Update.
func guardRun(t *testing.T, edit func(*Config), utils []float64) []float64 {
	t.Helper()
	tr := newTestTracker(t, func(c *Config) {
		c.BlackoutPeriod = 0
		if edit != nil {
			edit(c)
		}
	}, "a", "b")
	guards := make([]float64, len(utils))
	for i, u := range utils {
		now := at(time.Duration(i) * time.Second)
		observe(t, tr, now, load("a", now, 50, 0, 0.5), load("b", now, 100*u, 0, u))
		guards[i] = rowOf(t, tr.Update(now), "b").Guard
	}
	return guards
}

// noisy returns n readings of mean mu and standard deviation sigma
// (Gaussian, clipped to [0.01, 1] as a CPU utilization is), from a fixed seed.
func noisy(n int, mu, sigma float64, seed uint64) []float64 {
	rng := rand.New(rand.NewPCG(seed, 0x9a4d))
	out := make([]float64, n)
	for i := range out {
		out[i] = min(1, max(0.01, mu+sigma*rng.NormFloat64()))
	}
	return out
}

// TestTrackerGuardIgnoresNoise: a backend running at 0.75 whose one-second
// readings carry Gaussian noise (sigma 0.07, what Poisson arrivals give a
// backend of 150 requests/s at that load) crosses the threshold 0.9 on one
// reading in about sixty; over ten minutes the guard, on the mean of each
// period, never sheds. The same readings do trip a guard that moves on
// every reading (a period of one second): the noise is real.
func TestTrackerGuardIgnoresNoise(t *testing.T) {
	for seed := uint64(1); seed <= 5; seed++ {
		utils := noisy(600, 0.75, 0.07, seed)
		above := 0
		for _, u := range utils {
			if u > DefaultOverloadThreshold {
				above++
			}
		}
		if above < 3 {
			t.Fatalf("seed %d: only %d readings above the threshold; the test needs noise that crosses it", seed, above)
		}
		for i, g := range guardRun(t, nil, utils) {
			if g != 1 {
				t.Fatalf("seed %d: guard %v at %ds (%d readings above %v): noise shed weight",
					seed, g, i, above, DefaultOverloadThreshold)
			}
		}
		perReading := guardRun(t, func(c *Config) { c.OverloadPeriod = time.Second }, utils)
		if minOf(perReading) == 1 {
			t.Errorf("seed %d: a guard moving on every reading never shed on %d readings above the threshold", seed, above)
		}
	}
}

// TestTrackerGuardNoiseCostsLittle: with noise so large (sigma 0.12) that a
// period's mean sometimes crosses the threshold, a move is in proportion to
// the excess: the guard never falls below 0.9, and it is back at 1 most
// of the time.
func TestTrackerGuardNoiseCostsLittle(t *testing.T) {
	guards := guardRun(t, nil, noisy(1200, 0.75, 0.12, 7))
	if minOf(guards) == 1 {
		t.Fatal("the guard never moved: the test needs noise whose period means cross the threshold")
	}
	for _, g := range guards {
		if g < 0.9 {
			t.Fatalf("guard %v: noise cost more than 10%% of the weight", g)
		}
	}
	if ones := countEq(guards, 1); ones < len(guards)*9/10 {
		t.Errorf("guard at 1 in %d of %d updates, want at least 90%%", ones, len(guards))
	}
}

// TestTrackerGuardStepOverload: a backend at 0.5 saturates (utilization 1)
// at 60s. The guard sheds within two periods of the step, by the full
// factor every period while it stays saturated, and holds above a
// non-saturated overload too; once the load is gone it regains its weight
// within a bounded number of periods.
func TestTrackerGuardStepOverload(t *testing.T) {
	const step, period = 60, int(DefaultOverloadPeriod / time.Second)
	utils := make([]float64, 0, 200)
	for i := range 200 {
		switch {
		case i < step:
			utils = append(utils, 0.5)
		case i < step+30:
			utils = append(utils, 1)
		default:
			utils = append(utils, 0.5)
		}
	}
	guards := guardRun(t, nil, utils)
	if g := guards[step-1]; g != 1 {
		t.Fatalf("guard %v before the overload", g)
	}
	first := -1
	for i := step; i < len(guards); i++ {
		if guards[i] < 1 {
			first = i
			break
		}
	}
	if first < 0 || first-step > 2*period {
		t.Fatalf("first cut at %ds, want within %ds of the overload at %ds", first, 2*period, step)
	}
	// saturated for 30s: at least 30/period - 2 full cuts
	if want := math.Pow(DefaultOverloadFactor, float64(30/period-2)); guards[step+29] > want+1e-12 {
		t.Errorf("guard %v after 30s saturated, want at most %v", guards[step+29], want)
	}
	// recovered: 0.5 is far below the recover mark, so each period regains
	// 1/factor; 1/MaxRatio needs at most 17 such moves, plus one period.
	back := -1
	for i := step + 30; i < len(guards); i++ {
		if guards[i] == 1 {
			back = i
			break
		}
	}
	if back < 0 || back-(step+30) > 18*period {
		t.Errorf("guard back at 1 at %ds, want within %ds of the load's end at %ds", back, 18*period, step+30)
	}

	// Overloaded but not saturated (0.95): cut in proportion, within two periods.
	over := append(make([]float64, 0, 80), utils[:step]...)
	for range 20 {
		over = append(over, 0.95)
	}
	guards = guardRun(t, nil, over)
	first = -1
	for i := step; i < len(guards); i++ {
		if guards[i] < 1 {
			first = i
			break
		}
	}
	if first < 0 || first-step > 2*period || math.Abs(guards[first]-0.85/0.95) > 1e-9 {
		t.Errorf("at 0.95 from %ds: first cut at %ds to %v, want within %ds to 0.85/0.95 (back to the middle of the marks)",
			step, first, guards, 2*period)
	}
	if g := guards[len(guards)-1]; !(g < 0.85/0.95) {
		t.Errorf("guard %v after 20s at 0.95, want further cuts", g)
	}
}

func minOf(xs []float64) float64 {
	m := math.Inf(1)
	for _, x := range xs {
		m = min(m, x)
	}
	return m
}

func countEq(xs []float64, v float64) int {
	n := 0
	for _, x := range xs {
		if x == v {
			n++
		}
	}
	return n
}

// TestRunnerGuardedGauge: xds_weights_guarded_endpoints counts the
// endpoints the guard holds back: 0 under noise around 0.75, 1 once b has
// been saturated for two periods, 0 again once it has recovered.
func TestRunnerGuardedGauge(t *testing.T) {
	tr := newTestTracker(t, noBlackout, "a", "b")
	r, err := NewRunner(RunnerConfig{Tracker: tr, Publish: func(Table) {}, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	gauge := func() float64 { return testutil.ToFloat64(r.guarded.WithLabelValues("s")) }
	sec := 0
	play := func(utils []float64) {
		for _, u := range utils {
			now := at(time.Duration(sec) * time.Second)
			observe(t, tr, now, load("a", now, 50, 0, 0.5), load("b", now, 100*u, 0, u))
			r.Step(now)
			sec++
		}
	}
	play(noisy(120, 0.75, 0.07, 3))
	if g := gauge(); g != 0 {
		t.Fatalf("guarded endpoints %v under noise, want 0", g)
	}
	saturated := make([]float64, 11)
	for i := range saturated {
		saturated[i] = 1
	}
	play(saturated)
	if g := gauge(); g != 1 {
		t.Fatalf("guarded endpoints %v after b saturated for 11s, want 1", g)
	}
	play(noisy(120, 0.4, 0.05, 4))
	if g := gauge(); g != 0 {
		t.Errorf("guarded endpoints %v after b recovered, want 0", g)
	}
}
