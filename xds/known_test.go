package xds

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestKnownNodesCapEvictsOldestDisconnected: past xds.max_known_nodes a
// new node evicts the node disconnected the longest (counted, and the
// evicted node's snapshot goes); with every known node connected a new
// one is refused with ResourceExhausted.
func TestKnownNodesCapEvictsOldestDisconnected(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	s := newTestServer(t, Config{MaxKnownNodes: 3, Now: func() time.Time { return now }})
	s.Update(world(1, 1))
	s.Reconcile()
	for i, id := range []string{"a", "b", "c"} {
		connect(s, int64(i+1), id)
	}
	s.cb.OnStreamClosed(2, nil) // b leaves first
	now = now.Add(time.Second)
	s.cb.OnStreamClosed(1, nil) // then a
	if _, ok := s.rec.snapshotOf("b"); !ok {
		t.Fatal("b has no snapshot within its grace")
	}
	connect(s, 4, "d")
	if got := nodeIDs(s.Nodes()); got != "a c d" {
		t.Errorf("known nodes %q, want b evicted (disconnected the longest)", got)
	}
	if _, ok := s.rec.snapshotOf("b"); ok {
		t.Error("the evicted node's snapshot is kept")
	}
	connect(s, 5, "e") // evicts a
	err := s.cb.OnStreamRequest(6, &discoverygrpc.DiscoveryRequest{Node: &core.Node{Id: "f", Cluster: "c"}})
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("a new node with every known node connected: %v, want ResourceExhausted", err)
	}
	if got := nodeIDs(s.Nodes()); got != "c d e" {
		t.Errorf("known nodes %q, want c d e", got)
	}
	if got := testutil.ToFloat64(s.m.evicted); got != 2 {
		t.Errorf("xds_nodes_evicted_total = %v, want 2", got)
	}
	if got := testutil.ToFloat64(s.m.refused.WithLabelValues("max_known_nodes")); got != 1 {
		t.Errorf("refused max_known_nodes = %v, want 1", got)
	}
	if got := s.idx.fallback.Reserved(); got != 3 {
		t.Errorf("%d client indices reserved, want 3 (the evicted nodes' are freed at once)", got)
	}
	s.cb.OnStreamClosed(5, nil) // e leaves and comes back: the same node, nothing evicted
	connect(s, 7, "e")
	if got := testutil.ToFloat64(s.m.evicted); got != 2 {
		t.Errorf("a node coming back evicted another: xds_nodes_evicted_total = %v", got)
	}
}

func nodeIDs(nodes []Node) string {
	var out []string
	for _, n := range nodes {
		out = append(out, n.ID)
	}
	return strings.Join(out, " ")
}

// TestConnectLinesHaveAnOverallRate: a flood of fresh node ids, each
// allowed its own connect line, writes logBurst lines and then logRate a
// second; the rest are counted as suppressed.
func TestConnectLinesHaveAnOverallRate(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	var logs lockedBuffer
	s := newTestServer(t, Config{Now: func() time.Time { return now }})
	s.cb.log = slog.New(slog.NewTextHandler(&logs, nil))
	const nodes = 1000
	for i := range nodes {
		connect(s, int64(i+1), fmt.Sprint("fresh-", i))
		s.cb.OnStreamClosed(int64(i+1), nil)
	}
	now = now.Add(time.Second)
	for i := range 50 {
		connect(s, int64(nodes+i+1), fmt.Sprint("a-second-later-", i))
	}
	connected := strings.Count(logs.b.String(), `msg="node connected"`)
	if want := logBurst + int(logRate); connected != want {
		t.Errorf("%d connect lines for %d fresh nodes in a second, want %d (the burst, then the rate)", connected, nodes+50, want)
	}
	if got := strings.Count(logs.b.String(), `msg="node disconnected"`); got != logBurst {
		t.Errorf("%d disconnect lines, want %d (those of the connects logged)", got, logBurst)
	}
}

// TestRefusalLinesArePerNode: refusal lines are limited per node (one per
// 10s each, with the count held back), not one for every node together.
func TestRefusalLinesArePerNode(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	l := newLogLimiter(logEvery)
	for i := range 3 {
		if ok, _ := l.allow(logRefused, "a", now); ok != (i == 0) {
			t.Fatalf("refusal %d of a: allowed %v", i, ok)
		}
	}
	if ok, _ := l.allow(logRefused, "b", now); !ok {
		t.Fatal("the first refusal of b is held back by a's")
	}
	now = now.Add(logEvery)
	if ok, suppressed := l.allow(logRefused, "a", now); !ok || suppressed != 2 {
		t.Errorf("a after 10s: allowed %v with suppressed=%d, want true, 2", ok, suppressed)
	}
}

// TestRefusedNodesTrackedAreBounded: refused nodes are not kept, so the
// limiter tracks at most maxRefusedNodes of them; the others share one
// limit until the tracked ones' lines are older than the interval.
func TestRefusedNodesTrackedAreBounded(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	l := newLogLimiter(logEvery)
	allowed := 0
	for i := range maxRefusedNodes + 500 {
		if ok, _ := l.allow(logRefused, fmt.Sprint("n-", i), now); ok {
			allowed++
		}
	}
	if allowed != logBurst {
		t.Errorf("%d of %d refused nodes logged at once, want %d (the overall burst)", allowed, maxRefusedNodes+500, logBurst)
	}
	if len(l.last) > maxRefusedNodes+1 {
		t.Errorf("%d refused nodes tracked, want at most %d", len(l.last), maxRefusedNodes+1)
	}
	now = now.Add(logEvery)
	if ok, _ := l.allow(logRefused, "late", now); !ok {
		t.Error("once the tracked lines are old, a new node is not let through")
	}
	if len(l.last) > maxRefusedNodes+1 {
		t.Errorf("%d refused nodes tracked after the sweep", len(l.last))
	}
}

// TestDebugNodesIsPaged: /debug/nodes lists DefaultNodesPage nodes by
// default, sorted by id, with the total and the after= of the next page;
// following next visits every node once.
func TestDebugNodesIsPaged(t *testing.T) {
	s := newTestServer(t, Config{})
	const nodes = 250
	for i := range nodes {
		connect(s, int64(i+1), fmt.Sprintf("node-%03d", i))
	}
	h := s.Handler()
	get := func(query string) (int, NodesPage) {
		t.Helper()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/debug/nodes"+query, nil))
		var p NodesPage
		if rec.Code == http.StatusOK {
			if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil {
				t.Fatal(err)
			}
		}
		return rec.Code, p
	}
	_, first := get("")
	if len(first.Nodes) != DefaultNodesPage || first.Total != nodes || first.Next != "node-099" {
		t.Fatalf("first page: %d nodes, total %d, next %q", len(first.Nodes), first.Total, first.Next)
	}
	seen := 0
	for after, pages := "", 0; ; pages++ {
		_, p := get("?limit=60&after=" + after)
		for _, n := range p.Nodes {
			if n.ID <= after {
				t.Fatalf("node %s on the page after %s", n.ID, after)
			}
			after = n.ID
		}
		seen += len(p.Nodes)
		if p.Next == "" {
			break
		}
		if pages > nodes {
			t.Fatal("paging does not end")
		}
	}
	if seen != nodes {
		t.Errorf("paging visited %d nodes, want %d", seen, nodes)
	}
	if _, p := get("?limit=100000"); len(p.Nodes) != nodes {
		t.Errorf("limit past the most: %d nodes", len(p.Nodes))
	}
	for _, bad := range []string{"?limit=0", "?limit=x", "?limit=-1"} {
		if code, _ := get(bad); code != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", bad, code)
		}
	}
}
