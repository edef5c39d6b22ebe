package main

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// TestFleetReproducibleLognormal: the same seed draws the same fleet (the
// load lab builds it with real processes from -json), another seed
// another; the rates are lognormal with the asked sigma, scaled so that
// they sum to util of the capacity; capacities are in [1, 2] x capUnit.
func TestFleetReproducibleLognormal(t *testing.T) {
	o := defaultOptions()
	o.backends, o.clients, o.size, o.sigma, o.util = 100, 2000, 10, 0.7, 0.5
	draw := func(seed uint64) fleet {
		f, err := newFleet(o, rand.New(rand.NewPCG(seed, 0x5eed)))
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	a, b, c := draw(1), draw(1), draw(2)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("the same seed drew two fleets")
	}
	if reflect.DeepEqual(a.rates, c.rates) {
		t.Fatal("two seeds drew the same rates")
	}
	var sum, sumLog, sumLog2, capSum float64
	for _, r := range a.rates {
		sum += r
		sumLog += math.Log(r)
		sumLog2 += math.Log(r) * math.Log(r)
	}
	for _, x := range a.caps {
		capSum += x
		if x < capUnit || x > 2*capUnit {
			t.Errorf("capacity %v outside [%d, %d]", x, capUnit, 2*capUnit)
		}
	}
	n := float64(len(a.rates))
	sd := math.Sqrt(sumLog2/n - (sumLog/n)*(sumLog/n))
	if math.Abs(sd-o.sigma) > 0.05 {
		t.Errorf("sd of log rates %.3f, want sigma %.2f +- 0.05", sd, o.sigma)
	}
	if math.Abs(sum/capSum-o.util) > 1e-9 {
		t.Errorf("total rate / capacity = %v, want %v", sum/capSum, o.util)
	}
}

// TestJSONHasFleetAndPolicies: -json writes the first trial's fleet and
// a figure per policy and noise level.
func TestJSONHasFleetAndPolicies(t *testing.T) {
	o := tiny()
	res, err := simulateMode(o, 0)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "sim.json")
	if err := writeJSON(path, results{opts: o, modes: []modeResult{res}}); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var got jsonResult
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	want, _ := newFleet(o, rand.New(rand.NewPCG(o.seed, 0x5eed)))
	if !reflect.DeepEqual(got.Fleet.Capacities, want.caps) || !reflect.DeepEqual(got.Fleet.Rates, want.rates) ||
		len(got.Fleet.Subsets) != o.clients {
		t.Errorf("fleet in the JSON is not the seed's")
	}
	if len(got.Policies) != len(policyNames) {
		t.Errorf("%d policies, want %d", len(got.Policies), len(policyNames))
	}
	for _, p := range got.Policies {
		if !(p.MaxMean >= 1) {
			t.Errorf("%s: max/mean %v", p.Name, p.MaxMean)
		}
	}
}
