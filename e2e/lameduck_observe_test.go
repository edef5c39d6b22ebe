package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/xds-server/xds-server/e2e/harness"
)

// ---- Propagation ----

// endpointIs is an EDS predicate: the endpoint at addr has health h.
func endpointIs(addr string, h corev3.HealthStatus) func(map[string]corev3.HealthStatus) bool {
	return func(eps map[string]corev3.HealthStatus) bool {
		got, ok := eps[addr]
		return ok && got == h
	}
}

// awaitEDS waits until every node, the ADS observer and each grpc-go
// client, has accepted an EDS of ldService that satisfies pred (a map from
// endpoint address to health status), and returns how long after since
// the last node got there.
//
// The observer's updates are events. The grpc-go clients are only visible
// through xds-server: /debug/config?node=N (the version and content of
// what the node was sent) and /debug/nodes (the version it acknowledged);
// xds-server is an external process, so these are polled every
// ldDebugPoll, within ldWait. A node counts once it acknowledged a version
// that satisfies pred; the time is that of the poll (within ldDebugPoll
// and an HTTP round trip of the acknowledgement).
func (e *lameDuckEnv) awaitEDS(t *testing.T, since time.Time, what string, pred func(map[string]corev3.HealthStatus) bool) time.Duration {
	t.Helper()
	deadline := time.Now().Add(ldWait)
	done := map[string]time.Time{}
	tick := time.NewTicker(ldDebugPoll)
	defer tick.Stop()
	for {
		cla, at, changed := e.obs.latest()
		if _, ok := done[e.obs.node]; !ok && cla != nil && pred(endpointHealth(cla)) {
			done[e.obs.node] = at
		}
		var pending []string
		for _, n := range e.nodes {
			if _, ok := done[n]; !ok {
				pending = append(pending, n)
			}
		}
		if len(pending) > 0 {
			acked := e.ackedEDS(t)
			for _, n := range pending {
				version, cla := e.sentEDS(t, n)
				if cla != nil && version != "" && acked[n] == version && pred(endpointHealth(cla)) {
					done[n] = time.Now()
				}
			}
		}
		if len(done) == len(e.nodes)+1 {
			var last time.Time
			for _, at := range done {
				if at.After(last) {
					last = at
				}
			}
			return max(last.Sub(since), 0)
		}
		if time.Now().After(deadline) {
			var state []string
			for _, n := range append([]string{e.obs.node}, e.nodes...) {
				if _, ok := done[n]; !ok {
					_, c := e.sentEDS(t, n)
					state = append(state, fmt.Sprintf("%s: sent %v", n, endpointHealth(c)))
				}
			}
			t.Fatalf("not every node had %q within %v: %s; observer has %v", what, ldWait, strings.Join(state, "; "), endpointHealth(cla))
		}
		select {
		case <-changed:
		case <-tick.C:
		}
	}
}

// ackedEDS returns, by node id, the EDS version each node acknowledged.
func (e *lameDuckEnv) ackedEDS(t *testing.T) map[string]string {
	t.Helper()
	var nodes struct {
		Nodes []struct {
			ID     string            `json:"id"`
			Acked  map[string]string `json:"acked_versions"`
			Stream int               `json:"streams"`
		} `json:"nodes"`
	}
	getJSON(t, "http://"+e.srv.AdminAddr+"/debug/nodes", &nodes)
	out := map[string]string{}
	for _, n := range nodes.Nodes {
		if n.Stream > 0 {
			out[n.ID] = n.Acked[edsTypeURL]
		}
	}
	return out
}

// sentEDS returns the EDS version and ldService assignment xds-server last
// gave node (nil if none).
func (e *lameDuckEnv) sentEDS(t *testing.T, node string) (string, *endpointv3.ClusterLoadAssignment) {
	t.Helper()
	var cfg struct {
		Resources map[string]struct {
			Version   string            `json:"version"`
			Resources []json.RawMessage `json:"resources"`
		} `json:"resources"`
	}
	getJSON(t, "http://"+e.srv.AdminAddr+"/debug/config?node="+url.QueryEscape(node), &cfg)
	eds := cfg.Resources["endpoint"]
	for _, raw := range eds.Resources {
		var cla endpointv3.ClusterLoadAssignment
		if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(raw, &cla); err != nil {
			t.Fatalf("/debug/config?node=%s: endpoint resource: %v", node, err)
		}
		if cla.GetClusterName() == ldService {
			return eds.Version, &cla
		}
	}
	return eds.Version, nil
}

// endpointHealth maps each endpoint address of cla to its health status.
func endpointHealth(cla *endpointv3.ClusterLoadAssignment) map[string]corev3.HealthStatus {
	out := map[string]corev3.HealthStatus{}
	for _, l := range cla.GetEndpoints() {
		for _, ep := range l.GetLbEndpoints() {
			sa := ep.GetEndpoint().GetAddress().GetSocketAddress()
			out[sa.GetAddress()+":"+strconv.Itoa(int(sa.GetPortValue()))] = ep.GetHealthStatus()
		}
	}
	return out
}

// edsObserver is a raw SotW ADS client (one more node) that keeps the last
// ldService assignment it accepted.
type edsObserver struct {
	node    string
	mu      sync.Mutex
	cla     *endpointv3.ClusterLoadAssignment
	at      time.Time
	changed chan struct{} // closed and replaced at every update
}

func startEDSObserver(t *testing.T, xdsAddr, node string) *edsObserver {
	conn, err := grpc.NewClient(xdsAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ads, err := harness.StartADS(context.Background(), harness.ADSConfig{Conn: conn, NodeID: node, Cluster: "e2e",
		Types: []string{resource.ClusterType, resource.EndpointType}})
	if err != nil {
		t.Fatal(err)
	}
	o := &edsObserver{node: node, changed: make(chan struct{})}
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			var u harness.ADSUpdate
			select {
			case u = <-ads.Updates():
			case <-quit:
				return
			}
			a, ok := u.Resources[ldService]
			if u.TypeURL != resource.EndpointType || !ok {
				continue
			}
			var cla endpointv3.ClusterLoadAssignment
			if err := a.UnmarshalTo(&cla); err != nil {
				continue
			}
			o.mu.Lock()
			o.cla, o.at = &cla, u.At
			close(o.changed)
			o.changed = make(chan struct{})
			o.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ads.Close() // the reader keeps reading meanwhile: the client may be blocked on a send
		close(quit)
		<-done
	})
	return o
}

// latest returns the last assignment, when it arrived, and a channel
// closed at the next update.
func (o *edsObserver) latest() (*endpointv3.ClusterLoadAssignment, time.Time, <-chan struct{}) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.cla, o.at, o.changed
}

// ---- Drain statistics ----

// drainStats collects, per drain, the propagation latency and when the
// last new RPC landed on the drained backend.
type drainStats struct {
	prop, lastRPC []time.Duration
	none          int // drains after which no RPC landed on the backend
}

// add records a drain; lastRPC < 0 means that no RPC landed on the
// backend after the drain began.
func (s *drainStats) add(prop, lastRPC time.Duration) {
	s.prop = append(s.prop, prop)
	if lastRPC >= 0 {
		s.lastRPC = append(s.lastRPC, lastRPC)
	} else {
		s.none++
	}
}

func (s *drainStats) log(t *testing.T) {
	t.Logf("drain propagation (drain call or SIGTERM -> every node acked an EDS with the endpoint DRAINING): %s", percentiles(s.prop))
	t.Logf("last new RPC on a drained backend (client side, after the drain call or SIGTERM): %s; drains with none: %d",
		percentiles(s.lastRPC), s.none)
}

// percentiles formats n, p50, p99 and max of ds (nearest rank).
func percentiles(ds []time.Duration) string {
	ds = slices.Clone(ds)
	if len(ds) == 0 {
		return "n=0"
	}
	slices.Sort(ds)
	rank := func(p float64) time.Duration {
		return ds[max(0, int(math.Ceil(p*float64(len(ds))))-1)].Round(time.Millisecond)
	}
	return fmt.Sprintf("n=%d p50=%v p99=%v max=%v", len(ds), rank(0.50), rank(0.99), ds[len(ds)-1].Round(time.Millisecond))
}

// ---- Admin API ----

// drainAPI calls the admin drain API and returns the status and body.
func (e *lameDuckEnv) drainAPI(t *testing.T, method, query, body string) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, "http://"+e.srv.AdminAddr+"/v1/drain"+query, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, bytes.TrimSpace(b)
}

// drainListing is the answer of GET /v1/drain.
type drainListing struct {
	Drains []struct {
		Service  string `json:"service"`
		Endpoint string `json:"endpoint"`
	} `json:"drains"`
	Draining []struct {
		Service  string   `json:"service"`
		Endpoint string   `json:"endpoint"`
		Sources  []string `json:"sources"`
	} `json:"draining"`
}

func (e *lameDuckEnv) drainState(t *testing.T) drainListing {
	t.Helper()
	var st drainListing
	getJSON(t, "http://"+e.srv.AdminAddr+"/v1/drain", &st)
	return st
}
