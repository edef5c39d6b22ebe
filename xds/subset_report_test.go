package xds

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"testing"

	"github.com/xds-server/xds-server/subsetting"
)

// everyNode asks a SubsetReport for every node (of at most MaxReportNodes).
var everyNode = SubsetQuery{Limit: MaxReportNodes}

// getSubsets is GET /debug/subsets?query on s's debug handler: the status
// and, on 200, the report.
func getSubsets(t *testing.T, s *Server, query string) (int, SubsetReport) {
	t.Helper()
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/debug/subsets?"+query, nil))
	var rep SubsetReport
	if rec.Code == http.StatusOK {
		if err := json.Unmarshal(rec.Body.Bytes(), &rep); err != nil {
			t.Fatalf("%s: %v", query, err)
		}
	}
	return rec.Code, rep
}

// TestSubsetReportIsBounded: at 2,000 nodes, /debug/subsets?service=S
// returns the first 100 nodes by id and says there are 2,000 (truncated),
// while connections and balance still count every connected node; limit=
// picks how many (at most MaxReportNodes), node= exactly that node, and
// bad queries are refused. The metrics' balance agrees.
func TestSubsetReportIsBounded(t *testing.T) {
	const known, size = 2000, 4
	s := subsetServer(t, size, subsetting.Steady)
	for i := range known {
		connect(s, int64(i+1), fmt.Sprintf("n%05d", known-1-i)) // in reverse order
	}
	s.cb.OnStreamClosed(1, nil) // n01999: known, not connected
	s.Update(world(1, 12))
	s.rec.reconcile()
	full, _ := s.Subsets("svc-000", everyNode)

	code, rep := getSubsets(t, s, "service=svc-000")
	if code != http.StatusOK || len(rep.Nodes) != DefaultReportNodes || rep.KnownNodes != known || !rep.Truncated {
		t.Fatalf("default: %d, %d nodes of %d (truncated %v); want 200, %d of %d, truncated",
			code, len(rep.Nodes), rep.KnownNodes, rep.Truncated, DefaultReportNodes, known)
	}
	for i, n := range rep.Nodes {
		if want := fmt.Sprintf("n%05d", i); n.ID != want {
			t.Fatalf("node %d is %s, want %s (the first by id)", i, n.ID, want)
		}
	}
	if rep.Balance != full.Balance || !rep.Subsetting || rep.Algorithm != full.Algorithm {
		t.Errorf("default report: balance %+v (%v %s), full report %+v", rep.Balance, rep.Subsetting, rep.Algorithm, full.Balance)
	}
	if st := s.rec.subsetStats(s.reg.indexCounts(0).connected); len(st) != 1 || st[0].bal != full.Balance {
		t.Errorf("the metrics' balance %+v, the report's %+v", st, full.Balance)
	}
	total, listed := 0, 0
	reported := map[string]bool{}
	for _, n := range rep.Nodes {
		reported[n.ID] = true
	}
	for i, e := range rep.Endpoints {
		total += e.Connections
		listed += len(e.Nodes)
		if e.Connections != full.Endpoints[i].Connections {
			t.Errorf("endpoint %s: %d connections, full report %d", e.ID, e.Connections, full.Endpoints[i].Connections)
		}
		for _, id := range e.Nodes {
			if !reported[id] {
				t.Errorf("endpoint %s lists node %s, which the report leaves out", e.ID, id)
			}
		}
	}
	if total != (known-1)*size || listed != DefaultReportNodes*size {
		t.Errorf("connections %d (nodes listed %d), want %d (every connected node, %d each) and %d listed",
			total, listed, (known-1)*size, size, DefaultReportNodes*size)
	}

	if code, rep := getSubsets(t, s, "service=svc-000&limit=7"); code != http.StatusOK || len(rep.Nodes) != 7 || rep.Nodes[6].ID != "n00006" {
		t.Errorf("limit=7: %d, %d nodes", code, len(rep.Nodes))
	}
	if code, rep := getSubsets(t, s, "service=svc-000&limit=0"); code != http.StatusOK || len(rep.Nodes) != 0 || rep.Balance != full.Balance {
		t.Errorf("limit=0: %d, %d nodes, balance %+v", code, len(rep.Nodes), rep.Balance)
	}
	if code, rep := getSubsets(t, s, "service=svc-000&limit=50000"); code != http.StatusOK || len(rep.Nodes) != known || rep.Truncated ||
		!slices.IsSortedFunc(rep.Nodes, func(a, b SubsetNode) int { return cmp.Compare(a.ID, b.ID) }) {
		t.Errorf("limit=50000: %d, %d nodes (truncated %v), want all %d, sorted", code, len(rep.Nodes), rep.Truncated, known)
	}

	code, one := getSubsets(t, s, "service=svc-000&node=n01234&limit=3")
	want, _ := s.SubsetOf("svc-000", "n01234")
	if code != http.StatusOK || len(one.Nodes) != 1 || !equalNode(one.Nodes[0], want) || one.KnownNodes != known || !one.Truncated {
		t.Errorf("node=n01234: %d, %+v; want exactly %+v, of %d", code, one.Nodes, want, known)
	}
	for _, e := range one.Endpoints {
		if len(e.Nodes) > 1 || (len(e.Nodes) == 1 && (e.Nodes[0] != "n01234" || !slices.Contains(want.Endpoints, e.ID))) {
			t.Errorf("node=n01234: endpoint %s lists %v", e.ID, e.Nodes)
		}
	}
	for query, wantCode := range map[string]int{
		"service=svc-000&node=nobody": http.StatusNotFound,
		"service=nope":                http.StatusNotFound,
		"service=svc-000&limit=-1":    http.StatusBadRequest,
		"service=svc-000&limit=many":  http.StatusBadRequest,
		"limit=5":                     http.StatusBadRequest,
	} {
		if code, _ := getSubsets(t, s, query); code != wantCode {
			t.Errorf("%s: %d, want %d", query, code, wantCode)
		}
	}
}

func equalNode(a, b SubsetNode) bool {
	return a.ID == b.ID && a.Group == b.Group && a.Index == b.Index && a.Connected == b.Connected &&
		slices.Equal(a.Subset, b.Subset) && slices.Equal(a.Replacements, b.Replacements) && slices.Equal(a.Endpoints, b.Endpoints)
}

// TestSubsetReportCostFollowsTheLimit: a default report's allocations do
// not grow with the nodes: at 2,000 and at 8,000 nodes it allocates about
// as often, fewer times than once per node, and its bytes stay bounded.
func TestSubsetReportCostFollowsTheLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("8,000 nodes")
	}
	measure := func(nodes int) (allocs float64, bytes uint64) {
		s := subsetServer(t, 20, subsetting.Steady)
		for i := range nodes {
			connect(s, int64(i+1), fmt.Sprintf("node-%05d", i))
		}
		s.Update(world(1, 200))
		s.rec.reconcile()
		q := SubsetQuery{Limit: DefaultReportNodes}
		allocs = testing.AllocsPerRun(20, func() { s.Subsets("svc-000", q) })
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		const runs = 20
		for range runs {
			s.Subsets("svc-000", q)
		}
		runtime.ReadMemStats(&after)
		return allocs, (after.TotalAlloc - before.TotalAlloc) / runs
	}
	a2, b2 := measure(2000)
	a8, b8 := measure(8000)
	t.Logf("default report, 200 endpoints, subset size 20: %.0f allocs, %d B per call at 2,000 nodes; %.0f allocs, %d B at 8,000",
		a2, b2, a8, b8)
	// Per call: the 100 nodes' lists and the endpoints' node lists (a
	// fixed count), and a map of the connected nodes per client index
	// (bytes that follow the distinct indices, as the console's summary).
	// The full report of every node was 188 MB and 60,000 allocations at
	// 10,000 nodes of 1,000 endpoints (BenchmarkConsoleSubsets).
	if a2 > 2000 || a8 > a2+600 {
		t.Errorf("allocations per call: %.0f at 2,000 nodes, %.0f at 8,000; want under one per node, growing by under one per 10 nodes", a2, a8)
	}
	if b8 > 3<<20 {
		t.Errorf("bytes per call at 8,000 nodes: %d; want under 3 MiB", b8)
	}
}

// TestSubsetStatsMemo: a scrape after no pass and no connect or
// disconnect gets the last figures (the same answer, not computed
// again); a node that connects, or a pass, makes the next scrape compute
// them afresh, and they agree with /debug/subsets.
func TestSubsetStatsMemo(t *testing.T) {
	s := subsetServer(t, 4, subsetting.Steady)
	for i := range 40 {
		connect(s, int64(i+1), fmt.Sprintf("n%03d", i))
	}
	s.Update(world(1, 12))
	s.rec.reconcile()
	stats := func() []subsetStat { return s.rec.subsetStats(s.reg.indexCounts(0).connected) }
	first := stats()
	if again := stats(); &again[0] != &first[0] {
		t.Error("a scrape with nothing changed computed the figures again")
	}
	connect(s, 41, "n040")
	after := stats()
	if &after[0] == &first[0] {
		t.Fatal("a scrape after a node connected got the old figures")
	}
	full, _ := s.Subsets("svc-000", everyNode)
	if after[0].bal != full.Balance {
		t.Errorf("after a connect: the metrics' balance %+v, the report's %+v", after[0].bal, full.Balance)
	}
	s.Update(world(1, 11))
	s.rec.reconcile()
	if next := stats(); &next[0] == &after[0] {
		t.Error("a scrape after a pass got the old figures")
	}
}
