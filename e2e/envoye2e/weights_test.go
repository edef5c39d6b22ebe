package envoye2e

import (
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xds-server/xds-server/e2e/harness"
)

// swWeightsConfig: three services whose weights follow one source each
// (wh: POST /v1/load; wo: ORCA from the backends; wl: LRS from Envoy for
// the rates, POST /v1/load for the utilization alone), round robin (Envoy's
// weighted round robin), and a listener routing gRPC to wo, /wl to wl and
// the rest to wh. Weights are recomputed every 100 ms, pushed at most every
// 200 ms, without blackout or smoothing.
const swWeightsConfig = `
services:
  wh: { weights: { enabled: true, sources: [http] } }
  wo: { protocol: grpc, weights: { enabled: true, sources: [orca] } }
  wl: { weights: { enabled: true, sources: [lrs, http] } }
weights: { blackout_period: 0s, smoothing: 1, update_period: 100ms, min_push_interval: 200ms,
           orca_interval: 500ms, lrs_interval: 500ms }
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
//   - LRS: Envoy reports each host's rate itself (its bootstrap's
//     load_stats_config); the test plays the backends' utilization meter,
//     posting rate/capacity (200 and 600 requests/s) without a qps, so only
//     Envoy's reports give the weights (1:3).
func TestEnvoyWeights(t *testing.T) {
	skipShort(t)
	consul := harness.Consul(t)
	s := swWeightsSetup{ids: map[string]string{}}
	for _, id := range []string{"wh-0", "wh-1", "wl-0", "wl-1"} {
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
	s.sotw.AssertAccepted(t)
	s.delta.AssertAccepted(t)
}

// swWeightsHTTP: reports over POST /v1/load make weights 1:4 (100/0.6 and
// 100/0.15), which HTTP traffic through the state-of-the-world Envoy follows.
func swWeightsHTTP(t *testing.T, s swWeightsSetup) {
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

// swWeightsLRS: HTTP load on /wl through the state-of-the-world Envoy at
// most 100 requests/s; the test posts each wl backend's utilization
// (its rate as Envoy counts it over capacities of 200 and 600 requests/s)
// without a qps: the weights come from the rates Envoy reports over LRS.
func swWeightsLRS(t *testing.T, s swWeightsSetup) {
	addr := s.sotw.AwaitListener(t, "ingress", swWait)
	l := harness.StartHTTPLoad(harness.HTTPLoadConfig{URL: "http://" + addr + "/wl", Workers: 2, Interval: 20 * time.Millisecond})
	defer l.Stop()
	stop := swMeter(t, s, s.sotw, "wl", map[string]float64{"wl-0": 200, "wl-1": 600})
	defer stop()
	for _, e := range []*harness.Envoy{s.sotw, s.delta} {
		swAwaitShare(t, s, e, "wl", "wl-1", 0.68, 0.82)
	}
	swCheckShares(t, s, s.sotw, "wl", func() map[string]int { return l.Snapshot().ByBackend })
	if r := l.Stop(); r.Failed() != 0 {
		t.Errorf("%d failed requests: %s", r.Failed(), r)
	}
	if m := swMetric(t, s.srv, "xds_weights_lrs_reports_total"); m <= 0 {
		t.Errorf("xds_weights_lrs_reports_total = %v: Envoy sent no load report", m)
	}
}

// swMeter posts, every 500 ms until the returned stop, each backend of
// cluster's utilization: its rate in requests/s as e's /clusters counts it
// (rq_total), over its capacity in requests/s.
func swMeter(t *testing.T, s swWeightsSetup, e *harness.Envoy, cluster string, capacity map[string]float64) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		prev, at := map[string]uint64{}, time.Now()
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			hosts, err := e.Hosts(cluster)
			now := time.Now()
			if err != nil {
				continue
			}
			var reports []string
			for _, h := range hosts {
				id, n := s.ids[h.Addr], h.Stats["rq_total"]
				if p, ok := prev[id]; ok && n >= p {
					rate := float64(n-p) / now.Sub(at).Seconds()
					reports = append(reports, fmt.Sprintf(`{"service": %q, "endpoint": %q, "utilization": %.4f}`,
						cluster, id, max(rate/capacity[id], 0.001)))
				}
				prev[id] = n
			}
			at = now
			if len(reports) > 0 {
				_, _ = swTryPost(s.srv, `{"reports": [`+strings.Join(reports, ",")+`]}`)
			}
		}
	})
	return func() { close(done); wg.Wait() }
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
		return ok && len(shares) == 2 && sh >= lo && sh <= hi, desc + "; /debug/weights: " + swDebugWeights(s.srv, cluster), nil
	})
	_, _, desc, _ := swShares(s, e, cluster)
	t.Logf("%s: %s: %s", e.NodeID, cluster, desc)
}

// swCheckShares counts the traffic of cluster through e (count returns
// the load's answers so far by backend id) over windows of at least 400
// requests, until one window begins and ends with the same weights in e,
// and checks that each backend's share of that window's traffic is within
// swShareTolerance of its weight share.
func swCheckShares(t *testing.T, s swWeightsSetup, e *harness.Envoy, cluster string, count func() map[string]int) {
	t.Helper()
	const window = 400 // requests
	for range 5 {
		shares, w0, desc, err := swShares(s, e, cluster)
		if err != nil {
			t.Fatal(err)
		}
		c0 := count()
		var c1 map[string]int
		e.Await(t, fmt.Sprintf("%d requests to %s", window, cluster), swWait, func() (bool, string, error) {
			c1 = count()
			return swTotal(c1)-swTotal(c0) >= window, fmt.Sprintf("answers %v", c1), nil
		})
		_, w1, _, err := swShares(s, e, cluster)
		if err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(w0, w1) {
			t.Logf("%s: weights of %s moved during the window (%v -> %v); again", e.NodeID, cluster, w0, w1)
			continue
		}
		got := map[string]float64{}
		n := float64(swTotal(c1) - swTotal(c0))
		for id := range shares {
			got[id] = float64(c1[id]-c0[id]) / n
		}
		t.Logf("%s: %s: %s; traffic shares %s over %.0f requests", e.NodeID, cluster, desc, swFmtShares(got), n)
		for id, want := range shares {
			if math.Abs(got[id]-want) > swShareTolerance {
				t.Errorf("%s: %s: %s got %.3f of the traffic, its weight share is %.3f (tolerance %.2f); traffic %v -> %v",
					e.NodeID, cluster, id, got[id], want, swShareTolerance, c0, c1)
			}
		}
		if n > 0 && len(got) == len(c1) {
			return
		}
		t.Errorf("%s: %s: traffic reached backends outside the cluster's hosts: %v (hosts %s)", e.NodeID, cluster, c1, desc)
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

// swDebugWeights is /debug/weights?service= (at most 1,500 bytes), for
// messages.
func swDebugWeights(srv *harness.Server, service string) string {
	resp, err := http.Get(srv.AdminURL("/debug/weights?service=" + service))
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1500))
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
