package envoye2e

import (
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xds-server/xds-server/e2e/harness"
)

// swWeightsConfig: three services whose weights follow one source each
// (wh: POST /v1/load; wo: ORCA from the backends; wl: per-node weights
// from the rates Envoy reports over LRS, capacities from POST /v1/load, in
// subsets of 2), round robin (Envoy's weighted round robin), and a
// listener routing gRPC to wo, /wl to wl and the rest to wh. Weights are
// recomputed every 100 ms, pushed at most every 200 ms, without blackout
// or smoothing.
const swWeightsConfig = `
services:
  wh: { weights: { enabled: true, sources: [http] } }
  wo: { protocol: grpc, weights: { enabled: true, sources: [orca] } }
  wl: { subset_size: 2, weights: { enabled: true, mode: per_node, sources: [lrs, http] } }
weights: { blackout_period: 0s, smoothing: 1, update_period: 100ms, min_push_interval: 200ms,
           orca_interval: 500ms }
listeners:
  - name: ingress
    address: 127.0.0.1:0
    routes:
      - { prefix: /grpc.testing.TestService/, service: wo }
      - { prefix: /wl, service: wl }
      - { prefix: /, service: wh }
`

// swShareTolerance: Envoy's traffic shares follow the weight shares within
// 5 points.
const swShareTolerance = 0.05

// swWeightsSetup is what every part of TestEnvoyWeights shares.
type swWeightsSetup struct {
	srv   *harness.Server
	sotw  *harness.Envoy
	delta *harness.Envoy
	ids   map[string]string // host:port as Envoy sees it -> backend id
}

// TestEnvoyWeights: each source of weights moves the weights in Envoy's
// /clusters (a state-of-the-world and a delta Envoy), and Envoy's traffic
// shares follow the weight shares within 5 points:
//   - POST /v1/load: fixed reports, 1:4 capacities;
//   - ORCA: example backends in the capacity model (-slots 2 and 6, 10 ms a
//     call: 200 and 600 calls/s), gRPC load through the delta Envoy; the
//     backends measure their own utilization, so the weights go to 1:3;
//   - LRS: three backends of equal capacity, each Envoy a subset of two
//     sharing one backend, both Envoys sending the same HTTP load: from the
//     rates the Envoys report themselves (their bootstrap's
//     load_stats_config), per-node weights move each Envoy's traffic off
//     the shared backend (toward 1:2), and the traffic follows.
func TestEnvoyWeights(t *testing.T) {
	skipShort(t)
	consul := harness.Consul(t)
	s := swWeightsSetup{ids: map[string]string{}}
	for _, id := range []string{"wh-0", "wh-1", "wl-0", "wl-1", "wl-2"} {
		b := harness.StartExampleBackend(t, "-consul", consul.Addr(), "-service", id[:2], "-id", id, "-register-port", "http",
			"-grpc-addr", "127.0.0.1:0", "-http-addr", "127.0.0.1:0", "-check-interval", "1s", "-drain-delay", "0s")
		s.ids[b.HTTPAddr] = b.ID
	}
	for id, slots := range map[string]string{"wo-0": "2", "wo-1": "6"} {
		b := harness.StartExampleBackend(t, "-consul", consul.Addr(), "-service", "wo", "-id", id,
			"-grpc-addr", "127.0.0.1:0", "-http-addr", "127.0.0.1:0", "-check-interval", "1s", "-drain-delay", "0s",
			"-slots", slots, "-service-time", "10ms", "-orca-min-interval", "500ms")
		s.ids[b.GRPCAddr] = b.ID
	}
	s.srv = startServer(t, consul, "--config", swWriteConfig(t, swWeightsConfig))
	s.sotw = harness.StartEnvoy(t, harness.EnvoyOptions{NodeID: "sw-w-sotw", XDSAddr: s.srv.XDSAddr})
	s.delta = harness.StartEnvoy(t, harness.EnvoyOptions{NodeID: "sw-w-delta", XDSAddr: s.srv.XDSAddr, Delta: true})

	t.Run("http push", func(t *testing.T) { swWeightsHTTP(t, s) })
	t.Run("orca", func(t *testing.T) { swWeightsORCA(t, s) })
	t.Run("lrs", func(t *testing.T) { swWeightsLRS(t, s) })
	for _, e := range []*harness.Envoy{s.sotw, s.delta} {
		e.AssertAccepted(t)
		if c := e.Complaints(); len(c) > 0 {
			t.Errorf("envoy %s complained:\n%s", e.NodeID, strings.Join(c, "\n"))
		}
	}
}

// swWeightsHTTP: reports over POST /v1/load make weights 1:4 (100/0.6 and
// 100/0.15), which HTTP traffic through the state-of-the-world Envoy follows.
func swWeightsHTTP(t *testing.T, s swWeightsSetup) {
	swAwaitShare(t, s, s.sotw, "wh", "wh-1", 0.5, 0.5) // before any report: Consul's weights
	swPostLoad(t, s.srv, `{"reports": [
		{"service": "wh", "endpoint": "wh-0", "qps": 100, "utilization": 0.6},
		{"service": "wh", "endpoint": "wh-1", "qps": 100, "utilization": 0.15}]}`)
	for _, e := range []*harness.Envoy{s.sotw, s.delta} {
		swAwaitShare(t, s, e, "wh", "wh-1", 0.78, 0.82)
	}
	addr := s.sotw.AwaitListener(t, "ingress", swWait)
	l := harness.StartHTTPLoad(harness.HTTPLoadConfig{URL: "http://" + addr + "/wh", Workers: 2})
	defer l.Stop()
	swCheckShares(t, s, s.sotw, "wh", func() map[string]int { return l.Snapshot().ByBackend })
	if r := l.Stop(); r.Failed() != 0 {
		t.Errorf("%d failed requests: %s", r.Failed(), r)
	}
}

// swWeightsORCA: gRPC load through the delta Envoy; the backends' ORCA
// reports (qps and slot utilization) make the weights their capacities,
// 1:3, which the traffic follows.
func swWeightsORCA(t *testing.T, s swWeightsSetup) {
	swAwaitShare(t, s, s.delta, "wo", "wo-1", 0.5, 0.5) // no traffic yet: ORCA reports no qps
	addr := s.delta.AwaitListener(t, "ingress", swWait)
	l, err := harness.StartGRPCLoad(addr, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Stop()
	for _, e := range []*harness.Envoy{s.delta, s.sotw} {
		swAwaitShare(t, s, e, "wo", "wo-1", 0.68, 0.82)
	}
	swCheckShares(t, s, s.delta, "wo", func() map[string]int { return l.Snapshot().ByBackend })
	if r := l.Stop(); r.Failed() != 0 {
		t.Errorf("%d of %d calls failed: %v", r.Failed(), r.Total, r.Errors)
	}
}

// swWeightsLRS: equal capacities posted for wl-0..2 (200 requests/s: 1
// request/s at utilization 0.005, so that the solver sees no load from
// other clients beside the Envoys'), HTTP load on /wl through both Envoys
// (at most 100 requests/s each), which they report every second
// (weights.lrs_interval). Both get the global weights (1:1) until their
// load reports arrive; then each Envoy's per-node weights give the backend
// it shares with the other Envoy about a third of its traffic (utilization
// evens out at 2/3 of a node's rate per backend), and each Envoy's
// traffic follows its own weights.
func swWeightsLRS(t *testing.T, s swWeightsSetup) {
	swPostLoad(t, s.srv, `{"reports": [
		{"service": "wl", "endpoint": "wl-0", "qps": 1, "utilization": 0.005},
		{"service": "wl", "endpoint": "wl-1", "qps": 1, "utilization": 0.005},
		{"service": "wl", "endpoint": "wl-2", "qps": 1, "utilization": 0.005}]}`)
	envoys := []*harness.Envoy{s.sotw, s.delta}
	subsets := map[*harness.Envoy][]string{}
	for _, e := range envoys {
		subsets[e] = swAwaitSubsetOf(t, s.srv, e, "wl")
	}
	shared := swIntersect(subsets[s.sotw], subsets[s.delta])
	if len(shared) != 1 {
		t.Fatalf("the Envoys' subsets of wl %v and %v share %v, want one backend", subsets[s.sotw], subsets[s.delta], shared)
	}
	for _, e := range envoys {
		swAwaitShare(t, s, e, "wl", shared[0], 0.5, 0.5) // no load reports yet: the global weights
	}
	counts := map[*harness.Envoy]func() map[string]int{}
	for _, e := range envoys {
		addr := e.AwaitListener(t, "ingress", swWait)
		// 4 workers pausing 40 ms: about 90 requests/s, set by the pauses
		// more than by latency, so that both Envoys send about the same.
		l := harness.StartHTTPLoad(harness.HTTPLoadConfig{URL: "http://" + addr + "/wl", Workers: 4, Interval: 40 * time.Millisecond})
		defer func() {
			if r := l.Stop(); r.Failed() != 0 {
				t.Errorf("%s: %d failed requests: %s", e.NodeID, r.Failed(), r)
			}
		}()
		counts[e] = func() map[string]int { return l.Snapshot().ByBackend }
	}
	for _, e := range envoys {
		swAwaitShare(t, s, e, "wl", shared[0], 0.25, 0.42)
	}
	for _, e := range envoys {
		swCheckShares(t, s, e, "wl", counts[e])
	}
	if m := swMetric(t, s.srv, "xds_weights_lrs_reports_total"); m <= 0 {
		t.Errorf("xds_weights_lrs_reports_total = %v: Envoy sent no load report", m)
	}
	for _, e := range envoys { // Envoy's side of its load reporting
		st, err := e.Stats()
		if err != nil {
			t.Fatal(err)
		}
		if st["load_reporter.requests"] == 0 || st["load_reporter.responses"] == 0 || st["load_reporter.errors"] != 0 {
			t.Errorf("%s: load_reporter.requests %d, responses %d, errors %d: want reports sent and answered, no error",
				e.NodeID, st["load_reporter.requests"], st["load_reporter.responses"], st["load_reporter.errors"])
		}
	}
}

// swAwaitSubsetOf waits until /debug/subsets names e's subset of service
// (the node has connected) and returns it, sorted.
func swAwaitSubsetOf(t *testing.T, srv *harness.Server, e *harness.Envoy, service string) []string {
	t.Helper()
	var subset []string
	e.Await(t, "its subset of "+service, swWait, func() (bool, string, error) {
		var rep swSubsetReport
		err := swTryJSON(srv.AdminURL("/debug/subsets?service="+service+"&node="+e.NodeID), &rep)
		if err != nil || len(rep.Nodes) != 1 {
			return false, fmt.Sprintf("/debug/subsets: %v", err), nil
		}
		subset = slices.Sorted(slices.Values(rep.Nodes[0].Subset))
		return len(subset) > 0, fmt.Sprintf("subset %v", subset), nil
	})
	return subset
}

// swIntersect is the ids in both a and b (sorted inputs), sorted.
func swIntersect(a, b []string) []string {
	var out []string
	for _, id := range a {
		if slices.Contains(b, id) {
			out = append(out, id)
		}
	}
	return out
}

// swShares is each host's share of the weights of cluster in e, by
// backend id, and a description for messages.
func swShares(s swWeightsSetup, e *harness.Envoy, cluster string) (map[string]float64, map[string]uint32, string, error) {
	hosts, err := e.Hosts(cluster)
	if err != nil {
		return nil, nil, "", err
	}
	var sum float64
	weights := map[string]uint32{}
	for _, h := range hosts {
		weights[s.ids[h.Addr]] = h.Weight
		sum += float64(h.Weight)
	}
	shares := map[string]float64{}
	for id, w := range weights {
		shares[id] = float64(w) / sum
	}
	return shares, weights, fmt.Sprintf("weights %v, shares %s", weights, swFmtShares(shares)), nil
}

// swAwaitShare waits until id's share of the weights of cluster in e is in
// [lo, hi].
func swAwaitShare(t *testing.T, s swWeightsSetup, e *harness.Envoy, cluster, id string, lo, hi float64) {
	t.Helper()
	e.Await(t, fmt.Sprintf("%s's weight share of %s in [%v, %v]", id, cluster, lo, hi), swWait, func() (bool, string, error) {
		shares, _, desc, err := swShares(s, e, cluster)
		if err != nil {
			return false, "", err
		}
		sh, ok := shares[id]
		return ok && len(shares) == 2 && sh >= lo && sh <= hi, desc + "; /debug/weights: " + swDebugWeights(s.srv, cluster) +
			"; for the node: " + swDebugWeights(s.srv, cluster+"&node="+e.NodeID), nil
	})
	_, _, desc, _ := swShares(s, e, cluster)
	t.Logf("%s: %s: %s", e.NodeID, cluster, desc)
}

// swCheckShares counts the traffic of cluster through e (count returns
// the load's answers so far by backend id) over windows of at least 200
// requests, until one window ends with weight shares within 2 points of
// those it began with, and checks that each backend's share of that
// window's traffic is within swShareTolerance of its weight share (the
// mean of both ends).
func swCheckShares(t *testing.T, s swWeightsSetup, e *harness.Envoy, cluster string, count func() map[string]int) {
	t.Helper()
	const window = 200 // requests; Envoy's round robin is exact to a request or two
	for range 8 {
		s0, _, desc0, err := swShares(s, e, cluster)
		if err != nil {
			t.Fatal(err)
		}
		c0 := count()
		var c1 map[string]int
		e.Await(t, fmt.Sprintf("%d requests to %s", window, cluster), swWait, func() (bool, string, error) {
			c1 = count()
			return swTotal(c1)-swTotal(c0) >= window, fmt.Sprintf("answers %v", c1), nil
		})
		s1, _, desc1, err := swShares(s, e, cluster)
		if err != nil {
			t.Fatal(err)
		}
		want, moved := map[string]float64{}, 0.0
		for id := range s0 {
			want[id] = (s0[id] + s1[id]) / 2
			moved = max(moved, math.Abs(s0[id]-s1[id]))
		}
		if moved > 0.02 || len(s1) != len(s0) {
			t.Logf("%s: weights of %s moved during the window (%s -> %s); again", e.NodeID, cluster, desc0, desc1)
			continue
		}
		got := map[string]float64{}
		n := float64(swTotal(c1) - swTotal(c0))
		for id := range want {
			got[id] = float64(c1[id]-c0[id]) / n
		}
		t.Logf("%s: %s: %s; traffic shares %s over %.0f requests", e.NodeID, cluster, desc1, swFmtShares(got), n)
		for id := range c1 {
			if _, ok := want[id]; !ok {
				t.Errorf("%s: %s: traffic reached %s, not a host of the cluster (%s)", e.NodeID, cluster, id, desc1)
			}
		}
		for id, w := range want {
			if math.Abs(got[id]-w) > swShareTolerance {
				t.Errorf("%s: %s: %s got %.3f of the traffic, its weight share is %.3f (tolerance %.2f); traffic %v -> %v",
					e.NodeID, cluster, id, got[id], w, swShareTolerance, c0, c1)
			}
		}
		return
	}
	t.Errorf("%s: the weights of %s never held still over a window of %d requests", e.NodeID, cluster, window)
}

// swTotal is the sum of m's values.
func swTotal(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// swFmtShares formats shares sorted by id, as fractions.
func swFmtShares(shares map[string]float64) string {
	var parts []string
	for _, id := range slices.Sorted(maps.Keys(shares)) {
		parts = append(parts, fmt.Sprintf("%s:%.3f", id, shares[id]))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// swDebugWeights is /debug/weights?service= (at most 2,500 bytes), for
// messages.
func swDebugWeights(srv *harness.Server, service string) string {
	resp, err := http.Get(srv.AdminURL("/debug/weights?service=" + service))
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 2500))
	return strings.Join(strings.Fields(string(b)), " ")
}

// swTryPost posts body to POST /v1/load and returns the status and body.
func swTryPost(srv *harness.Server, body string) (int, string) {
	resp, err := http.Post(srv.AdminURL("/v1/load"), "application/json", strings.NewReader(body))
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// swPostLoad posts body to POST /v1/load or fails the test.
func swPostLoad(t *testing.T, srv *harness.Server, body string) {
	t.Helper()
	if code, out := swTryPost(srv, body); code != http.StatusOK {
		t.Fatalf("POST /v1/load: %d %s", code, out)
	}
}

// swMetric is the sum of every series of the counter or gauge name on
// xds-server's /metrics.
func swMetric(t *testing.T, srv *harness.Server, name string) float64 {
	t.Helper()
	resp, err := http.Get(srv.AdminURL("/metrics"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var sum float64
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, name); ok && (rest[0] == ' ' || rest[0] == '{') {
			var v float64
			fields := strings.Fields(line)
			if _, err := fmt.Sscan(fields[len(fields)-1], &v); err == nil {
				sum += v
			}
		}
	}
	return sum
}
