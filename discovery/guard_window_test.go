package discovery

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
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
// peak of 12, so from the 7th web's removals are held (and api's changes
// still applied) and web never has fewer than 6 instances until the hold
// ends. When web is most of the catalog, the removals are also a
// catalog-wide one from the 9th, and the whole update is held.
func TestRemovalGuardSlicing(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	for name, tc := range map[string]struct {
		others      int // instances of api
		window      time.Duration
		leastWeb    int // fewest web instances applied before a hold ended
		webHeldAt   int // the removal (1-based) from which web's removals are held; 0: never
		wholeHeldAt int // the removal from which the whole update is held; 0: never
	}{
		"no window: every removal passes":                              {12, 0, 0, 0, 0},
		"a window of 1m: six pass, web's are held from the seventh":    {12, time.Minute, 6, 7, 0},
		"web most of the catalog: the whole is held from the ninth on": {4, time.Minute, 6, 7, 9},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewRemovalGuard(0.5, 30*time.Second, tc.window)
			full := snapOf("api", tc.others, "web", 12)
			if v := g.Offer(full, t0); !v.Apply {
				t.Fatal("first snapshot not applied")
			}
			least, webHeldAt, wholeHeldAt := 12, 0, 0
			var v Verdict
			for i := range 12 {
				at := t0.Add(time.Duration(i+1) * 300 * time.Millisecond)
				v = g.Offer(without(full, "web", upTo(i+1)...), at)
				if v.Apply {
					web, _ := v.Snapshot.Service("web")
					least = min(least, len(web.Endpoints))
				}
				if v.HeldServices() > 0 && webHeldAt == 0 {
					webHeldAt = i + 1
				}
				if v.Held && wholeHeldAt == 0 {
					wholeHeldAt = i + 1
				}
			}
			if least != tc.leastWeb || webHeldAt != tc.webHeldAt || wholeHeldAt != tc.wholeHeldAt {
				t.Fatalf("least web instances applied %d, web held from removal %d, the whole from %d; want %d, %d, %d",
					least, webHeldAt, wholeHeldAt, tc.leastWeb, tc.webHeldAt, tc.wholeHeldAt)
			}
			if tc.webHeldAt == 0 {
				return
			}
			if len(v.Services) != 1 || v.Services[0].Name != "web" || v.Services[0].Removed != 12 || v.Services[0].Total != 12 {
				t.Fatalf("last verdict %+v: want web held, losing 12 of 12", v)
			}
			end := v.Next
			if v = g.Due(end); !v.Apply || v.Snapshot.EndpointCount() != tc.others || !v.Next.IsZero() {
				t.Fatalf("at the end of the hold: %+v", v)
			}
			// the window starts afresh from the applied snapshot: web is back
			// and then loses one instance, applied at once
			back := g.Offer(full, end.Add(time.Second))
			one := g.Offer(without(full, "web", 3), end.Add(2*time.Second))
			if !back.Apply || !one.Apply || one.Held || one.HeldServices() != 0 {
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
// 12 instances until the hold ends, while api's new instance, arriving
// during web's hold, is emitted at once; the metrics say one service is
// held and nothing is held whole; the hold's timer applies web's
// removals.
func TestGuardSlicingClock(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	var emitted []Snapshot
	m := NewMetrics(nil)
	g, err := NewGuard(GuardConfig{Fraction: 0.5, Hold: time.Hour, Window: time.Minute, Metrics: m,
		Emit: func(s Snapshot) { emitted = append(emitted, s) }, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	full := snapOf("api", 12, "web", 12)
	g.Observe(full)
	for i := range 12 {
		now = now.Add(300 * time.Millisecond)
		s := without(full, "web", upTo(i+1)...)
		if i >= 8 {
			s = snapOf("api", 13) // api scales up during web's hold
			s.Services = append(s.Services, Service{Name: "web", Endpoints: without(full, "web", upTo(i+1)...).Services[1].Endpoints})
		}
		g.Observe(s)
		if i == 8 {
			if api, _ := emitted[len(emitted)-1].Service("api"); len(api.Endpoints) != 13 {
				t.Fatalf("api's new instance not emitted at once during web's hold: %d instances", len(api.Endpoints))
			}
		}
	}
	least := 12
	for _, s := range emitted {
		web, _ := s.Service("web")
		least = min(least, len(web.Endpoints))
	}
	if least != 6 || len(emitted) != 13 {
		t.Fatalf("emitted %d snapshots, the fewest web instances %d; want 13, 6", len(emitted), least)
	}
	held := func(scope string) float64 {
		return metricValue(t, map[string]prometheus.Gauge{"service": m.HeldServices, "catalog": m.Held}[scope])
	}
	holds := func(scope string) float64 {
		return metricValue(t, map[string]prometheus.Counter{"service": m.ServiceHolds, "catalog": m.Holds}[scope])
	}
	if held("service") != 1 || held("catalog") != 0 || holds("service") != 1 || holds("catalog") != 0 {
		t.Fatalf("held service %v catalog %v, holds service %v catalog %v; want 1 0 1 0",
			held("service"), held("catalog"), holds("service"), holds("catalog"))
	}
	// the hold's timer fires (run here, at the deadline)
	g.mu.Lock()
	now, n := g.timerAt, g.timerN
	g.mu.Unlock()
	g.tick(n)
	last := emitted[len(emitted)-1]
	if web, _ := last.Service("web"); len(web.Endpoints) != 0 || last.EndpointCount() != 13 || held("service") != 0 {
		t.Fatalf("after the hold: %d web instances, %d in all, held %v; want 0, 13, 0", len(web.Endpoints), last.EndpointCount(), held("service"))
	}
}
