package discovery

import (
	"fmt"
	"testing"
	"time"
)

// without returns s with the endpoints of service name whose index
// (<name>-<i>) is in drop left out.
func without(s Snapshot, name string, drop ...int) Snapshot {
	out := Snapshot{}
	for _, svc := range s.Services {
		eps := []Endpoint{}
		for _, ep := range svc.Endpoints {
			gone := false
			for _, i := range drop {
				gone = gone || (svc.Name == name && ep.ID == fmt.Sprintf("%s-%d", name, i))
			}
			if !gone {
				eps = append(eps, ep)
			}
		}
		out.Services = append(out.Services, Service{Name: svc.Name, Endpoints: eps})
	}
	return out
}

// renewed returns s with the endpoints <service>-<i> for i in ids given
// new ids (<service>-<i>-v2), as a rolling replacement does.
func renewed(s Snapshot, ids ...int) Snapshot {
	out := Snapshot{}
	for _, svc := range s.Services {
		eps := []Endpoint{}
		for _, ep := range svc.Endpoints {
			for _, i := range ids {
				if ep.ID == fmt.Sprintf("%s-%d", svc.Name, i) {
					ep.ID += "-v2"
				}
			}
			eps = append(eps, ep)
		}
		out.Services = append(out.Services, Service{Name: svc.Name, Endpoints: eps})
	}
	return out
}

// upTo returns 0, 1, ..., n-1.
func upTo(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// TestRemovalGuardSlicing is the slicing attack of issue 24 on the pure
// core with an injected clock: 12 instances of web deregistered one every
// 300 ms. Without a window each step removes one instance of the last
// applied snapshot and passes; with one, the removals add up against the
// peak of 12, so the 7th is held and at most 6 leave before the hold ends.
func TestRemovalGuardSlicing(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	full := snapOf("web", 12, "api", 4)
	for name, tc := range map[string]struct {
		window      time.Duration
		wantApplied int // removals applied before the first hold
	}{
		"no window: every removal passes":               {0, 12},
		"a window of 1m: six pass, the seventh is held": {time.Minute, 6},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewRemovalGuard(0.5, 30*time.Second, tc.window)
			if v := g.Offer(full, t0); !v.Apply {
				t.Fatal("first snapshot not applied")
			}
			applied, held := 0, false
			var v Verdict
			for i := range 12 {
				at := t0.Add(time.Duration(i+1) * 300 * time.Millisecond)
				v = g.Offer(without(full, "web", upTo(i+1)...), at)
				if v.Apply && !held {
					applied = i + 1
				}
				held = held || v.Held
			}
			if applied != tc.wantApplied {
				t.Fatalf("%d removals applied before a hold, want %d", applied, tc.wantApplied)
			}
			if applied == 12 {
				return
			}
			if !v.Held || v.Service != "web" || v.ServiceRemoved != 12 || v.ServiceTotal != 12 {
				t.Fatalf("last verdict %+v: want held, web losing 12 of 12", v)
			}
			if v := g.Due(v.Until); !v.Apply || !v.Expired || v.Snapshot.EndpointCount() != 4 {
				t.Fatalf("at the end of the hold: %+v", v)
			}
			// the window starts afresh from the applied snapshot: web is back
			// and then loses one instance, applied at once
			back := g.Offer(full, v.Until.Add(time.Second))
			one := g.Offer(without(full, "web", 3), v.Until.Add(2*time.Second))
			if !back.Apply || !one.Apply || one.Held {
				t.Fatalf("after the hold: %+v then %+v", back, one)
			}
		})
	}
}

func TestRemovalGuardWindow(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	sec := func(f float64) time.Time { return t0.Add(time.Duration(f * float64(time.Second))) }
	web := snapOf("web", 12)
	type step struct {
		at    float64
		snap  Snapshot
		apply bool
	}
	for name, tc := range map[string][]step{
		"removals slower than the window pass": func() []step {
			out := []step{{0, web, true}}
			for i := range 11 {
				out = append(out, step{float64(61 * (i + 1)), without(web, "web", upTo(i+1)...), true})
			}
			return out
		}(),
		"the peak ages out of the window": {
			{0, web, true},
			{1, without(web, "web", upTo(6)...), true}, // 6 of 12: not more than half
			{30, without(web, "web", upTo(7)...), false},
			{30.5, without(web, "web", upTo(6)...), true}, // back to 6: the hold is cancelled
			{62, without(web, "web", upTo(9)...), true},   // the peak is 6 now: 3 of 6
		},
		"a rolling replacement keeps the count and is never held": {
			{0, snapOf("web", 4), true},
			{1, renewed(snapOf("web", 4), 0), true},
			{2, renewed(snapOf("web", 4), 0, 1), true},
			{3, renewed(snapOf("web", 4), 0, 1, 2), true},
			{4, renewed(snapOf("web", 4), 0, 1, 2, 3), true},
		},
		"a scale-up and back down in the window is measured from the peak": {
			{0, snapOf("web", 4), true},
			{1, snapOf("web", 10), true},
			{2, snapOf("web", 7), true},
			{3, snapOf("web", 4), false}, // 6 of a peak of 10
		},
		"one instance of a service of one is never held on its own": {
			{0, snapOf("web", 6, "solo", 1), true},
			{1, snapOf("web", 6), true},
			{2, snapOf("web", 6, "solo", 1), true},
		},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewRemovalGuard(0.5, 30*time.Second, time.Minute)
			for i, st := range tc {
				if v := g.Offer(st.snap, sec(st.at)); v.Apply != st.apply {
					t.Fatalf("step %d at %vs: %+v, want apply %v", i, st.at, v, st.apply)
				}
			}
		})
	}
}

// TestGuardSlicingClock runs the slicing attack through the Guard shell
// with an injected clock: what it emits never has fewer than 6 of web's
// 12 instances until the hold ends.
func TestGuardSlicingClock(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	var emitted []Snapshot
	g, err := NewGuard(GuardConfig{Fraction: 0.5, Hold: time.Hour, Window: time.Minute,
		Emit: func(s Snapshot) { emitted = append(emitted, s) }, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	full := snapOf("web", 12)
	g.Observe(full)
	for i := range 12 {
		now = now.Add(300 * time.Millisecond)
		g.Observe(without(full, "web", upTo(i+1)...))
	}
	least := 12
	for _, s := range emitted {
		least = min(least, s.EndpointCount())
	}
	if least != 6 || len(emitted) != 7 {
		t.Fatalf("emitted %d snapshots, the smallest with %d instances; want 7, 6", len(emitted), least)
	}
}
