package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/xds-server/xds-server/e2e/harness"
)

const (
	haWInterval  = 500 * time.Millisecond // --ha.publish_interval
	haWLockDelay = 2 * time.Second        // --ha.leader_lock_delay
	haWAliveTTL  = 3 * time.Second        // ha.DefaultAliveTTL: a killed leader's check goes critical within it
	haWService   = "echo"
)

// haWeightsEnv is three real replicas sharing one real Consul with
// global weights from POST /v1/load, and one raw ADS node per replica
// (the same node id on each: same subset index, same resources).
type haWeightsEnv struct {
	consul   *harness.ConsulAgent
	backends []*harness.Backend
	srvs     []*harness.Server
	obs      []*claObserver
	notify   chan struct{}
	alive    []bool // by replica: not killed
}

func startHAWeights(t *testing.T) *haWeightsEnv {
	t.Helper()
	e := &haWeightsEnv{consul: harness.Consul(t), notify: make(chan struct{}, 1)}
	e.backends = startEcho(t, 3)
	for _, b := range e.backends { // in the agent's config: they survive its restart
		e.consul.RegisterFile(t, api.AgentServiceRegistration{ID: b.ID, Name: haWService, Address: b.Host, Port: b.Port,
			Check: &api.AgentServiceCheck{CheckID: "ttl-" + b.ID, TTL: "10m", Status: api.HealthPassing}})
	}
	cfg := filepath.Join(t.TempDir(), "xds-server.yaml")
	body := `services:
  echo: { weights: { enabled: true, mode: global, sources: [http] } }
weights: { blackout_period: 0s, smoothing: 1, update_period: 50ms, min_push_interval: 50ms }
`
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	args := append(haArgs("e2e-ha-weights/"), "--config", cfg,
		"--ha.publish_interval", haWInterval.String(), "--ha.leader_lock_delay", haWLockDelay.String())
	for i := range 3 {
		srv := startServer(t, e.consul, args...)
		e.srvs = append(e.srvs, srv)
		e.obs = append(e.obs, startCLAObserver(t, srv, string(rune('A'+i)), "ha-weights-node", haWService, e.notify))
		e.alive = append(e.alive, true)
	}
	return e
}

// util is the utilization of each backend, by id.
func (e *haWeightsEnv) util(us ...float64) map[string]float64 {
	out := map[string]float64{}
	for i, u := range us {
		out[e.backends[i].ID] = u
	}
	return out
}

// shares are the weight shares by address for utils at equal qps
// (weight = qps / utilization).
func (e *haWeightsEnv) shares(us ...float64) map[string]float64 {
	total := 0.0
	for _, u := range us {
		total += 1 / u
	}
	out := map[string]float64{}
	for i, u := range us {
		out[e.backends[i].Addr()] = 1 / u / total
	}
	return out
}

// living are the observers and servers of the replicas not killed.
func (e *haWeightsEnv) living() ([]*claObserver, []*harness.Server) {
	var obs []*claObserver
	var srvs []*harness.Server
	for i, ok := range e.alive {
		if ok {
			obs, srvs = append(obs, e.obs[i]), append(srvs, e.srvs[i])
		}
	}
	return obs, srvs
}

// haStatus is /debug/ha of srv.
type haStatus struct {
	Replica   string `json:"replica"`
	Leader    string `json:"leader"`
	IsLeader  bool   `json:"is_leader"`
	Summaries struct {
		PublishedBytes int `json:"published_bytes"`
	} `json:"summaries"`
}

// leaderIndex polls the replicas' /debug/ha until one of the living says
// it leads; it returns its index.
func (e *haWeightsEnv) leaderIndex(t *testing.T, within time.Duration) int {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		for i, srv := range e.srvs {
			var st haStatus
			if e.alive[i] && tryGetJSON(srv.AdminURL("/debug/ha"), &st) && st.IsLeader {
				return i
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no replica leads the weights within %v", within)
		}
		time.Sleep(20 * time.Millisecond) // polling external processes
	}
}

// haWrites is the sum of srv's xds_ha_consul_writes_total over its kinds.
func haWrites(t *testing.T, srv *harness.Server) float64 {
	t.Helper()
	_, body := adminGet(t, srv, "/metrics", "")
	sum := 0.0
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, "xds_ha_consul_writes_total{") {
			f, _ := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			sum += f
		}
	}
	return sum
}

// measureWrites reports each replica's Consul writes per second and
// bytes per publish over window (a measurement, not an awaited event).
func (e *haWeightsEnv) measureWrites(t *testing.T, window time.Duration) {
	t.Helper()
	before := make([]float64, len(e.srvs))
	for i, srv := range e.srvs {
		before[i] = haWrites(t, srv)
	}
	time.Sleep(window) // the measurement window
	for i, srv := range e.srvs {
		rate := (haWrites(t, srv) - before[i]) / window.Seconds()
		var st haStatus
		getJSON(t, srv.AdminURL("/debug/ha"), &st)
		t.Logf("replica %c: %.2f Consul writes/s over %v (publish interval %v), %d bytes per published summary",
			'A'+i, rate, window, haWInterval, st.Summaries.PublishedBytes)
		if limit := 1/haWInterval.Seconds() + 0.5; rate > limit {
			t.Errorf("replica %c made %.2f Consul writes/s, want at most one per publish interval (+0.5/s)", 'A'+i, rate)
		}
	}
}

func (e *haWeightsEnv) describe(i int) string { return fmt.Sprintf("replica %c", 'A'+i) }

// TestHAGlobalWeightsAcrossReplicas is issue 15's weights test with three
// real replicas: load posted to replica A only reaches every replica, and
// A, B and C serve byte-identical assignments with the same version to
// the same node, following the reports; kill -9 of the weights leader: a
// survivor leads within the alive check's TTL + the lock delay + a
// publish interval, and the survivors' nodes never get the fallback
// weights in between; Consul stopped: every replica keeps serving its
// last weights; Consul back (fresh, empty): a leader again and new
// reports reach every replica, without a restart.
func TestHAGlobalWeightsAcrossReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	e := startHAWeights(t)
	a := e.srvs[0]
	postLoad(t, a, haWService, e.util(0.2, 0.4, 0.8))
	took := awaitSameCLA(t, e.obs, e.notify, e.shares(0.2, 0.4, 0.8), 30*time.Second)
	t.Logf("load posted to A only: A, B and C serve identical 4:2:1 weights after %v", took)
	postLoad(t, a, haWService, e.util(0.8, 0.4, 0.2))
	took = awaitSameCLA(t, e.obs, e.notify, e.shares(0.8, 0.4, 0.2), 10*time.Second)
	t.Logf("new load posted to A: A, B and C serve identical 1:2:4 weights after %v (publish interval %v)", took, haWInterval)
	if limit := 4*haWInterval + 2*time.Second; took > limit {
		t.Errorf("new weights reached every replica after %v, want within %v", took, limit)
	}
	e.measureWrites(t, 5*time.Second)

	e.killLeader(t, e.shares(0.8, 0.4, 0.2))
	e.consulOutage(t, e.shares(0.8, 0.4, 0.2))
}

// killLeader kills the weights leader with SIGKILL, measures the
// hand-over and checks the survivors served want throughout.
func (e *haWeightsEnv) killLeader(t *testing.T, want map[string]float64) {
	t.Helper()
	li := e.leaderIndex(t, 30*time.Second)
	table := tableWrites(t, e.consul, "e2e-ha-weights/weights/table")
	e.alive[li] = false
	obs, srvs := e.living()
	marks := make([]int, len(obs))
	for i, o := range obs {
		_, marks[i] = o.last()
	}
	e.srvs[li].Kill(t)
	killed := time.Now()
	ni := e.leaderIndex(t, haWAliveTTL+haWLockDelay+20*time.Second)
	took := time.Since(killed)
	t.Logf("kill -9 of the leader, %s: %s leads after %v (alive TTL %v + lock delay %v + publish interval %v)",
		e.describe(li), e.describe(ni), took, haWAliveTTL, haWLockDelay, haWInterval)
	if limit := haWAliveTTL + haWLockDelay + haWInterval + 2*time.Second; took > limit {
		t.Errorf("hand-over took %v, want within alive TTL + lock delay + publish interval (+2s) = %v", took, limit)
	}
	select {
	case at := <-table:
		t.Logf("first table write after the kill: %v after it", at.Sub(killed))
	case <-time.After(4 * haWInterval):
		t.Logf("no table write within %v of the new lead: the merged table did not change", 4*haWInterval)
	}
	for i, o := range obs {
		for _, s := range o.since(marks[i]) {
			if !sharesNear(s.weights, want, 0.01) {
				t.Errorf("during the hand-over %s served %v, want shares %v (never the fallback)", o.name, s.weights, want)
			}
		}
	}
	awaitSameCLA(t, obs, e.notify, want, 10*time.Second)
	postLoad(t, srvs[0], haWService, e.util(0.2, 0.4, 0.8))
	took = awaitSameCLA(t, obs, e.notify, e.shares(0.2, 0.4, 0.8), 15*time.Second)
	t.Logf("after the hand-over, load posted to %s reaches every survivor in %v", obs[0].name, took)
}

// tableWrites reports, once, when key is next modified (a blocking
// query on the real Consul from its current index).
func tableWrites(t *testing.T, consul *harness.ConsulAgent, key string) <-chan time.Time {
	t.Helper()
	kv := consul.Client().KV()
	_, meta, err := kv.Get(key, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan time.Time, 1)
	go func() {
		idx := meta.LastIndex
		for range 10 {
			p, m, err := kv.Get(key, &api.QueryOptions{WaitIndex: idx, WaitTime: 5 * time.Second})
			if err != nil {
				return
			}
			if p != nil && p.ModifyIndex > idx {
				out <- time.Now()
				return
			}
			idx = m.LastIndex
		}
	}()
	return out
}

// consulLeader polls the real Consul until the leader key is held by a
// session and returns its value (the leader's replica id).
func consulLeader(t *testing.T, consul *harness.ConsulAgent, key string, within time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		p, _, err := consul.Client().KV().Get(key, nil)
		if err == nil && p != nil && p.Session != "" {
			return string(p.Value)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no session holds %s within %v (last: %+v, %v)", key, within, p, err)
		}
		time.Sleep(20 * time.Millisecond) // polling an external process
	}
}

// consulOutage stops Consul: the survivors keep serving want; starts it
// again (fresh and empty, as a -dev agent): a leader is elected again
// and new reports reach every survivor, without restarting them.
func (e *haWeightsEnv) consulOutage(t *testing.T, want map[string]float64) {
	t.Helper()
	obs, srvs := e.living()
	now := e.shares(0.2, 0.4, 0.8)
	marks := make([]int, len(obs))
	for i, o := range obs {
		_, marks[i] = o.last()
	}
	e.consul.Stop()
	window := 6 * haWInterval
	time.Sleep(window) // an outage lasts: nothing to await, then check nothing changed
	for i, o := range obs {
		for _, s := range o.since(marks[i]) {
			if !sharesNear(s.weights, now, 0.01) {
				t.Errorf("during the Consul outage %s served %v, want its last weights %v", o.name, s.weights, now)
			}
		}
	}
	if problem := sameCLAProblem(obs, now); problem != "" {
		t.Errorf("after %v of Consul outage: %s", window, problem)
	}
	e.consul.Start()
	back := time.Now()
	leader := consulLeader(t, e.consul, "e2e-ha-weights/weights/leader", 30*time.Second)
	t.Logf("Consul back (empty): replica %s holds the leader lock again after %v", leader, time.Since(back))
	var ids []string
	for _, srv := range srvs {
		var st haStatus
		getJSON(t, srv.AdminURL("/debug/ha"), &st)
		ids = append(ids, st.Replica)
	}
	if !slices.Contains(ids, leader) {
		t.Errorf("leader lock held by %q, want one of the living replicas %v", leader, ids)
	}
	checks, err := e.consul.Client().Agent().Checks()
	if err != nil {
		t.Fatal(err)
	}
	if c := checks["xds-server-ha:"+leader]; c == nil || c.Status != api.HealthPassing {
		t.Errorf("the leader's alive check in the restarted agent is %+v, want registered again and passing", c)
	}
	postLoad(t, srvs[len(srvs)-1], haWService, e.util(0.8, 0.4, 0.2))
	took := awaitSameCLA(t, obs, e.notify, want, 20*time.Second)
	t.Logf("Consul back: load posted to %s reaches every survivor in %v", obs[len(obs)-1].name, took)
	// The weights watch retries a failed blocking query with a backoff
	// of at most 5s (ha/weights_kv.go), then a publish interval each for
	// the summary and the table.
	if limit := 5*time.Second + 4*haWInterval + 2*time.Second; took > limit {
		t.Errorf("after Consul came back new load reached every survivor in %v, want within %v", took, limit)
	}
}
