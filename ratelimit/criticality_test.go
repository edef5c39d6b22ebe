package ratelimit

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

func TestCriticalityCaps(t *testing.T) {
	for name, tc := range map[string]struct {
		a        *Admission
		capacity uint32
		want     [4]uint32
	}{
		"nil admits all":          {nil, 10, [4]uint32{10, 10, 10, 10}},
		"default shares":          {&Admission{Shares: DefaultShares}, 1000, [4]uint32{700, 800, 900, 1000}},
		"rounding":                {&Admission{Shares: DefaultShares}, 3, [4]uint32{2, 2, 3, 3}},
		"a positive share is >=1": {&Admission{Shares: Shares{0.01, 0.01, 1, 1}}, 3, [4]uint32{1, 1, 3, 3}},
		"zero share shuts":        {&Admission{Shares: Shares{0, 0.5, 1, 1}}, 10, [4]uint32{0, 5, 10, 10}},
		"absolute limits":         {&Admission{Shares: DefaultShares, Limits: [4]uint32{20, 0, 95, 0}}, 100, [4]uint32{20, 80, 95, 100}},
		"a small override bounds lower classes by higher ones": {&Admission{Shares: DefaultShares, Limits: [4]uint32{50}}, 20, [4]uint32{16, 16, 18, 20}},
	} {
		t.Run(name, func(t *testing.T) {
			var got [4]uint32
			for c := range got {
				got[c] = tc.a.Cap(Criticality(c), tc.capacity)
			}
			if got != tc.want {
				t.Errorf("caps = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestParseCriticality(t *testing.T) {
	for in, want := range map[string]Criticality{
		"CRITICAL_PLUS": CriticalPlus, "CRITICAL": Critical, "SHEDDABLE_PLUS": SheddablePlus,
		"SHEDDABLE": Sheddable, "sheddable": Critical, "": Critical, "VIP": Critical,
	} {
		if got, _ := ParseCriticality(in); got != want {
			t.Errorf("ParseCriticality(%q) = %v, want %v", in, got, want)
		}
	}
}

// overload sends 2x a limit of 1000/s for seconds of fake time, classes
// drawn from mix (percentages, CRITICAL_PLUS first), and counts each
// class's requests sent and admitted.
func overload(t *testing.T, ts *testService, mix [4]int, seconds int) (sent, admitted [4]int) {
	t.Helper()
	classes := [4]string{"CRITICAL_PLUS", "CRITICAL", "SHEDDABLE_PLUS", "SHEDDABLE"}
	rng := rand.New(rand.NewPCG(1, 2))
	const rate = 2000
	for i := range seconds * rate {
		ts.clock.Set(fixtureStart.Add(time.Duration(i) * time.Second / rate))
		c, r := 0, rng.IntN(100)
		for r >= mix[c] {
			r -= mix[c]
			c++
		}
		sent[c]++
		if ts.call(t, request("d", "api=x,criticality="+classes[c])).OverallCode == rlsv3.RateLimitResponse_OK {
			admitted[c]++
		}
	}
	return sent, admitted
}

// checkShedding asserts what the issue asks of a 2x overload:
// CRITICAL_PLUS keeps >= 99% of its requests, no class is accepted more
// than a higher one, SHEDDABLE takes the refusals first (at least 90% of
// what it could take), and at least minUse of the limit is used, never
// more than the limit.
func checkShedding(t *testing.T, sent, admitted [4]int, seconds int, minUse float64) {
	t.Helper()
	var acc [4]float64
	total, refused := 0, 0
	for c := range acc {
		acc[c] = float64(admitted[c]) / float64(max(sent[c], 1))
		total += admitted[c]
		refused += sent[c] - admitted[c]
	}
	perSec := total / seconds
	t.Logf("acceptance CRITICAL_PLUS %.3f CRITICAL %.3f SHEDDABLE_PLUS %.3f SHEDDABLE %.3f; %d/s admitted",
		acc[0], acc[1], acc[2], acc[3], perSec)
	if acc[0] < 0.99 {
		t.Errorf("CRITICAL_PLUS acceptance %.3f, want >= 0.99", acc[0])
	}
	for c := 1; c < 4; c++ {
		if acc[c] > acc[c-1]+0.01 {
			t.Errorf("class %d accepted more (%.3f) than class %d (%.3f)", c, acc[c], c-1, acc[c-1])
		}
	}
	if shed, could := sent[3]-admitted[3], min(sent[3], refused); float64(shed) < 0.9*float64(could) {
		t.Errorf("SHEDDABLE took %d refusals of the %d it could have", shed, could)
	}
	if perSec < int(minUse*1000) || perSec > 1000+1000/seconds {
		t.Errorf("%d/s admitted, want at least %.0f%% of the limit 1000/s and never more", perSec, 100*minUse)
	}
}

// Static shares (criticality: true) on top of the adaptive reserve:
// under a 2x overload of mixed traffic (10% CRITICAL_PLUS, 20% CRITICAL,
// 30% SHEDDABLE_PLUS, 40% SHEDDABLE), lower classes are refused first.
func TestCriticalityUnderOverload(t *testing.T) {
	for _, alg := range []string{"fixed_window", "sliding_window", "sliding_log", "token_bucket"} {
		t.Run(alg, func(t *testing.T) {
			ts := newTestService(t, fmt.Sprintf(`
domain: d
descriptors:
  - key: api
    rate_limit: {unit: second, requests_per_unit: 1000, algorithm: %s, criticality: true}
`, alg), nil)
			sent, admitted := overload(t, ts, [4]int{10, 20, 30, 40}, 10)
			// The static headroom goes partly unused when the higher
			// classes ask for less: the price of a fixed reserve.
			checkShedding(t, sent, admitted, 10, 0.75)
		})
	}
}

// The adaptive reserve alone (a plain rule, no criticality settings),
// whatever the mix: the SRE book's shedding, every algorithm.
// Measured (acceptance CRITICAL_PLUS, CRITICAL, SHEDDABLE_PLUS,
// SHEDDABLE; admitted/s), equal mix: fixed window 1.000 0.965 0.022
// 0.007, 997/s; sliding window 1.000 0.601 0.010 0.007, 809/s; sliding
// log 1.000 0.518 0.018 0.007, 772/s; token and leaky bucket 1.000 0.987
// 0.005 0.005, 999/s.
func TestCriticalityAdaptiveUnderOverload(t *testing.T) {
	for _, alg := range []string{"fixed_window", "sliding_window", "sliding_log", "token_bucket", "leaky_bucket"} {
		for name, mix := range map[string][4]int{"equal": {25, 25, 25, 25}, "few critical": {10, 20, 30, 40}, "mostly sheddable": {5, 5, 10, 80}} {
			t.Run(alg+"/"+name, func(t *testing.T) {
				burst := ""
				if alg == "token_bucket" || alg == "leaky_bucket" {
					burst = ", burst: 100"
				}
				ts := newTestService(t, fmt.Sprintf("domain: d\ndescriptors:\n  - key: api\n    rate_limit: {unit: second, requests_per_unit: 1000, algorithm: %s%s}\n", alg, burst), nil)
				sent, admitted := overload(t, ts, mix, 10)
				// The sliding windows keep a reserve of a quarter unit
				// at least: some of it goes unused.
				checkShedding(t, sent, admitted, 10, 0.75)
			})
		}
	}
}

// Without criticality entries every request is CRITICAL: the adaptive
// reserve keeps nothing back, and a limit admits exactly its capacity.
func TestCriticalityAdaptiveLeavesPlainTrafficAlone(t *testing.T) {
	ts := newTestService(t, "domain: d\ndescriptors:\n  - key: api\n    rate_limit: {unit: second, requests_per_unit: 100}\n", nil)
	ok := 0
	for i := range 300 {
		ts.clock.Set(fixtureStart.Add(time.Duration(i) * time.Second / 300))
		if ts.call(t, request("d", "api=x")).OverallCode == rlsv3.RateLimitResponse_OK {
			ok++
		}
	}
	if ok != 100 {
		t.Errorf("%d of 300 admitted in one second, want the limit 100", ok)
	}
	if n := ts.demand.size.Load(); n != 0 {
		t.Errorf("%d keys tracked for traffic without criticality, want 0", n)
	}
}
