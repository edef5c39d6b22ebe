package weights

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// spillWorld is a closed loop of two zones, a and b, of 100 requests/s of
// capacity each: the nodes of each zone send Keep of their demand to
// their own zone and the rest to the other, with the Keep published
// (spillChanged) 2 s before (the push's way to the clients); each endpoint's measured utilization is its offered
// load over its capacity, at most 1 (saturated), with a 2% noise.
type spillWorld struct {
	ctl       *Spiller
	demand    map[ZoneKey]float64 // requests/s of each zone's own nodes
	published map[string]map[ZoneKey]ZoneSpill
	applied   []map[string]map[ZoneKey]ZoneSpill // what the nodes use: published 2 steps before
	publishes int
	rng       *rand.Rand
	now       time.Time
}

const simCapacity = 100.0

// offered is the load each zone's endpoints get under the published Keep.
func (w *spillWorld) offered() map[ZoneKey]float64 {
	keep := func(k ZoneKey) float64 {
		if len(w.applied) == 0 {
			return 1
		}
		if z, ok := w.applied[0]["s"][k]; ok {
			return z.Keep
		}
		return 1
	}
	return map[ZoneKey]float64{
		zoneA: keep(zoneA)*w.demand[zoneA] + (1-keep(zoneB))*w.demand[zoneB],
		zoneB: keep(zoneB)*w.demand[zoneB] + (1-keep(zoneA))*w.demand[zoneA],
	}
}

// step runs n seconds of the loop: measure, step the controller, publish
// when spillChanged says so.
func (w *spillWorld) step(n int) {
	for range n {
		loads := map[ZoneKey]ZoneLoad{}
		for k, l := range w.offered() {
			noisy := min(l, simCapacity) * (1 + 0.02*(2*w.rng.Float64()-1))
			loads[k] = ZoneLoad{Capacity: simCapacity, Load: noisy}
		}
		all := map[string]map[ZoneKey]ZoneSpill{"s": w.ctl.Step(w.now, "s", loads)}
		if spillChanged(w.published, all, DefaultMinChange) {
			w.published = all
			w.publishes++
		}
		w.applied = append(w.applied, w.published)
		if len(w.applied) > 2 {
			w.applied = w.applied[1:]
		}
		w.now = w.now.Add(time.Second)
	}
}

// TestSpillClosedLoop: zone a's own nodes send 130 requests/s to its 100
// of capacity, zone b's 30 to its 100. After convergence a runs under
// the threshold having spilled little more than its excess, b carries
// exactly what a spilled, and the loop stays put; when a's demand drops
// to 50, a takes everything back.
func TestSpillClosedLoop(t *testing.T) {
	w := &spillWorld{ctl: newTestSpiller(t), demand: map[ZoneKey]float64{zoneA: 130, zoneB: 30},
		rng: rand.New(rand.NewPCG(26, 4)), now: t0}
	w.step(120)
	keep, off := w.published["s"][zoneA].Keep, w.offered()
	ua, ub := off[zoneA]/simCapacity, off[zoneB]/simCapacity
	spilled := (1 - keep) * w.demand[zoneA]
	t.Logf("after 120 s: a keeps %.3f: a at %.3f, b at %.3f (spilled %.1f of a's 130 requests/s; %d publications)",
		keep, ua, ub, spilled, w.publishes)
	if ua > DefaultOverloadThreshold || ua < DefaultOverloadRecover {
		t.Errorf("a at %.3f, want in [%v, %v]: under the threshold, not emptied", ua, DefaultOverloadRecover, DefaultOverloadThreshold)
	}
	if math.Abs(off[zoneB]-(30+spilled)) > 1e-9 || ub > DefaultOverloadThreshold {
		t.Errorf("b serves %.2f, want its own 30 plus a's spilled %.2f, under the threshold", off[zoneB], spilled)
	}
	if w.publishes > 6 {
		t.Errorf("%d publications to converge, want at most 6 (zones appearing and a few moves)", w.publishes)
	}
	if b := w.published["s"][zoneB].Keep; b != 1 {
		t.Errorf("b keeps %v, want 1: it has room", b)
	}
	before := w.publishes
	w.step(300)
	if n := w.publishes - before; n > 2 {
		t.Errorf("%d publications in 300 s of steady demand, want at most 2 (no flapping)", n)
	}
	if ua := w.offered()[zoneA] / simCapacity; ua > DefaultOverloadThreshold {
		t.Errorf("a drifted to %.3f under steady demand", ua)
	}

	w.demand[zoneA] = 50
	w.step(60)
	if keep := w.published["s"][zoneA].Keep; keep != 1 {
		t.Errorf("a's demand at 50: a keeps %v, want 1", keep)
	}
	if ub := w.offered()[zoneB]; ub != 30 {
		t.Errorf("b serves %v, want its own 30 alone", ub)
	}
}
