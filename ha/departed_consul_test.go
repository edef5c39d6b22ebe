package ha

import (
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/xds-server/xds-server/consulstate"
	"github.com/xds-server/xds-server/discovery"
	"github.com/xds-server/xds-server/drain"
	"github.com/xds-server/xds-server/e2e/harness"
)

// testClock is the clock the replicas of a test share, moved by hand.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *testClock) Set(t time.Time) { c.mu.Lock(); defer c.mu.Unlock(); c.now = t }

const departWindow = time.Hour

func departWorld(ids ...string) discovery.Snapshot {
	var eps []discovery.Endpoint
	for _, e := range testWorld.Services[0].Endpoints {
		for _, id := range ids {
			if e.ID == id {
				eps = append(eps, e)
			}
		}
	}
	return discovery.Snapshot{Services: []discovery.Service{{Name: "api", Endpoints: eps}}}
}

// startDepartReplica is startReplica with a drain window, a test clock and
// world as its first discovery snapshot.
func startDepartReplica(t *testing.T, client *api.Client, prefix string, clock *testClock, world discovery.Snapshot) *replica {
	t.Helper()
	return startReplicaWith(t, client, prefix, clock.Now,
		drain.Policy{Window: func(string) time.Duration { return departWindow }}, world)
}

// snapshot returns the last snapshot emitted.
func (r *replica) snapshot() discovery.Snapshot {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

// awaitAbsent waits until endpoint id is not served.
func (r *replica) awaitAbsent(t *testing.T, id string) {
	t.Helper()
	deadline := time.NewTimer(testWait)
	defer deadline.Stop()
	for {
		if _, ok := r.health(id); !ok {
			return
		}
		select {
		case <-r.kick:
		case <-deadline.C:
			t.Fatalf("endpoint %s still served after %v", id, testWait)
		}
	}
}

// awaitKey waits (blocking queries) until key exists (want) or not, and
// returns it.
func awaitKey(t *testing.T, kv *api.KV, key string, want bool) *api.KVPair {
	t.Helper()
	var index uint64
	deadline := time.Now().Add(testWait)
	for time.Now().Before(deadline) {
		p, meta, err := kv.Get(key, &api.QueryOptions{WaitIndex: index, WaitTime: time.Until(deadline)})
		if err != nil {
			t.Fatal(err)
		}
		if (p != nil) == want {
			return p
		}
		index = meta.LastIndex
	}
	t.Fatalf("key %s present=%v not reached within %v", key, want, testWait)
	return nil
}

// awaitSeen waits until r's watch has read the departure key: a read
// that changes the departures re-applies and emits (a kick).
func (r *replica) awaitSeen(t *testing.T, kv *api.KV, key string) {
	t.Helper()
	p := awaitKey(t, kv, key, true)
	deadline := time.NewTimer(testWait)
	defer deadline.Stop()
	for {
		r.store.mu.Lock()
		idx := r.store.departedIdx[key]
		r.store.mu.Unlock()
		if idx == p.ModifyIndex {
			return
		}
		select {
		case <-r.kick:
		case <-deadline.C:
			t.Fatalf("replica did not read %s within %v", key, testWait)
		}
	}
}

func storedUntil(t *testing.T, p *api.KVPair) time.Time {
	t.Helper()
	d, err := decodeDeparted(p.Value)
	if err != nil {
		t.Fatal(err)
	}
	return d.Until
}

func TestDepartedSharedThroughConsul(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: real Consul")
	}
	agent := harness.Consul(t)
	kv := agent.Client().KV()
	const prefix = "departed/"
	key := Layout{Prefix: prefix}.DepartedKey("api", "b")
	t0 := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	clock := &testClock{now: t0}

	// A sees b depart; B starts afterwards, never having seen b.
	a := startDepartReplica(t, agent.Client(), prefix, clock, departWorld("a", "b"))
	a.await(t, "b", discovery.HealthHealthy, testWait)
	clock.Set(t0.Add(time.Second))
	a.m.Observe(departWorld("a"))
	a.await(t, "b", discovery.HealthDraining, 0)
	if got, want := storedUntil(t, awaitKey(t, kv, key, true)), t0.Add(time.Second+departWindow); !got.Equal(want) {
		t.Errorf("stored removal time %v, want %v (A's departure)", got, want)
	}
	clock.Set(t0.Add(5 * time.Second))
	b := startDepartReplica(t, agent.Client(), prefix, clock, departWorld("a"))
	b.await(t, "b", discovery.HealthDraining, testWait)
	a.awaitSeen(t, kv, key)
	a.m.Observe(departWorld("a"))
	if seen := b.store.Seen().Departed; len(seen) != 1 || seen[0].Endpoint.ID != "b" {
		t.Errorf("/debug/ha departed on B = %+v, want b", seen)
	}
	if sa, sb := a.snapshot(), b.snapshot(); !reflect.DeepEqual(sa, sb) {
		t.Errorf("snapshots differ:\nA %+v\nB %+v", sa, sb)
	}

	// b registers again: both serve it, the key is deleted.
	clock.Set(t0.Add(10 * time.Second))
	a.m.Observe(departWorld("a", "b"))
	b.m.Observe(departWorld("a", "b"))
	awaitKey(t, kv, key, false)
	for i, r := range []*replica{a, b} {
		if h, _ := r.health("b"); h != discovery.HealthHealthy {
			t.Errorf("replica %d: b = %v after it came back, want healthy", i, h)
		}
	}

	// Both see b depart, A 10 s before B: A's removal time wins on both.
	t1 := t0.Add(20 * time.Second)
	clock.Set(t1)
	a.m.Observe(departWorld("a"))
	awaitKey(t, kv, key, true)
	b.awaitSeen(t, kv, key)
	clock.Set(t1.Add(10 * time.Second))
	b.m.Observe(departWorld("a"))
	if got := storedUntil(t, awaitKey(t, kv, key, true)); !got.Equal(t1.Add(departWindow)) {
		t.Errorf("stored removal time %v, want A's %v", got, t1.Add(departWindow))
	}
	clock.Set(t1.Add(departWindow - time.Millisecond))
	for _, r := range []*replica{a, b} {
		r.m.Observe(departWorld("a"))
		r.await(t, "b", discovery.HealthDraining, 0)
	}
	clock.Set(t1.Add(departWindow))
	for _, r := range []*replica{a, b} {
		r.m.Observe(departWorld("a"))
		r.awaitAbsent(t, "b") // B's own window would end 10 s later
	}
	if sa, sb := a.snapshot(), b.snapshot(); !reflect.DeepEqual(sa, sb) {
		t.Errorf("snapshots differ after the window:\nA %+v\nB %+v", sa, sb)
	}
	// The next read of the folder deletes the expired departure (CAS).
	if _, err := a.m.Set(drain.Target{Service: "api", Endpoint: "a"}, 0); err != nil {
		t.Fatal(err)
	}
	awaitKey(t, kv, key, false)
}

// TestDepartedConsulOutage: with Consul unreachable a departure is served
// from the replica's own memory at once (discovery never waits for
// Consul), the failed write is counted, and the window still ends.
func TestDepartedConsulOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: real Consul")
	}
	agent := harness.Consul(t)
	t0 := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	clock := &testClock{now: t0}
	a := startDepartReplica(t, agent.Client(), "departed-outage/", clock, departWorld("a", "b"))
	a.await(t, "b", discovery.HealthHealthy, testWait)
	agent.Stop()

	start := time.Now()
	a.m.Observe(departWorld("a"))
	if took := time.Since(start); took > time.Second {
		t.Errorf("Observe took %v with Consul down, want no wait for Consul", took)
	}
	a.await(t, "b", discovery.HealthDraining, 0)
	deadline := time.Now().Add(testWait)
	for testutil.ToFloat64(a.metrics.Errors.WithLabelValues("departed_put")) < 1 {
		if time.Now().After(deadline) {
			t.Fatalf("no departed_put error counted within %v", testWait)
		}
		select {
		case <-time.After(20 * time.Millisecond): // the write's failure is observable only through the counter
		case <-a.kick:
		}
	}
	clock.Set(t0.Add(departWindow))
	a.m.Observe(departWorld("a"))
	a.awaitAbsent(t, "b")
}

func manyWorld(n int) discovery.Snapshot {
	eps := make([]discovery.Endpoint, n)
	for i := range eps {
		eps[i] = discovery.Endpoint{ID: fmt.Sprintf("e%03d", i), Address: "10.0.1.1", Port: 1000 + i, Health: discovery.HealthHealthy, Node: "n1"}
	}
	return discovery.Snapshot{Services: []discovery.Service{{Name: "api", Endpoints: eps}}}
}

// TestDepartedBatched: a mass departure is written in few transactions, a
// replica started afterwards serves every departed endpoint DRAINING (of
// a service its discovery lists), and
// a re-registration followed at once by a new departure leaves the new
// departure stored.
func TestDepartedBatched(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: real Consul")
	}
	agent := harness.Consul(t)
	kv := agent.Client().KV()
	const prefix, n = "departed-batch/", 200
	l := Layout{Prefix: prefix}
	t0 := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	clock := &testClock{now: t0}
	a := startDepartReplica(t, agent.Client(), prefix, clock, manyWorld(n))
	a.await(t, "e000", discovery.HealthHealthy, testWait)
	clock.Set(t0.Add(time.Second))
	a.m.Observe(discovery.Snapshot{})
	var index uint64
	for deadline := time.Now().Add(testWait); ; {
		keys, meta, err := kv.Keys(l.Departed(), "", &api.QueryOptions{WaitIndex: index, WaitTime: time.Until(deadline)})
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d departure keys, want %d", len(keys), n)
		}
		index = meta.LastIndex
	}
	w := a.metrics.Writes
	writes := testutil.ToFloat64(w.WithLabelValues("departed_txn")) + testutil.ToFloat64(w.WithLabelValues("departed_put"))
	t.Logf("%d departures written in %v Consul writes", n, writes)
	// Full transactions would take ceil(200/64) = 4; the writer may start
	// while departures still queue, so some go partly filled (6 seen
	// once in CI): the bound is twice that plus one, far from one write
	// per departure.
	if most := 2*((n+consulstate.MaxTxnOps-1)/consulstate.MaxTxnOps) + 1; writes > float64(most) {
		t.Errorf("%v writes for %d departures, want at most %d (transactions of %d)", writes, n, most, consulstate.MaxTxnOps)
	}
	// B starts after the departures with api still listed (without
	// instances): it did not see them leave, they left before it started
	b := startDepartReplica(t, agent.Client(), prefix, clock, discovery.Snapshot{Services: []discovery.Service{{Name: "api"}}})
	b.await(t, "e000", discovery.HealthDraining, testWait)
	a.awaitSeen(t, kv, l.DepartedKey("api", "e000"))
	if sa, sb := a.snapshot(), b.snapshot(); !reflect.DeepEqual(sa, sb) || len(sb.Services[0].Endpoints) != n {
		t.Errorf("snapshots differ or miss departures: A %d, B %d endpoints", len(sa.Services[0].Endpoints), len(sb.Services[0].Endpoints))
	}

	// e000 comes back and leaves again at once (one batch: delete, create).
	key := l.DepartedKey("api", "e000")
	clock.Set(t0.Add(time.Minute))
	one := discovery.Snapshot{Services: []discovery.Service{{Name: "api", Endpoints: manyWorld(1).Services[0].Endpoints}}}
	a.m.Observe(one)
	clock.Set(t0.Add(2 * time.Minute))
	a.m.Observe(discovery.Snapshot{})
	deadline := time.Now().Add(testWait)
	index = 0
	for {
		p, meta, err := kv.Get(key, &api.QueryOptions{WaitIndex: index, WaitTime: time.Until(deadline)})
		if err != nil {
			t.Fatal(err)
		}
		if p != nil && storedUntil(t, p).Equal(t0.Add(2*time.Minute+departWindow)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("e000's new departure not stored within %v (now %v)", testWait, p)
		}
		index = meta.LastIndex
	}
}
