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

// Under a 2x overload of mixed traffic (10% CRITICAL_PLUS, 20% CRITICAL,
// 30% SHEDDABLE_PLUS, 40% SHEDDABLE) on one shared limit with the default
// shares, CRITICAL_PLUS keeps at least 99% of its requests, lower classes
// are refused first, and the limit is used. Measured (acceptance CP, C,
// SP, S; admitted/s): fixed window 0.999 0.604 0.428 0.354, 984/s;
// sliding window 1.000 0.949 0.346 0.036, 816/s; sliding log 1.000 0.930
// 0.378 0.048, 838/s; token bucket (burst 1000) 1.000 1.000 0.701 0.072,
// 1079/s (the initial burst).
func TestCriticalityUnderOverload(t *testing.T) {
	for _, alg := range []string{"fixed_window", "sliding_window", "sliding_log", "token_bucket"} {
		t.Run(alg, func(t *testing.T) {
			yaml := fmt.Sprintf(`
domain: d
descriptors:
  - key: api
    rate_limit: {unit: second, requests_per_unit: 1000, algorithm: %s, criticality: true}
`, alg)
			ts := newTestService(t, yaml, nil)
			rng := rand.New(rand.NewPCG(1, 2))
			mix := []struct {
				class string
				pct   int
			}{{"CRITICAL_PLUS", 10}, {"CRITICAL", 20}, {"SHEDDABLE_PLUS", 30}, {"SHEDDABLE", 40}}
			var sent, admitted [4]int
			const seconds, rate = 10, 2000 // 2x the limit
			for i := range seconds * rate {
				ts.clock.Set(fixtureStart.Add(time.Duration(i) * time.Second / rate))
				c, r := 0, rng.IntN(100)
				for r >= mix[c].pct {
					r -= mix[c].pct
					c++
				}
				sent[c]++
				resp := ts.call(t, request("d", "api=x,criticality="+mix[c].class))
				if resp.OverallCode == rlsv3.RateLimitResponse_OK {
					admitted[c]++
				}
			}
			var acc [4]float64
			total := 0
			for c := range acc {
				acc[c] = float64(admitted[c]) / float64(sent[c])
				total += admitted[c]
			}
			t.Logf("acceptance CRITICAL_PLUS %.3f CRITICAL %.3f SHEDDABLE_PLUS %.3f SHEDDABLE %.3f; %d/s admitted",
				acc[0], acc[1], acc[2], acc[3], total/seconds)
			if acc[0] < 0.99 {
				t.Errorf("CRITICAL_PLUS acceptance %.3f, want >= 0.99", acc[0])
			}
			for c := 1; c < 4; c++ {
				if acc[c] > acc[c-1] {
					t.Errorf("%s accepted more (%.3f) than %s (%.3f)", mix[c].class, acc[c], mix[c-1].class, acc[c-1])
				}
			}
			if acc[3] > 0.5 {
				t.Errorf("SHEDDABLE acceptance %.3f: it should absorb most refusals", acc[3])
			}
			// The headroom reserved for the higher classes goes partly
			// unused when their demand is low: the price of the reserve.
			if perSec := total / seconds; perSec < 750 || perSec > 1000+1000/seconds {
				t.Errorf("%d/s admitted, want most of the limit 1000/s and never more", perSec)
			}
		})
	}
}
