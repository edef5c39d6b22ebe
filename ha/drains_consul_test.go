package ha

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/xds-server/xds-server/consulstate"
	"github.com/xds-server/xds-server/discovery"
	"github.com/xds-server/xds-server/drain"
	"github.com/xds-server/xds-server/e2e/harness"
)

// drainPropagation is the bound of issue 15: a drain through one replica
// is applied by the others within 1 s.
const drainPropagation = time.Second

// testWait bounds the waits that are not the assertion (a loaded 2-core
// machine under -race).
const testWait = 20 * time.Second

var testWorld = discovery.Snapshot{Services: []discovery.Service{{Name: "api", Endpoints: []discovery.Endpoint{
	{ID: "a", Address: "10.0.0.1", Port: 80, Health: discovery.HealthHealthy, Node: "n1"},
	{ID: "b", Address: "10.0.0.2", Port: 80, Health: discovery.HealthHealthy, Node: "n2"},
}}}}

// replica is one "xds-server": a drain.Manager over a DrainStore.
type replica struct {
	m       *drain.Manager
	store   *DrainStore
	metrics *Metrics
	stop    func()

	mu      sync.Mutex
	last    discovery.Snapshot
	emitted bool
	kick    chan struct{}
}

func startReplica(t *testing.T, client *api.Client, prefix string) *replica {
	t.Helper()
	return startReplicaWith(t, client, prefix, nil, drain.Policy{}, testWorld)
}

// startReplicaWith starts a replica whose drain manager has policy, reads
// the clock now (nil: the wall clock) and gets world as its first
// discovery snapshot.
func startReplicaWith(t *testing.T, client *api.Client, prefix string, now func() time.Time, policy drain.Policy, world discovery.Snapshot) *replica {
	t.Helper()
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := NewDrainStore(DrainStoreConfig{Client: client, Layout: Layout{Prefix: prefix}, Metrics: m, Logger: log, Now: now,
		Watch: consulstate.WatchConfig{BackoffBase: 20 * time.Millisecond, BackoffMax: 100 * time.Millisecond, MinInterval: time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	r := &replica{store: st, metrics: m, kick: make(chan struct{}, 1)}
	r.m, err = drain.New(drain.Config{Store: st, Registerer: prometheus.NewRegistry(), Now: now, Policy: policy,
		Emit: func(s discovery.Snapshot) {
			r.mu.Lock()
			r.last, r.emitted = s, true
			r.mu.Unlock()
			select {
			case r.kick <- struct{}{}:
			default:
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	r.m.Observe(world)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.m.Watch(ctx) }()
	r.stop = sync.OnceFunc(func() { cancel(); <-done; r.m.Close() })
	t.Cleanup(r.stop)
	return r
}

// health returns endpoint id's health in the last snapshot emitted.
func (r *replica) health(id string) (discovery.Health, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.emitted {
		return 0, false
	}
	for _, ep := range r.last.Services[0].Endpoints {
		if ep.ID == id {
			return ep.Health, true
		}
	}
	return 0, false
}

// await waits until endpoint id is served with health h and returns how
// long that took; it fails the test after limit.
func (r *replica) await(t *testing.T, id string, h discovery.Health, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	for {
		if got, ok := r.health(id); ok && got == h {
			return time.Since(start)
		}
		select {
		case <-r.kick:
		case <-deadline.C:
			got, ok := r.health(id)
			t.Fatalf("endpoint %s not %v within %v (now %v, emitted %v)", id, h, limit, got, ok)
		}
	}
}

func TestDrainsSharedThroughConsul(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: real Consul")
	}
	agent := harness.Consul(t)
	const prefix = "shared/"
	r1, r2 := startReplica(t, agent.Client(), prefix), startReplica(t, agent.Client(), prefix)
	r1.await(t, "a", discovery.HealthHealthy, testWait)
	r2.await(t, "a", discovery.HealthHealthy, testWait)

	start := time.Now()
	set, err := r1.m.Set(drain.Target{Service: "api", Endpoint: "a"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if h, _ := r1.health("a"); h != discovery.HealthDraining {
		t.Errorf("r1 serves a %v when its Set returns, want draining (read your writes)", h)
	}
	r2.await(t, "a", discovery.HealthDraining, drainPropagation)
	t.Logf("drain through r1 applied by r2 %v after the call", time.Since(start))
	if st := r2.m.State(); len(st.Admin) != 1 || st.Admin[0].Target != set.Target || !st.Admin[0].Since.Equal(set.Since) || !st.Admin[0].Until.Equal(set.Until) {
		t.Errorf("r2 lists %+v, want %+v", st.Admin, set)
	}
	pair, _, err := agent.Client().KV().Get(prefix+"drains/endpoint/api/a", nil)
	if err != nil || pair == nil {
		t.Fatalf("drain key: %v %v", pair, err)
	}
	if stored, err := decodeDrain(pair.Value); err != nil || !stored.Until.Equal(set.Since.Add(time.Hour)) {
		t.Errorf("stored %s (%v): want the absolute expiry %v", pair.Value, err, set.Since.Add(time.Hour))
	}
	if got := testutil.ToFloat64(r1.metrics.Writes.WithLabelValues("drain_put")); got != 1 {
		t.Errorf("r1 xds_ha_consul_writes_total{kind=drain_put} = %v, want 1", got)
	}

	// A node drain through r2, an undrain through r2 of r1's drain.
	if _, err := r2.m.Set(drain.Target{Node: "n2"}, 0); err != nil {
		t.Fatal(err)
	}
	r1.await(t, "b", discovery.HealthDraining, drainPropagation)
	if deleted, err := r2.m.Delete(drain.Target{Service: "api", Endpoint: "a"}); err != nil || !deleted {
		t.Fatalf("Delete through r2 = %v, %v; want true (r1's drain)", deleted, err)
	}
	r1.await(t, "a", discovery.HealthHealthy, drainPropagation)

	// Both replicas restart: the drain in force comes back before anything
	// is served.
	r1.stop()
	r2.stop()
	r3, r4 := startReplica(t, agent.Client(), prefix), startReplica(t, agent.Client(), prefix)
	for _, r := range []*replica{r3, r4} {
		r.await(t, "b", discovery.HealthDraining, testWait)
		if h, _ := r.health("a"); h != discovery.HealthHealthy {
			t.Errorf("after restart a = %v, want healthy (undrained)", h)
		}
	}
	if p := (DebugConfig{Drains: r3.store.Seen}).Page(); len(p.Drains.Drains) != 1 || p.Drains.Drains[0].Node != "n2" {
		t.Errorf("/debug/ha drains = %+v", p.Drains)
	}
}

func TestDrainsConsulOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: real Consul")
	}
	agent := harness.Consul(t)
	const prefix = "outage/"
	r1, r2 := startReplica(t, agent.Client(), prefix), startReplica(t, agent.Client(), prefix)
	r1.await(t, "a", discovery.HealthHealthy, testWait)
	r2.await(t, "a", discovery.HealthHealthy, testWait)
	if _, err := r1.m.Set(drain.Target{Service: "api", Endpoint: "a"}, 0); err != nil {
		t.Fatal(err)
	}
	r2.await(t, "a", discovery.HealthDraining, drainPropagation)

	agent.Stop()
	_, err := r1.m.Set(drain.Target{Service: "api", Endpoint: "b"}, 0)
	if !errors.Is(err, drain.ErrUnavailable) {
		t.Fatalf("Set with Consul down = %v, want ErrUnavailable", err)
	}
	rec := httptest.NewRecorder()
	r2.m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodDelete, "/v1/drain?service=api&endpoint=a", nil))
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("DELETE with Consul down = %d %s, want 503", rec.Code, rec.Body)
	}
	for i, r := range []*replica{r1, r2} {
		if h, _ := r.health("a"); h != discovery.HealthDraining {
			t.Errorf("r%d: a = %v during the outage, want still draining", i+1, h)
		}
		if h, _ := r.health("b"); h != discovery.HealthHealthy {
			t.Errorf("r%d: b = %v, want healthy (the refused drain changed nothing)", i+1, h)
		}
		if st := r.m.State(); len(st.Admin) != 1 {
			t.Errorf("r%d lists %+v during the outage, want the known drain", i+1, st.Admin)
		}
	}

	// Consul back (a -dev agent: its KV is empty again). The drains known
	// are written back, and drain calls work again.
	agent.Start()
	deadline := time.Now().Add(testWait)
	for {
		_, err = r1.m.Set(drain.Target{Service: "api", Endpoint: "b"}, 0)
		if err == nil || time.Now().After(deadline) {
			break
		}
		r1.await(t, "a", discovery.HealthDraining, 0) // still in force
		select {
		case <-time.After(50 * time.Millisecond): // retry pace of a caller; Consul's readiness is not observable here
		case <-r1.kick:
		}
	}
	if err != nil {
		t.Fatalf("Set after Consul came back: %v", err)
	}
	r2.await(t, "b", discovery.HealthDraining, drainPropagation)
	for i, r := range []*replica{r1, r2} {
		if h, _ := r.health("a"); h != discovery.HealthDraining {
			t.Errorf("r%d: a = %v after Consul came back, want draining", i+1, h)
		}
	}
	keys, _, err := agent.Client().KV().Keys(prefix+"drains/", "", nil)
	if err != nil || strings.Join(keys, ",") != prefix+"drains/_epoch,"+prefix+"drains/endpoint/api/a,"+prefix+"drains/endpoint/api/b" {
		t.Errorf("KV after Consul came back = %v (%v), want both drains", keys, err)
	}
}

// TestDrainPropagation measures how long a drain (and an undrain) through
// one of three replicas takes to be applied by the two others, against a
// real Consul, and checks the p99 against issue 15's 1 s. The watchers'
// MinInterval is 1 ms here, so that back-to-back rounds measure Consul and
// the watch, not the rate limit (DefaultMinInterval, 50 ms, bounds how
// often a replica re-reads under a stream of changes).
func TestDrainPropagation(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: real Consul")
	}
	agent := harness.Consul(t)
	const prefix = "propagation/"
	rs := []*replica{startReplica(t, agent.Client(), prefix), startReplica(t, agent.Client(), prefix), startReplica(t, agent.Client(), prefix)}
	for _, r := range rs {
		r.await(t, "a", discovery.HealthHealthy, testWait)
	}
	const rounds = 25
	var took []time.Duration
	tgt := drain.Target{Service: "api", Endpoint: "a"}
	for i := range rounds {
		from, others := rs[i%3], []*replica{rs[(i+1)%3], rs[(i+2)%3]}
		for _, step := range []struct {
			call func() error
			want discovery.Health
		}{
			{func() error { _, err := from.m.Set(tgt, time.Hour); return err }, discovery.HealthDraining},
			{func() error { _, err := from.m.Delete(tgt); return err }, discovery.HealthHealthy},
		} {
			start := time.Now()
			if err := step.call(); err != nil {
				t.Fatal(err)
			}
			var slowest time.Duration
			for _, o := range others {
				o.await(t, "a", step.want, testWait)
				slowest = max(slowest, time.Since(start))
			}
			took = append(took, slowest)
		}
	}
	slices.Sort(took)
	p50, p99 := took[len(took)/2], took[(len(took)*99+99)/100-1]
	t.Logf("drain/undrain through one replica applied by the two others: n=%d p50=%v p99=%v max=%v", len(took), p50, p99, took[len(took)-1])
	if p99 > drainPropagation {
		t.Errorf("p99 %v, want under %v", p99, drainPropagation)
	}
}
