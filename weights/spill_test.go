package weights

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

var (
	zoneA = ZoneKey{Region: "dc1", Zone: "a"}
	zoneB = ZoneKey{Region: "dc1", Zone: "b"}
	zoneC = ZoneKey{Region: "dc1", Zone: "c"}
)

// spillPhase holds the zones' loads for steps steps, one second apart.
type spillPhase struct {
	steps int
	loads map[ZoneKey]ZoneLoad
}

// cap100 is a zone of capacity 100 requests/s serving load requests/s.
func cap100(load float64) ZoneLoad { return ZoneLoad{Capacity: 100, Load: load} }

// oneMove is the steps of one controller move with the default period
// (5s): the window opens at the first reading and closes 5s later.
const oneMove = 6

func newTestSpiller(t *testing.T) *Spiller {
	t.Helper()
	s, err := NewSpiller(SpillConfigFrom(DefaultConfig()))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// runSpill runs the phases on s for service "s" from t0 and returns the
// states after the last step and the time of the next.
func runSpill(s *Spiller, now time.Time, phases ...spillPhase) (map[ZoneKey]ZoneSpill, time.Time) {
	var got map[ZoneKey]ZoneSpill
	for _, ph := range phases {
		for range ph.steps {
			got = s.Step(now, "s", ph.loads)
			now = now.Add(time.Second)
		}
	}
	return got, now
}

// spillCase is loads held in phases, and the Keep each zone should have
// after them.
type spillCase struct {
	phases []spillPhase
	want   map[ZoneKey]float64
}

func spillCases() map[string]spillCase {
	over := map[ZoneKey]ZoneLoad{zoneA: cap100(120), zoneB: cap100(20)}
	return map[string]spillCase{
		"no spill below the threshold": {
			phases: []spillPhase{{30, map[ZoneKey]ZoneLoad{zoneA: cap100(89), zoneB: cap100(10)}}},
			want:   map[ZoneKey]float64{zoneA: 1, zoneB: 1},
		},
		"no spill at the threshold": {
			phases: []spillPhase{{30, map[ZoneKey]ZoneLoad{zoneA: cap100(90), zoneB: cap100(10)}}},
			want:   map[ZoneKey]float64{zoneA: 1, zoneB: 1},
		},
		"no move before a period has passed": {
			phases: []spillPhase{{oneMove - 1, over}},
			want:   map[ZoneKey]float64{zoneA: 1, zoneB: 1},
		},
		"spills only the excess: 120 on 100 keeps 0.9/1.2": {
			phases: []spillPhase{{oneMove, over}},
			want:   map[ZoneKey]float64{zoneA: 0.75, zoneB: 1},
		},
		"hysteresis: no move between the marks": {
			phases: []spillPhase{{oneMove, over},
				{3, map[ZoneKey]ZoneLoad{zoneA: cap100(81), zoneB: cap100(40)}},
				{3, map[ZoneKey]ZoneLoad{zoneA: cap100(89.9), zoneB: cap100(40)}},
				{3, map[ZoneKey]ZoneLoad{zoneA: cap100(81), zoneB: cap100(40)}},
				{3, map[ZoneKey]ZoneLoad{zoneA: cap100(89.9), zoneB: cap100(40)}},
				{20, map[ZoneKey]ZoneLoad{zoneA: cap100(85), zoneB: cap100(40)}}},
			want: map[ZoneKey]float64{zoneA: 0.75, zoneB: 1},
		},
		"takes traffic back below the recover mark, toward the middle": {
			phases: []spillPhase{{oneMove, over}, {5, map[ZoneKey]ZoneLoad{zoneA: cap100(70), zoneB: cap100(40)}}},
			want:   map[ZoneKey]float64{zoneA: 0.75 * 0.85 / 0.7, zoneB: 1},
		},
		"takes it all back far below": {
			phases: []spillPhase{{oneMove, over}, {5, map[ZoneKey]ZoneLoad{zoneA: cap100(30), zoneB: cap100(40)}}},
			want:   map[ZoneKey]float64{zoneA: 1, zoneB: 1},
		},
		"spills no more than the spare elsewhere (10 of 30)": {
			phases: []spillPhase{{oneMove, map[ZoneKey]ZoneLoad{zoneA: cap100(120), zoneB: cap100(80)}}},
			want:   map[ZoneKey]float64{zoneA: 1 - 10.0/120, zoneB: 1},
		},
		"no spare anywhere: nothing spills": {
			phases: []spillPhase{{30, map[ZoneKey]ZoneLoad{zoneA: cap100(120), zoneB: cap100(95)}}},
			want:   map[ZoneKey]float64{zoneA: 1, zoneB: 1},
		},
		"a zone without capacity takes nothing": {
			phases: []spillPhase{{30, map[ZoneKey]ZoneLoad{zoneA: cap100(120), zoneB: {Capacity: 0, Load: 0}}}},
			want:   map[ZoneKey]float64{zoneA: 1, zoneB: 1},
		},
		"two overloaded zones share the spare in key order": {
			phases: []spillPhase{{oneMove, map[ZoneKey]ZoneLoad{zoneA: cap100(120), zoneB: cap100(110), zoneC: cap100(70)}}},
			want:   map[ZoneKey]float64{zoneA: 1 - 20.0/120, zoneB: 1, zoneC: 1},
		},
		"saturated: the guard's factor per move": {
			phases: []spillPhase{{oneMove, map[ZoneKey]ZoneLoad{zoneA: cap100(100), zoneB: {Capacity: 1000, Load: 0}}}},
			want:   map[ZoneKey]float64{zoneA: DefaultOverloadFactor, zoneB: 1},
		},
		"never below MinKeep": {
			phases: []spillPhase{{100, map[ZoneKey]ZoneLoad{zoneA: cap100(5000), zoneB: {Capacity: 1e9, Load: 0}}}},
			want:   map[ZoneKey]float64{zoneA: MinKeep, zoneB: 1},
		},
		"unknown utilization holds": {
			phases: []spillPhase{{oneMove, over}, {30, map[ZoneKey]ZoneLoad{zoneA: {Capacity: 0, Load: 3}, zoneB: cap100(40)}}},
			want:   map[ZoneKey]float64{zoneA: 0.75, zoneB: 1},
		},
		"a zone that left and came back starts at 1": {
			phases: []spillPhase{{oneMove, over}, {1, map[ZoneKey]ZoneLoad{zoneB: cap100(40)}}, {1, over}},
			want:   map[ZoneKey]float64{zoneA: 1, zoneB: 1},
		},
	}
}

func TestSpillController(t *testing.T) {
	for name, tc := range spillCases() {
		t.Run(name, func(t *testing.T) {
			got, _ := runSpill(newTestSpiller(t), t0, tc.phases...)
			if len(got) != len(tc.want) {
				t.Fatalf("zones %v, want %v", got, tc.want)
			}
			for k, want := range tc.want {
				if z := got[k]; math.Abs(z.Keep-want) > 1e-9 {
					t.Errorf("%v keeps %v, want %v (state %+v)", k, z.Keep, want, z)
				}
			}
		})
	}
}

// After a cut, the predicted utilization of the zone (its utilization
// scaled by the new Keep over the old) is the threshold: the excess, no
// more; a saturated zone's (utilization >= 1) is at most the threshold.
func TestSpillPredictsTheThreshold(t *testing.T) {
	for _, load := range []float64{90.5, 95, 99, 100, 120, 300} {
		got, _ := runSpill(newTestSpiller(t), t0, spillPhase{oneMove, map[ZoneKey]ZoneLoad{zoneA: cap100(load), zoneB: {Capacity: 1e6}}})
		u := load / 100 * got[zoneA].Keep
		if u > DefaultOverloadThreshold+1e-9 || (load < 100 && math.Abs(u-DefaultOverloadThreshold) > 1e-9) {
			t.Errorf("load %v on 100: keeps %v, predicted utilization %v, want the threshold %v",
				load, got[zoneA].Keep, u, DefaultOverloadThreshold)
		}
	}
}

func TestSpillSpare(t *testing.T) {
	got := newTestSpiller(t).Step(t0, "s", map[ZoneKey]ZoneLoad{
		zoneA: cap100(120), zoneB: cap100(50), zoneC: {Capacity: 0, Load: 10},
	})
	for k, want := range map[ZoneKey]ZoneSpill{
		zoneA: {Keep: 1, Spare: 0, Utilization: 1.2, Capacity: 100},
		zoneB: {Keep: 1, Spare: 40, Utilization: 0.5, Capacity: 100},
		zoneC: {Keep: 1, Spare: 0, Utilization: 0, Capacity: 0},
	} {
		if z := got[k]; math.Abs(z.Spare-want.Spare) > 1e-9 || z.Keep != want.Keep ||
			math.Abs(z.Utilization-want.Utilization) > 1e-9 || z.Capacity != want.Capacity {
			t.Errorf("%v: %+v, want %+v", k, z, want)
		}
	}
}

func TestSpillConfigValidate(t *testing.T) {
	if err := SpillConfigFrom(DefaultConfig()).Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []SpillConfig{
		{Threshold: 0, Recover: 0.8, Period: time.Second, Factor: 0.5},
		{Threshold: 0.9, Recover: 0.95, Period: time.Second, Factor: 0.5},
		{Threshold: 0.9, Recover: 0.8, Period: 0, Factor: 0.5},
		{Threshold: 0.9, Recover: 0.8, Period: time.Second, Factor: 1},
	} {
		if _, err := NewSpiller(c); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%+v: %v, want ErrInvalidConfig", c, err)
		}
	}
}

func TestSpillChanged(t *testing.T) {
	one := func(keep float64) map[string]map[ZoneKey]ZoneSpill {
		return map[string]map[ZoneKey]ZoneSpill{"s": {zoneA: {Keep: keep}, zoneB: {Keep: 1}}}
	}
	for name, tc := range map[string]struct {
		old, new map[string]map[ZoneKey]ZoneSpill
		want     bool
	}{
		"same":                        {one(0.7), one(0.7), false},
		"noise":                       {one(0.7), one(0.69), false},
		"a move beyond 5% of 0.3":     {one(0.7), one(0.68), true},
		"first spill, however small":  {one(1), one(0.995), true},
		"back to 1":                   {one(0.999), one(1), true},
		"utilization alone":           {one(1), map[string]map[ZoneKey]ZoneSpill{"s": {zoneA: {Keep: 1, Utilization: 0.5}, zoneB: {Keep: 1}}}, false},
		"a zone left":                 {one(1), map[string]map[ZoneKey]ZoneSpill{"s": {zoneA: {Keep: 1}}}, true},
		"a service left":              {one(1), map[string]map[ZoneKey]ZoneSpill{}, true},
		"nothing before, nothing now": {nil, map[string]map[ZoneKey]ZoneSpill{}, false},
	} {
		t.Run(name, func(t *testing.T) {
			if got := spillChanged(tc.old, tc.new, DefaultMinChange); got != tc.want {
				t.Errorf("spillChanged = %v, want %v", got, tc.want)
			}
		})
	}
}

// FuzzSpill drives a controller with a random script of zone loads
// (including NaN, infinite and negative ones), zones leaving and clock
// steps, and checks every state: Keep in [MinKeep, 1], Spare in [0,
// threshold*Capacity], Utilization in [0, MaxUtilization], no Keep cut
// at a step where no zone had spare, and at most one move per zone per
// period.
func FuzzSpill(f *testing.F) {
	f.Add([]byte{200, 10, 100, 1, 250, 0, 5, 5, 200, 10, 100, 1, 250, 0, 5, 5, 200, 10, 100, 1, 250, 0, 5, 5})
	f.Add([]byte{255, 1, 0, 0, 254, 2, 253, 3, 120, 100, 30, 100, 120, 100, 30, 100, 120, 100, 30, 100})
	f.Fuzz(func(t *testing.T, script []byte) { runSpillScript(t, script) })
}

// TestSpillInvariants runs FuzzSpill's checks on longer random scripts.
func TestSpillInvariants(t *testing.T) {
	randomScripts(rand.New(rand.NewPCG(26, 4)), 8, 20, func(script []byte) { runSpillScript(t, script) })
}

// spillValue maps a script byte to a rate: mostly 0..250 requests/s,
// with 251.. as the values no report should give.
func spillValue(b byte) float64 {
	switch b {
	case 251:
		return math.NaN()
	case 252:
		return math.Inf(1)
	case 253:
		return -5
	case 254:
		return 1e300
	}
	return float64(b)
}

// runSpillScript interprets script in 8-byte instructions: the loads and
// capacities of zones a, b and c (capacity byte 0 with load byte 0: the
// zone left), then a step of (load byte of a) % 4 seconds.
func runSpillScript(t *testing.T, script []byte) {
	t.Helper()
	s := newTestSpiller(t)
	cfg := SpillConfigFrom(DefaultConfig())
	now, lastMove := t0, map[ZoneKey]time.Time{}
	prev := map[ZoneKey]float64{}
	for i := 0; i+8 <= len(script); i += 8 {
		in := script[i : i+8]
		loads := map[ZoneKey]ZoneLoad{}
		for j, k := range []ZoneKey{zoneA, zoneB, zoneC} {
			if in[2*j] != 0 || in[2*j+1] != 0 {
				loads[k] = ZoneLoad{Load: spillValue(in[2*j]), Capacity: spillValue(in[2*j+1])}
			}
		}
		got := s.Step(now, "s", loads)
		spare := 0.0
		for _, z := range got {
			spare += z.Spare
		}
		for k, z := range got {
			if !(z.Keep >= MinKeep && z.Keep <= 1) || !(z.Spare >= 0 && z.Spare <= cfg.Threshold*z.Capacity+1e-6) ||
				!(z.Utilization >= 0 && z.Utilization <= MaxUtilization) || !(z.Capacity >= 0) || math.IsInf(z.Capacity, 0) {
				t.Fatalf("step %d, zone %v: %+v out of bounds", i/8, k, z)
			}
			old, known := prev[k]
			if known && z.Keep < old && spare == 0 {
				t.Fatalf("step %d, zone %v: Keep cut %v -> %v with no spare anywhere", i/8, k, old, z.Keep)
			}
			if known && z.Keep != old {
				if at, ok := lastMove[k]; ok && now.Sub(at) < cfg.Period {
					t.Fatalf("step %d, zone %v: moved %v after the last move", i/8, k, now.Sub(at))
				}
				lastMove[k] = now
			}
		}
		prev = map[ZoneKey]float64{}
		for k, z := range got {
			prev[k] = z.Keep
		}
		for k := range lastMove {
			if _, ok := got[k]; !ok {
				delete(lastMove, k)
			}
		}
		now = now.Add(time.Duration(in[0]%4) * time.Second)
	}
}
