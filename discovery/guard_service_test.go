package discovery

import (
	"testing"
	"time"
)

// TestRemovalGuardKeepsHeldInstances: web loses 4 of its 6 instances in
// the same update that turns web-0 unhealthy, adds web-9, adds an api
// instance and a new service db. Only web's removals are held: the
// applied snapshot has web-0 as offered, web-9, api's and db's new
// instances, and web-2..web-5 as they were applied last; a later update
// that turns web-0 healthy again is applied at once, web still held;
// at the deadline web's removals are applied.
func TestRemovalGuardKeepsHeldInstances(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	g := NewRemovalGuard(0.5, 30*time.Second, 5*time.Minute)
	full := snapOf("api", 2, "web", 6)
	full.Services[1].Endpoints[3].Health = HealthDegraded // web-3, kept as it was
	if v := g.Offer(full, t0); !v.Apply {
		t.Fatal("first snapshot not applied")
	}
	sliced := snapOf("api", 3, "db", 1, "web", 2)
	web := &sliced.Services[2]
	web.Endpoints[0].Health = HealthUnhealthy
	web.Endpoints = append(web.Endpoints, Endpoint{ID: "web-9", Address: "10.0.0.9", Port: 99, Health: HealthHealthy})

	v := g.Offer(sliced, t0.Add(time.Second))
	if !v.Apply || v.Held || len(v.Services) != 1 || v.Services[0] != (ServiceHold{"web", HoldStarted, 4, 6, t0.Add(31 * time.Second)}) {
		t.Fatalf("verdict %+v: want applied, web's removals (4 of 6) held until 31s", v)
	}
	wantIDs(t, v.Snapshot, "api", "api-0", "api-1", "api-2")
	wantIDs(t, v.Snapshot, "db", "db-0")
	wantIDs(t, v.Snapshot, "web", "web-0", "web-1", "web-2", "web-3", "web-4", "web-5", "web-9")
	sameAs(t, v.Snapshot, sliced, "web", "web-0", "web-1", "web-9")
	sameAs(t, v.Snapshot, full, "web", "web-2", "web-3", "web-4", "web-5")

	healed := snapOf("api", 3, "db", 1, "web", 2)
	healed.Services[2].Endpoints = append(healed.Services[2].Endpoints, web.Endpoints[2])
	v = g.Offer(healed, t0.Add(10*time.Second))
	if !v.Apply || len(v.Services) != 1 || v.Services[0].Event != HoldKept || !v.Next.Equal(t0.Add(31*time.Second)) {
		t.Fatalf("verdict %+v: want applied, web still held until 31s", v)
	}
	sameAs(t, v.Snapshot, healed, "web", "web-0")
	sameAs(t, v.Snapshot, full, "web", "web-3")

	v = g.Due(v.Next)
	if !v.Apply || v.HeldServices() != 0 || v.Services[0].Event != HoldExpired {
		t.Fatalf("at the deadline: %+v", v)
	}
	wantIDs(t, v.Snapshot, "web", "web-0", "web-1", "web-9")
}

// TestRemovalGuardHeldServiceVanishes: a service of 3 that vanishes from
// the update while another service changes keeps its 3 instances; the
// other change is applied.
func TestRemovalGuardHeldServiceVanishes(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	g := NewRemovalGuard(0.5, 30*time.Second, 0)
	g.Offer(snapOf("api", 8, "web", 3), t0)
	v := g.Offer(snapOf("api", 9), t0.Add(time.Second))
	if !v.Apply || v.HeldServices() != 1 {
		t.Fatalf("verdict %+v: want applied, web held", v)
	}
	wantIDs(t, v.Snapshot, "web", "web-0", "web-1", "web-2")
	if api, _ := v.Snapshot.Service("api"); len(api.Endpoints) != 9 || len(v.Snapshot.Services) != 2 {
		t.Fatalf("applied %+v: want api's 9 and web's 3", v.Snapshot)
	}
}

// wantIDs fails unless service name of s has exactly the endpoint ids.
func wantIDs(t *testing.T, s Snapshot, name string, ids ...string) {
	t.Helper()
	svc, _ := s.Service(name)
	var got []string
	for _, ep := range svc.Endpoints {
		got = append(got, ep.ID)
	}
	if len(got) != len(ids) {
		t.Fatalf("%s: endpoints %v, want %v", name, got, ids)
	}
	for i := range ids {
		if got[i] != ids[i] {
			t.Fatalf("%s: endpoints %v, want %v", name, got, ids)
		}
	}
}

// sameAs fails unless the endpoints ids of service name are in s as in
// from.
func sameAs(t *testing.T, s, from Snapshot, name string, ids ...string) {
	t.Helper()
	a, _ := instances(s)
	b, _ := instances(from)
	for _, id := range ids {
		if got, want := a[name][id], b[name][id]; !got.Equal(want) {
			t.Errorf("%s/%s: %+v, want %+v", name, id, got, want)
		}
	}
}

// TestGuardServiceDeadlines runs two service holds through the Guard
// shell with an injected clock: its timer is set to the earliest
// deadline, moves to the next when the first hold is cancelled, and the
// tick at a deadline applies that service's removals only.
func TestGuardServiceDeadlines(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	now := t0
	var emitted []Snapshot
	m := NewMetrics(nil)
	g, err := NewGuard(GuardConfig{Fraction: 0.5, Hold: 30 * time.Second, Metrics: m,
		Emit: func(s Snapshot) { emitted = append(emitted, s) }, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	timer := func() (time.Time, uint64) {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.timerAt, g.timerN
	}
	count := func(name string) int {
		svc, _ := emitted[len(emitted)-1].Service(name)
		return len(svc.Endpoints)
	}
	g.Observe(snapOf("a", 4, "b", 4, "c", 8))
	now = t0.Add(time.Second)
	g.Observe(snapOf("a", 1, "b", 4, "c", 8)) // a held until 31s
	now = t0.Add(5 * time.Second)
	g.Observe(snapOf("a", 1, "b", 1, "c", 8)) // b held until 35s
	if at, _ := timer(); !at.Equal(t0.Add(31*time.Second)) || metricValue(t, m.HeldServices) != 2 {
		t.Fatalf("timer at %v, held %v; want 31s, 2", at.Sub(t0), metricValue(t, m.HeldServices))
	}
	now = t0.Add(6 * time.Second)
	g.Observe(snapOf("a", 4, "b", 1, "c", 9)) // a is back: cancelled
	if at, _ := timer(); !at.Equal(t0.Add(35*time.Second)) || count("a") != 4 || count("b") != 4 || count("c") != 9 {
		t.Fatalf("timer at %v, a %d b %d c %d; want 35s, 4 4 9", at.Sub(t0), count("a"), count("b"), count("c"))
	}
	at, n := timer()
	now = at
	g.tick(n - 1) // a stale timer's tick does nothing
	if count("b") != 4 {
		t.Fatal("a stale tick applied b's removals")
	}
	g.tick(n)
	if at, _ := timer(); !at.IsZero() || count("b") != 1 || metricValue(t, m.HeldServices) != 0 {
		t.Fatalf("after b's deadline: timer %v, b %d; want none, 1", at, count("b"))
	}
	if metricValue(t, m.ServiceHolds) != 2 || metricValue(t, m.Holds) != 0 {
		t.Fatal("holds not counted per service")
	}
}
