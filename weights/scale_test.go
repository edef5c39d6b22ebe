package weights

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestScale(t *testing.T) {
	for name, tc := range map[string]struct {
		w        []float64
		maxRatio float64
		want     []uint32
	}{
		"empty":                     {w: nil, maxRatio: 100, want: []uint32{}},
		"one":                       {w: []float64{42}, maxRatio: 100, want: []uint32{100}},
		"equal":                     {w: []float64{3, 3, 3}, maxRatio: 100, want: []uint32{100, 100, 100}},
		"smallest maps to 100":      {w: []float64{125, 200, 500}, maxRatio: 100, want: []uint32{100, 160, 400}},
		"units do not matter":       {w: []float64{1.25e-6, 2e-6, 5e-6}, maxRatio: 100, want: []uint32{100, 160, 400}},
		"rounding to nearest":       {w: []float64{1, 1.234, 1.236}, maxRatio: 100, want: []uint32{100, 123, 124}},
		"small ones raised":         {w: []float64{1, 1000, 5000}, maxRatio: 100, want: []uint32{100, 2000, 10000}},
		"ratio one flattens":        {w: []float64{1, 2, 3}, maxRatio: 1, want: []uint32{100, 100, 100}},
		"fractional ratio rounding": {w: []float64{1, 2.345}, maxRatio: 2.345, want: []uint32{100, 234}},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := Scale(tc.w, tc.maxRatio)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("Scale(%v, %v) = %v, want %v", tc.w, tc.maxRatio, got, tc.want)
			}
		})
	}
}

func TestScaleErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		w        []float64
		maxRatio float64
		want     []string
	}{
		"zero weight":     {w: []float64{1, 0}, maxRatio: 100, want: []string{"weight 1 is 0"}},
		"negative weight": {w: []float64{-1}, maxRatio: 100, want: []string{"weight 0 is -1"}},
		"NaN weight":      {w: []float64{math.NaN()}, maxRatio: 100, want: []string{"weight 0 is NaN"}},
		"infinite weight": {w: []float64{math.Inf(1)}, maxRatio: 100, want: []string{"weight 0 is +Inf"}},
		"ratio below one": {w: []float64{1}, maxRatio: 0.9, want: []string{"max ratio 0.9"}},
		"too many":        {w: make([]float64, MaxEndpoints+1), maxRatio: 100, want: []string{"at most"}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Scale(tc.w, tc.maxRatio)
			checkErr(t, err, ErrInvalidWeights, tc.want)
		})
	}
}

// checkScaled checks Scale's guarantees for w and returns the worst
// relative error of an integer weight against its exact value under the
// best-fitting scale, after raising the small weights to the floor.
func checkScaled(t *testing.T, w []float64, maxRatio float64, got []uint32) float64 {
	t.Helper()
	if len(got) != len(w) {
		t.Fatalf("%d weights for %d", len(got), len(w))
	}
	if len(w) == 0 {
		return 0
	}
	sum, lo, hi := 0.0, uint32(math.MaxUint32), uint32(0)
	for _, n := range got {
		sum += float64(n)
		lo, hi = min(lo, n), max(hi, n)
	}
	if lo < 1 {
		t.Fatalf("weight %d below 1", lo)
	}
	if sum >= math.MaxUint32 {
		t.Fatalf("sum %v not below 2^32-1", sum)
	}
	if float64(hi) > maxRatio*float64(lo) {
		t.Fatalf("max/min %d/%d above %v", hi, lo, maxRatio)
	}
	wmax := slices.Max(w)
	v := make([]float64, len(w))
	vsum := 0.0
	for i, x := range w {
		v[i] = max(x/wmax, 1/maxRatio)
		vsum += v[i]
	}
	worst := 0.0
	for i := range v {
		exact := v[i] / vsum * sum
		worst = max(worst, math.Abs(float64(got[i])-exact)/exact)
	}
	return worst
}

// TestScaleProperties: random weights over many decades keep every
// guarantee, and proportions to 2% (two roundings of at most 1 in 100:
// each weight's and the scale's) whenever the sum does not bind.
func TestScaleProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	worst := 0.0
	for range 2000 {
		n := 1 + rng.IntN(300)
		maxRatio := []float64{1, 1.5, 10, 100, 1000, 1e6}[rng.IntN(6)]
		w := make([]float64, n)
		for i := range w {
			w[i] = math.Exp(rng.NormFloat64()*3) * math.Pow(10, float64(rng.IntN(40)-20))
		}
		got, err := Scale(w, maxRatio)
		if err != nil {
			t.Fatal(err)
		}
		e := checkScaled(t, w, maxRatio, got)
		if float64(n)*maxRatio*scaleMin < 1e9 && e > 2.0/scaleMin {
			t.Fatalf("n %d ratio %v: relative error %v above %v", n, maxRatio, e, 2.0/scaleMin)
		}
		worst = max(worst, e)
	}
	t.Logf("worst relative error of an integer weight: %.4f (bound %.2f)", worst, 2.0/scaleMin)
}

// TestScaleSumBound: when the sum would exceed 2^32-2, the scale shrinks
// and the small weights bottom out at 1.
func TestScaleSumBound(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	w := make([]float64, 100000)
	for i := range w {
		w[i] = 1 + rng.Float64()*1e6
	}
	got, err := Scale(w, 1e6)
	if err != nil {
		t.Fatal(err)
	}
	checkScaled(t, w, 1e6, got)
	w[0] = 1e-9 // a tiny one is raised to the floor, then to 1
	got, err = Scale(w, 1e6)
	if err != nil {
		t.Fatal(err)
	}
	checkScaled(t, w, 1e6, got)
}

// FuzzScale: any positive finite weights scale within the guarantees.
func FuzzScale(f *testing.F) {
	f.Add(1.0, 2.0, 3.0, 100.0)
	f.Add(5e-324, 1.7976931348623157e308, 1.0, 1e6)
	f.Add(1.0, 1.0, 1.0, 1.0)
	f.Add(0.001, 123456.789, 99.5, 2.345)
	f.Fuzz(func(t *testing.T, a, b, c, maxRatio float64) {
		w := []float64{a, b, c}
		got, err := Scale(w, maxRatio)
		valid := validateMaxRatio(maxRatio) == nil
		for _, x := range w {
			valid = valid && x > 0 && !math.IsInf(x, 0)
		}
		if (err == nil) != valid {
			t.Fatalf("Scale(%v, %v) error %v", w, maxRatio, err)
		}
		if err == nil {
			checkScaled(t, w, maxRatio, got)
		}
	})
}
