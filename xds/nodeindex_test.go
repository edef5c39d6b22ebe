package xds

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/xds-server/xds-server/nodeindex"
)

// fakeClock is a settable clock for tables and reconcilers.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

func TestMetadataIndex(t *testing.T) {
	for name, tc := range map[string]struct {
		md        map[string]any
		wantIndex int
		wantGroup string
		wantErr   string
	}{
		"flat key":           {md: map[string]any{"subset.index": 3.0}, wantIndex: 3},
		"nested with group":  {md: map[string]any{"subset": map[string]any{"index": 7.0, "group": "edge"}}, wantIndex: 7, wantGroup: "edge"},
		"string number":      {md: map[string]any{"subset.index": " 12 "}, wantIndex: 12},
		"flat group":         {md: map[string]any{"subset.index": 0.0, "subset.group": "a"}, wantGroup: "a"},
		"missing":            {md: map[string]any{"other": 1.0}, wantErr: "no subset.index"},
		"nil metadata":       {md: nil, wantErr: "no subset.index"},
		"negative":           {md: map[string]any{"subset.index": -1.0}, wantErr: "not an integer"},
		"fraction":           {md: map[string]any{"subset.index": 1.5}, wantErr: "not an integer"},
		"not a number":       {md: map[string]any{"subset.index": "x"}, wantErr: "not a number"},
		"wrong type":         {md: map[string]any{"subset.index": true}, wantErr: "want a number"},
		"nested not a map":   {md: map[string]any{"subset": "3"}, wantErr: "no subset.index"},
		"absurdly large int": {md: map[string]any{"subset.index": 1e12}, wantErr: "not an integer"},
	} {
		t.Run(name, func(t *testing.T) {
			g, i, err := metadataIndex(tc.md)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || i != tc.wantIndex || g != tc.wantGroup {
				t.Fatalf("got (%q, %d, %v), want (%q, %d)", g, i, err, tc.wantGroup, tc.wantIndex)
			}
		})
	}
}

func TestSubsetConfigValidate(t *testing.T) {
	for name, tc := range map[string]struct {
		cfg     SubsetConfig
		wantErr string
	}{
		"defaults":           {},
		"metadata group":     {cfg: SubsetConfig{IndexSource: IndexMetadata, GroupBy: "metadata.team"}},
		"bad source":         {cfg: SubsetConfig{IndexSource: "etcd"}, wantErr: "subsetting.index_source"},
		"negative ttl":       {cfg: SubsetConfig{IndexTTL: -time.Second}, wantErr: "subsetting.index_ttl"},
		"bad group":          {cfg: SubsetConfig{GroupBy: "rack"}, wantErr: "subsetting.group_by"},
		"empty metadata key": {cfg: SubsetConfig{GroupBy: "metadata."}, wantErr: "subsetting.group_by"},
	} {
		t.Run(name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if tc.wantErr == "" && err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("err = %v, want one naming %s", err, tc.wantErr)
			}
		})
	}
}

func TestIndexerGroups(t *testing.T) {
	n := Node{ID: "n", Cluster: "web", Locality: map[string]string{"zone": "z1"},
		Metadata: map[string]any{"team": "blue", "subset": map[string]any{"index": 4.0}}}
	for name, tc := range map[string]struct {
		cfg        SubsetConfig
		wantGroup  string
		wantIndex  int
		wantSource string
	}{
		"cluster (default)":   {cfg: SubsetConfig{}, wantGroup: "web", wantSource: IndexLocal},
		"none":                {cfg: SubsetConfig{GroupBy: GroupByNone}, wantGroup: "", wantSource: IndexLocal},
		"zone":                {cfg: SubsetConfig{GroupBy: GroupByZone}, wantGroup: "z1", wantSource: IndexLocal},
		"metadata key":        {cfg: SubsetConfig{GroupBy: "metadata.team"}, wantGroup: "blue", wantSource: IndexLocal},
		"index from metadata": {cfg: SubsetConfig{IndexSource: IndexMetadata}, wantGroup: "web", wantIndex: 4, wantSource: IndexMetadata},
	} {
		t.Run(name, func(t *testing.T) {
			x := newIndexer(tc.cfg, nil, testMetrics(), quietLogger())
			g, i, src := x.assign(n)
			if g != tc.wantGroup || i != tc.wantIndex || src != tc.wantSource {
				t.Errorf("assign = (%q, %d, %s), want (%q, %d, %s)", g, i, src, tc.wantGroup, tc.wantIndex, tc.wantSource)
			}
		})
	}
}

// failingTable fails every call.
type failingTable struct{}

func (failingTable) Acquire(context.Context, string, string) (int, error) {
	return 0, context.DeadlineExceeded
}
func (failingTable) Release(context.Context, string, string) error { return context.DeadlineExceeded }

func TestIndexerFallsBackWhenTheTableFails(t *testing.T) {
	m := testMetrics()
	x := newIndexer(SubsetConfig{IndexSource: IndexConsul, Table: failingTable{}}, nil, m, quietLogger())
	a := Node{ID: "a", Cluster: "c"}
	g, i, src := x.assign(a)
	if i != 0 || src != indexFallback {
		t.Fatalf("assign = (%q, %d, %s), want index 0 from the fallback", g, i, src)
	}
	b := Node{ID: "b", Cluster: "c"}
	if _, i, _ := x.assign(b); i != 1 {
		t.Errorf("second node through the fallback: %d, want 1", i)
	}
	a.Group, a.Index, a.IndexSource = g, i, src
	x.release(a) // goes to the fallback table, which does not fail
	if got := testutil.ToFloat64(m.indexErrors.WithLabelValues("acquire")); got != 2 {
		t.Errorf("acquire errors = %v, want 2", got)
	}
	if got := testutil.ToFloat64(m.indexErrors.WithLabelValues("release")); got != 0 {
		t.Errorf("release errors = %v, want 0 (fallback indices are released locally)", got)
	}
}

func TestNodeKeepsItsIndexAcrossReconnect(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1_000_000, 0)}
	s := newTestServer(t, Config{Subsetting: SubsetConfig{IndexTTL: time.Minute}, Now: clock.now})
	cb := s.cb
	index := func(id string) int {
		t.Helper()
		n, ok := s.reg.get(id)
		if !ok {
			t.Fatalf("node %s unknown", id)
		}
		return n.Index
	}
	connect(s, 1, "a")
	connect(s, 2, "b")
	cb.OnStreamClosed(1, nil) // a goes away
	connect(s, 3, "c")
	if got := index("c"); got != 2 {
		t.Errorf("c while a's index is reserved: %d, want 2", got)
	}
	clock.advance(30 * time.Second)
	connect(s, 4, "a")
	if got := index("a"); got != 0 {
		t.Errorf("a reconnecting within the TTL: %d, want its old 0", got)
	}
	cb.OnStreamClosed(2, nil) // b goes away for longer than the TTL
	clock.advance(2 * time.Minute)
	connect(s, 5, "d")
	if got := index("d"); got != 1 {
		t.Errorf("d after b's reservation expired: %d, want the freed 1", got)
	}
}

// testMetrics are collectors registered nowhere.
func testMetrics() *metrics {
	m, _ := newMetrics(nil)
	return m
}

// countingTable is a Local that counts Release calls.
type countingTable struct {
	*nodeindex.Local
	releases atomic.Int64
}

func (c *countingTable) Release(ctx context.Context, group, node string) error {
	c.releases.Add(1)
	return c.Local.Release(ctx, group, node)
}

// A node that leaves while the server runs lets go of its index; nodes
// that leave once it shuts down do not (the table's Close lets go of
// every index of the replica in one write).
func TestNoReleasePerNodeWhileShuttingDown(t *testing.T) {
	table := &countingTable{Local: nodeindex.NewLocal(time.Minute, time.Now)}
	s := newTestServer(t, Config{Subsetting: SubsetConfig{IndexSource: IndexConsul, Table: table}})
	connect(s, 1, "a")
	connect(s, 2, "b")
	s.cb.OnStreamClosed(1, nil)
	if got := table.releases.Load(); got != 1 {
		t.Fatalf("releases after a left while serving: %d, want 1", got)
	}
	s.shutting.Store(true) // what StopAccepting sets first
	s.cb.OnStreamClosed(2, nil)
	if got := table.releases.Load(); got != 1 {
		t.Errorf("releases after b left while shutting down: %d, want still 1", got)
	}
}

// hookTable is a Local that runs beforeRelease (once) before a release.
type hookTable struct {
	*nodeindex.Local
	beforeRelease func()
}

func (h *hookTable) Release(ctx context.Context, group, node string) error {
	if f := h.beforeRelease; f != nil {
		h.beforeRelease = nil
		f()
	}
	return h.Local.Release(ctx, group, node)
}

// A node's stream attaches between its last stream's detach and the
// release of its index: the new stream acquired the index before the
// release marked it free, so the release is taken back. Without that,
// the index would go to another node once its reservation ran out,
// while the node still used it.
func TestReattachDuringReleaseKeepsTheIndex(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1_000_000, 0)}
	table := &hookTable{Local: nodeindex.NewLocal(time.Minute, clock.now)}
	s := newTestServer(t, Config{Subsetting: SubsetConfig{IndexSource: IndexConsul, Table: table}, Now: clock.now})
	connect(s, 1, "a")
	table.beforeRelease = func() { connect(s, 2, "a") } // a is back, on stream 2
	s.cb.OnStreamClosed(1, nil)
	if n, _ := s.reg.get("a"); n.Streams != 1 || n.Index != 0 {
		t.Fatalf("a after reattaching: %d stream(s), index %d; want 1 stream and index 0", n.Streams, n.Index)
	}
	clock.advance(2 * time.Minute) // past any reservation
	connect(s, 3, "b")
	if n, _ := s.reg.get("b"); n.Index == 0 {
		t.Errorf("b got index 0, which a (connected) still uses")
	}
}
