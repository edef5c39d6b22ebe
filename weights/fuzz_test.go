package weights

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// The fuzz targets run their seed corpus as ordinary tests; explore with
// e.g. go test ./weights -run '^$' -fuzz FuzzTracker -fuzztime 30s.

// FuzzTracker drives a tracker with a random script of reports, clock
// steps, endpoint changes and updates, and checks every table's
// invariants (checkTable).
func FuzzTracker(f *testing.F) {
	f.Add([]byte{0, 1, 128, 200, 3, 0, 0, 0, 2, 30, 0, 0, 3, 0, 0, 0})
	f.Add([]byte{1, 2, 50, 9, 0, 2, 250, 255, 2, 255, 0, 0, 3, 1, 1, 1, 4, 3, 0, 0, 3, 0, 0, 0})
	f.Add([]byte{0, 0, 255, 255, 0, 1, 1, 1, 0, 2, 230, 100, 3, 0, 0, 0, 2, 200, 0, 0, 3, 9, 9, 9})
	f.Fuzz(func(t *testing.T, script []byte) {
		runScript(t, script)
	})
}

// TestTrackerInvariants runs FuzzTracker's checks on longer random scripts.
func TestTrackerInvariants(t *testing.T) {
	randomScripts(rand.New(rand.NewPCG(3, 4)), 4, 50, func(script []byte) { runScript(t, script) })
}

// randomScripts runs run on 200 random scripts of unit-byte instructions,
// from least to least+200 instructions long.
func randomScripts(rng *rand.Rand, unit, least int, run func([]byte)) {
	for range 200 {
		script := make([]byte, unit*(least+rng.IntN(200)))
		for i := range script {
			script[i] = byte(rng.UintN(256))
		}
		run(script)
	}
}

// runScript interprets script in 4-byte instructions (op, a, b, c) on a
// tracker of service "s" with endpoints e0..e3 (blackout 5s, expiry 60s).
func runScript(t *testing.T, script []byte) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.BlackoutPeriod, cfg.ExpirationPeriod = 5*time.Second, time.Minute
	tr, err := NewTracker(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ids := []string{"e0", "e1", "e2", "e3"}
	all := []Endpoint{{ID: "e0", Static: 1}, {ID: "e1", Static: 2}, {ID: "e2"}, {ID: "e3", Static: 5}}
	if err := tr.SetEndpoints("s", all); err != nil {
		t.Fatal(err)
	}
	now := t0
	for i := 0; i+4 <= len(script); i += 4 {
		op, a, b, c := script[i]%5, script[i+1], script[i+2], script[i+3]
		switch op {
		case 0, 1: // a backend (op 0) or client (op 1) report
			r := Report{Service: "s", Endpoint: ids[a%4], At: now.Add(-time.Duration(c%90) * time.Second),
				QPS: float64(b) * 4, EPS: float64(c%8) * float64(b) / 16, CPU: float64(c) / 200}
			if op == 1 {
				r.Node, r.CPU = string(rune('m'+a%3)), 0
			}
			if err := tr.Observe(r, now); err != nil && !errors.Is(err, ErrUnknownEndpoint) {
				t.Fatalf("Observe(%+v): %v", r, err)
			}
		case 2: // the clock moves on
			now = now.Add(time.Duration(a)*time.Second + time.Duration(b)*time.Millisecond)
		case 3:
			checkTable(t, tr.Update(now), cfg)
		case 4: // discovery drops or restores endpoints
			keep := all[:1+int(a%4)]
			if err := tr.SetEndpoints("s", keep); err != nil {
				t.Fatal(err)
			}
		}
	}
	checkTable(t, tr.Update(now), cfg)
}

// checkTable: rows sorted, integer weights >= 1 within MaxRatio and a sum
// under 2^32-1, own weights positive, fallbacks at the mean (or static
// when nobody has an own weight), guards in [1/MaxRatio, 1], ages >= 0.
func checkTable(t *testing.T, tab Table, cfg Config) {
	t.Helper()
	for _, s := range tab.Services {
		var sum float64
		lo, hi := uint32(math.MaxUint32), uint32(0)
		own := 0
		for i, r := range s.Rows {
			if i > 0 && s.Rows[i-1].Endpoint >= r.Endpoint {
				t.Fatalf("rows not sorted: %q then %q", s.Rows[i-1].Endpoint, r.Endpoint)
			}
			sum += float64(r.Weight)
			lo, hi = min(lo, r.Weight), max(hi, r.Weight)
			if r.Guard < 1/cfg.MaxRatio-1e-12 || r.Guard > 1 || r.Age < 0 {
				t.Fatalf("%s: guard %v age %v", r.Endpoint, r.Guard, r.Age)
			}
			if r.Reason.Own() {
				own++
				if !(r.Float > 0) || math.IsInf(r.Float, 0) {
					t.Fatalf("%s: own weight %v", r.Endpoint, r.Float)
				}
			}
		}
		for _, r := range s.Rows {
			switch {
			case r.Reason.Own():
			case own > 0 && r.Float != s.Mean:
				t.Fatalf("%s (%s): float %v, want the mean %v", r.Endpoint, r.Reason, r.Float, s.Mean)
			case own == 0 && r.Float != float64(r.Static):
				t.Fatalf("%s (%s): float %v, want static %d", r.Endpoint, r.Reason, r.Float, r.Static)
			}
		}
		if len(s.Rows) > 0 && (lo < 1 || float64(hi) > cfg.MaxRatio*float64(lo) || sum >= math.MaxUint32) {
			t.Fatalf("weights min %d max %d sum %v", lo, hi, sum)
		}
	}
}

// FuzzSolve: on random small problems (some rates, capacities and global
// weights unknown, some previous weights, any damping and ratio), Solve
// succeeds and every node gets weights >= 1 within MaxRatio over exactly
// its subset, and a split that sums to 1.
func FuzzSolve(f *testing.F) {
	f.Add(uint64(1), uint8(10), uint8(30), uint8(3), uint8(50), 0.5, 100.0)
	f.Add(uint64(2), uint8(1), uint8(1), uint8(1), uint8(0), 1.0, 1.0)
	f.Add(uint64(3), uint8(200), uint8(5), uint8(40), uint8(255), 1e-9, 1e6)
	f.Add(uint64(4), uint8(7), uint8(60), uint8(9), uint8(128), 0.9, 1.5)
	f.Fuzz(func(t *testing.T, seed uint64, backends, clients, k, unknown uint8, damping, maxRatio float64) {
		cfg := DefaultSolveConfig()
		cfg.Damping, cfg.MaxRatio = damping, maxRatio
		if cfg.Validate() != nil {
			return
		}
		rng := rand.New(rand.NewPCG(seed, 5))
		nb := 1 + int(backends)%200
		fl := randomFleet(rng, nb, int(clients)%100, 1+int(k)%nb, 2)
		p := fl.problem()
		for i := range p.Endpoints {
			if rng.UintN(256) < uint(unknown) {
				p.Endpoints[i].Capacity, p.Endpoints[i].Global = 0, 0
			}
			p.Endpoints[i].Background = rng.Float64() * float64(rng.IntN(2))
		}
		for i := range p.Nodes {
			if rng.UintN(256) < uint(unknown) {
				p.Nodes[i].Rates = nil
			}
			if rng.IntN(2) == 0 {
				p.Nodes[i].Previous = global(fl)(i)
			}
		}
		sol, err := Solve(p, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if len(sol.Nodes) != len(p.Nodes) || math.IsNaN(sol.Spread) || math.IsInf(sol.Spread, 0) {
			t.Fatalf("%d nodes for %d, spread %v", len(sol.Nodes), len(p.Nodes), sol.Spread)
		}
		for i, n := range sol.Nodes {
			if len(n.Weights) != len(p.Nodes[i].Subset) {
				t.Fatalf("%s: %d weights for %d members", n.Node, len(n.Weights), len(p.Nodes[i].Subset))
			}
			sum := 0.0
			for m, w := range n.Weights {
				if w < 1 || float64(w) > cfg.MaxRatio*float64(slices.Min(n.Weights)) {
					t.Fatalf("%s: weights %v", n.Node, n.Weights)
				}
				sum += n.Share[m]
			}
			if len(n.Weights) > 0 && math.Abs(sum-1) > 1e-9 {
				t.Fatalf("%s: split %v sums to %v", n.Node, n.Share, sum)
			}
		}
	})
}
