package ha

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/xds-server/xds-server/discovery"
	"github.com/xds-server/xds-server/e2e/harness"
	"github.com/xds-server/xds-server/weights"
)

const (
	testInterval  = 300 * time.Millisecond // ha.publish_interval
	testLockDelay = 2 * time.Second        // ha.leader_lock_delay
)

// recorder is the xDS side of a replica: what the pipeline hands over.
type recorder struct {
	mu     sync.Mutex
	global []map[string]map[string]uint32 // every SetWeights, in order
	nodes  map[string]map[string]map[string]uint32
}

func (r *recorder) SetWeights(w map[string]map[string]uint32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.global = append(r.global, w)
}

func (r *recorder) SetNodeWeights(w map[string]map[string]map[string]uint32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.nodes = w
}

func (r *recorder) last() map[string]uint32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.global) == 0 {
		return nil
	}
	return r.global[len(r.global)-1]["api"]
}

func (r *recorder) history() []map[string]uint32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]map[string]uint32, len(r.global))
	for i, g := range r.global {
		out[i] = g["api"]
	}
	return out
}

// replica is one in-process xds-server's weights: a pipeline, its HA
// exchange over the shared Consul, its POST /v1/load.
type wReplica struct {
	id     string
	w      *Weights
	p      *weights.Pipeline
	rec    *recorder
	url    string
	lrs    string // host:port of its gRPC server (LRS)
	cancel context.CancelFunc
	done   chan struct{}
}

var testEndpoints = []string{"a", "b", "c"}

// modeBalanced is global mode with weights.balance on (test only).
const modeBalanced = "balanced"

// startWReplica starts a replica sharing its weights through Consul
// (client nil: a lone replica without HA, the reference).
func startWReplica(t *testing.T, client *api.Client, id string, mode string, subsets map[string][]string, tweak ...func(*weights.Config)) *wReplica {
	t.Helper()
	return startWReplicaWith(t, client, id, mode, subsets, nil, tweak...)
}

// startWReplicaWith is startWReplica with checks for the leader session.
func startWReplicaWith(t *testing.T, client *api.Client, id string, mode string, subsets map[string][]string, checks []string, tweak ...func(*weights.Config)) *wReplica {
	t.Helper()
	var w *Weights
	var ha *weights.HAConfig
	if client != nil {
		var err error
		w, err = NewWeights(WeightsConfig{Client: client, Prefix: "xds-test/", Replica: id, SessionChecks: checks,
			PublishInterval: testInterval, LockDelay: testLockDelay, Registerer: prometheus.NewRegistry()})
		if err != nil {
			t.Fatal(err)
		}
		ha = w.PipelineHA()
	}
	var balance *weights.BalanceConfig
	if mode == modeBalanced {
		b := weights.DefaultBalanceConfig()
		balance, mode = &b, weights.ModeGlobal
	}
	tc := weights.DefaultConfig()
	tc.BlackoutPeriod = 0
	for _, f := range tweak {
		f(&tc)
	}
	rec := &recorder{}
	grpcSrv := grpc.NewServer()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p, err := weights.NewPipeline(weights.PipelineConfig{Tracker: tc, Solve: weights.DefaultSolveConfig(),
		Services: func(string) weights.ServiceConfig {
			return weights.ServiceConfig{Enabled: true, Mode: mode, Sources: []string{weights.SourceHTTP, weights.SourceLRS}}
		},
		Publisher: rec, GRPC: grpcSrv, HA: ha, Balance: balance,
		UpdatePeriod: 100 * time.Millisecond, MinPushInterval: 100 * time.Millisecond,
		ORCAInterval: time.Second, LRSInterval: 200 * time.Millisecond, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	p.SetSubsets(weights.SubsetsMap{"api": subsets})
	svc := discovery.Service{Name: "api"}
	for i, e := range testEndpoints {
		svc.Endpoints = append(svc.Endpoints, discovery.Endpoint{ID: e, Address: "127.0.0.1", Port: 9001 + i, Weight: 1})
	}
	p.Observe(discovery.Snapshot{Services: []discovery.Service{svc}})
	mux := http.NewServeMux()
	p.Handlers(mux)
	srv := httptest.NewServer(mux)
	ctx, cancel := context.WithCancel(context.Background())
	r := &wReplica{id: id, w: w, p: p, rec: rec, url: srv.URL, lrs: lis.Addr().String(), cancel: cancel, done: make(chan struct{})}
	go func() { _ = grpcSrv.Serve(lis) }()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		if w != nil {
			w.Run(ctx)
		}
	}()
	go func() { defer wg.Done(); p.Run(ctx) }()
	go func() { wg.Wait(); close(r.done) }()
	t.Cleanup(func() { r.stop(); p.StopLRS(); grpcSrv.Stop(); srv.Close() })
	return r
}

func (r *wReplica) stop() {
	r.cancel()
	<-r.done
}

// post sends backend reports (capacity = qps/utilization) to r.
func (r *wReplica) post(t *testing.T, util map[string]float64) {
	t.Helper()
	qps := map[string]float64{}
	for _, e := range testEndpoints {
		qps[e] = 100
	}
	r.postLoad(t, qps, util)
}

func (r *wReplica) postLoad(t *testing.T, qps, util map[string]float64) {
	t.Helper()
	var b bytes.Buffer
	b.WriteString(`{"reports": [`)
	for i, e := range testEndpoints {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"service": "api", "endpoint": %q, "qps": %v, "utilization": %v}`, e, qps[e], util[e])
	}
	b.WriteString(`]}`)
	resp, err := http.Post(r.url+"/v1/load", "application/json", &b)
	if err != nil {
		t.Error(err)
		return
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Errorf("POST /v1/load to %s: %s", r.id, resp.Status)
	}
}

// reporter posts util to pick() every 100ms until stopped.
func reporter(t *testing.T, pick func() *wReplica, util func() map[string]float64) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tk := time.NewTicker(100 * time.Millisecond)
		defer tk.Stop()
		for {
			pick().post(t, util())
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
			}
		}
	}()
	return func() { cancel(); <-done }
}

// waitSame waits until every replica serves the same table and ok holds
// for it; it returns the table and how long it took.
func waitSame(t *testing.T, rs []*wReplica, within time.Duration, ok func(map[string]uint32) bool) (map[string]uint32, time.Duration) {
	t.Helper()
	return waitSameOr(t, rs, within, ok, nil)
}

// waitSameOr is waitSame that adds describe(), if set, to a failure.
func waitSameOr(t *testing.T, rs []*wReplica, within time.Duration, ok func(map[string]uint32) bool, describe func() string) (map[string]uint32, time.Duration) {
	t.Helper()
	start := time.Now()
	for time.Since(start) < within {
		first := rs[0].rec.last()
		same := first != nil && ok(first)
		for _, r := range rs[1:] {
			same = same && maps.Equal(first, r.rec.last())
		}
		if same {
			return first, time.Since(start)
		}
		time.Sleep(20 * time.Millisecond) // polling what three pipelines serve: no single event to await
	}
	for _, r := range rs {
		_, seq, in := r.w.Table()
		t.Logf("%s serves %v (leader %v; table in KV as it last read: %v, sequence %d)", r.id, r.rec.last(), r.w.Leader(), in, seq)
	}
	if describe != nil {
		t.Log(describe())
	}
	t.Fatalf("replicas did not serve one table within %v", within)
	return nil, 0
}

// ratio reports whether the weights follow capacities a:b:c = 2:4:1.
func ratio241(w map[string]uint32) bool {
	return w["b"] > w["a"] && w["a"] > w["c"] && near(float64(w["b"])/float64(w["c"]), 4) && near(float64(w["a"])/float64(w["c"]), 2)
}

func near(x, want float64) bool { return x > want*0.9 && x < want*1.1 }

func isFallback(w map[string]uint32) bool { return len(w) > 0 && w["a"] == w["b"] && w["b"] == w["c"] }

func leaderOf(t *testing.T, rs []*wReplica, within time.Duration) *wReplica {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		for _, r := range rs {
			if r.w.Leader() {
				return r
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no weights leader within %v", within)
	return nil
}

// Reports reach one replica only; after the publish interval all three
// serve the same global table, the one a single replica computes; then
// the leader crashes (its session invalidated: lock-delay applies) and
// another takes over within lock delay + one publish interval, the table
// served never falling back to the discovery weights.
func TestWeightsSharedAcrossReplicasAndLeaderFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("integration: real Consul")
	}
	agent := harness.Consul(t)
	rs := []*wReplica{}
	for i := range 3 {
		rs = append(rs, startWReplica(t, agent.Client(), fmt.Sprintf("xds-%d", i+1), weights.ModeGlobal, nil))
	}
	leader := leaderOf(t, rs, 10*time.Second)
	var target *wReplica // reports to one non-leader only
	for _, r := range rs {
		if r != leader {
			target = r
			break
		}
	}
	var mu sync.Mutex
	util := map[string]float64{"a": 0.4, "b": 0.2, "c": 0.8}
	stop := reporter(t, func() *wReplica { return target }, func() map[string]float64 {
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(util)
	})
	defer stop()
	tab, took := waitSame(t, rs, 10*time.Second, ratio241)
	t.Logf("reports to %s only, leader %s: all 3 replicas serve %v after %v (publish interval %v)", target.id, leader.id, tab, took, testInterval)

	// Crash the leader: invalidate its session (as Consul does when it
	// dies), then stop it without a goodbye.
	p, _, err := agent.Client().KV().Get("xds-test/weights/leader", nil)
	if err != nil || p == nil || p.Session == "" {
		t.Fatalf("leader key: %v %v", p, err)
	}
	survivors := []*wReplica{}
	marks := map[string]int{}
	for _, r := range rs {
		if r != leader {
			survivors = append(survivors, r)
			marks[r.id] = len(r.rec.history())
		}
	}
	crash := time.Now()
	if _, err := agent.Client().Session().Destroy(p.Session, nil); err != nil {
		t.Fatal(err)
	}
	leader.stop()
	next := leaderOf(t, survivors, testLockDelay+testInterval+2*time.Second)
	takeover := time.Since(crash)
	t.Logf("leader %s crashed: %s leads after %v (lock delay %v, publish interval %v)", leader.id, next.id, takeover, testLockDelay, testInterval)
	if takeover > testLockDelay+testInterval+time.Second {
		t.Errorf("takeover after %v, want within lock delay + publish interval (+1s slack)", takeover)
	}
	if takeover < testLockDelay-200*time.Millisecond {
		t.Errorf("takeover after %v, before the lock delay %v ran out", takeover, testLockDelay)
	}
	// The new leader writes: the table follows a change of the reports.
	mu.Lock()
	util["c"] = 0.2 // c now as strong as b
	mu.Unlock()
	tab, took = waitSame(t, survivors, 10*time.Second, func(w map[string]uint32) bool {
		return near(float64(w["c"])/float64(w["b"]), 1) && near(float64(w["b"])/float64(w["a"]), 2)
	})
	t.Logf("after the takeover the survivors follow the reports: %v after %v", tab, took)
	for _, r := range survivors {
		for i, w := range r.rec.history()[marks[r.id]:] {
			if isFallback(w) {
				t.Errorf("%s served the fallback %v (publication %d after the crash)", r.id, w, i)
			}
		}
	}
}

// When reports stop, every replica falls back to the discovery weights
// once they expire, as a lone replica does.
func TestSharedWeightsExpireToFallback(t *testing.T) {
	if testing.Short() {
		t.Skip("integration: real Consul")
	}
	agent := harness.Consul(t)
	const expiry = 1500 * time.Millisecond
	short := func(c *weights.Config) { c.ExpirationPeriod, c.OverloadPeriod = expiry, min(c.OverloadPeriod, expiry) }
	rs := []*wReplica{startWReplica(t, agent.Client(), "xds-1", weights.ModeGlobal, nil, short),
		startWReplica(t, agent.Client(), "xds-2", weights.ModeGlobal, nil, short)}
	leaderOf(t, rs, 10*time.Second)
	stop := reporter(t, func() *wReplica { return rs[1] }, func() map[string]float64 {
		return map[string]float64{"a": 0.4, "b": 0.2, "c": 0.8}
	})
	waitSame(t, rs, 10*time.Second, ratio241)
	stop()
	stopped := time.Now()
	tab, _ := waitSame(t, rs, 10*time.Second, isFallback)
	took := time.Since(stopped)
	t.Logf("reports stopped: both replicas serve the fallback %v after %v (expiration %v, publish interval %v)", tab, took, expiry, testInterval)
	if took < expiry-testInterval {
		t.Errorf("fallback after %v, before the reports expired (%v)", took, expiry)
	}
}

// Consul stopped: every replica keeps serving its last table (never the
// fallback); Consul back, empty (a dev agent keeps no state), its index
// started over far below the one the replicas last read (Consul had a
// history): each replica reads it at once (not once its index passes the
// old one, nor after a blocking query's minute), writes its summary again
// even if unchanged, a leader is elected again at once (the old sessions
// are gone) and writes its table, and the replicas follow the reports
// again without a restart. The reports go to the leader, which computes
// the new table during the outage, when its session is already gone with
// Consul: that write is lost and must be made again.
func TestSharedWeightsSurviveConsulOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("integration: real Consul")
	}
	agent := harness.Consul(t)
	client := agent.Client()
	rs := []*wReplica{startWReplica(t, client, "xds-1", weights.ModeGlobal, nil),
		startWReplica(t, client, "xds-2", weights.ModeGlobal, nil)}
	leader := leaderOf(t, rs, 10*time.Second)
	const history = 500 // Consul writes before the weights' own: their keys are written past this index
	for i := range history {
		if _, err := client.KV().Put(&api.KVPair{Key: "xds-test/history", Value: []byte(fmt.Sprint(i))}, nil); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	util := map[string]float64{"a": 0.4, "b": 0.2, "c": 0.8}
	stop := reporter(t, func() *wReplica { return leader }, func() map[string]float64 {
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(util)
	})
	defer stop()
	before, _ := waitSame(t, rs, 10*time.Second, ratio241)
	_, meta, err := client.KV().List("xds-test/weights/", nil)
	if err != nil || meta.LastIndex <= history {
		t.Fatalf("weights keys at index %v (%v), want past the history (%d)", meta, err, history)
	}
	oldIndex := meta.LastIndex
	marks := map[string]int{}
	for _, r := range rs {
		marks[r.id] = len(r.rec.history()) - 1 // from the table all served before the outage
	}
	agent.Stop()
	mu.Lock()
	util["c"] = 0.2 // the leader computes a new table it cannot write
	mu.Unlock()
	down := time.Now()
	for time.Since(down) < 3*time.Second {
		for _, r := range rs {
			if got := r.rec.last(); !maps.Equal(got, before) {
				t.Fatalf("%s serves %v with Consul down, want the last table %v", r.id, got, before)
			}
		}
		time.Sleep(50 * time.Millisecond) // sampling what is served over the outage: nothing to await
	}
	agent.Start()
	// Bound: the watch's backoff ceiling (5s), a lock taken again (the
	// old session found gone after a failed acquire, 1s), a publish
	// interval each for the table and the summaries, and slack for a
	// loaded machine.
	const within = 30 * time.Second
	tab, took := waitSameOr(t, rs, within, func(w map[string]uint32) bool {
		return near(float64(w["c"])/float64(w["b"]), 1) && near(float64(w["b"])/float64(w["a"]), 2)
	}, func() string { return kvState(client) })
	t.Logf("Consul back after 3s down: both replicas serve %v %v later", tab, took)
	for _, r := range rs {
		for _, w := range r.rec.history()[marks[r.id]:] {
			if isFallback(w) {
				t.Errorf("%s served the fallback %v after the outage began", r.id, w)
			}
		}
	}
	// Both summaries are back, xds-2's too although its content (no
	// reports) never changed.
	deadline := time.Now().Add(within - took)
	for {
		pairs, meta, err := client.KV().List("xds-test/weights/summaries/", nil)
		if err == nil && len(pairs) == len(rs) {
			if meta.LastIndex >= oldIndex {
				t.Fatalf("the restarted agent's index %d passed the old one %d: the test did not read an index started over", meta.LastIndex, oldIndex)
			}
			t.Logf("restarted agent at index %d, the replicas had read %d before the outage", meta.LastIndex, oldIndex)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("summaries in KV %d after Consul came back, want every replica's (%d): %s", len(pairs), len(rs), kvState(client))
		}
		time.Sleep(20 * time.Millisecond) // polling Consul: no event to await
	}
}

// kvState describes the weights keys in Consul, for a failure message.
func kvState(client *api.Client) string {
	pairs, meta, err := client.KV().List("xds-test/weights/", nil)
	if err != nil {
		return "KV: " + err.Error()
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "KV at index %d:", meta.LastIndex)
	for _, p := range pairs {
		fmt.Fprintf(&b, " %s (index %d, session %q)", p.Key, p.ModifyIndex, p.Session)
	}
	return b.String()
}
