package xds

import (
	"testing"
	"time"

	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
)

// TestPassStages: a pass's loop stages are observed when it is sealed,
// its write stages once every response it made due is sent, found
// unneeded or its node gone; the read noted before the update starts it.
func TestPassStages(t *testing.T) {
	hist := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "h", Buckets: []float64{1}}, []string{"stage"})
	ts := passTraces{hist: hist}
	t0 := time.Unix(1000, 0)
	ts.noteRead(SourceRead{At: t0, IndexFrom: 7, IndexTo: 9})
	ts.updated(t0.Add(10 * time.Millisecond))
	ts.updated(t0.Add(20 * time.Millisecond)) // the burst's oldest change stays
	p := ts.start(t0.Add(60 * time.Millisecond))
	ts.translated(p, t0.Add(70*time.Millisecond))

	var pushes pushTimes
	s0, s1 := testSnapshot(t, 2), testSnapshot(t, 2, 0)
	for _, id := range []string{"a", "b", "c"} {
		pushes.set(id, s0, s1, t0, p)
	}
	pushes.sent("a", resource.EndpointType, t0.Add(80*time.Millisecond)) // before the seal
	ts.seal(p, t0.Add(90*time.Millisecond), 3)
	if n := testutil.CollectAndCount(hist); n != 4 {
		t.Fatalf("%d stages observed at the seal, want the loop's 4", n)
	}
	pushes.upToDate("b", resource.EndpointType, s1) // nothing to send
	pushes.sent("c", resource.EndpointType, t0.Add(200*time.Millisecond))
	if n := testutil.CollectAndCount(hist); n != 6 {
		t.Fatalf("%d stages observed once every response was sent, want 6", n)
	}
	got := ts.list()
	if len(got) != 1 {
		t.Fatalf("list: %+v", got)
	}
	want := PassTimes{Seq: 1, Read: SourceRead{At: t0, IndexFrom: 7, IndexTo: 9}, Changed: t0.Add(10 * time.Millisecond),
		Started: t0.Add(60 * time.Millisecond), Translated: t0.Add(70 * time.Millisecond), Cached: t0.Add(90 * time.Millisecond),
		Nodes: 3, Awaited: 3, Writes: 2, FirstWrite: t0.Add(80 * time.Millisecond), LastWrite: t0.Add(200 * time.Millisecond)}
	if !equalPass(got[0], want) {
		t.Errorf("pass = %+v\nwant %+v", got[0], want)
	}
	for stage, want := range map[string]float64{StageDiscovery: 0.01, StageDebounce: 0.05, StageTranslate: 0.01,
		StageCache: 0.02, StageFirstWrite: 0.01, StageLastWrite: 0.13} {
		if got, _ := sampleSum(t, hist, stage); got < want-1e-9 || got > want+1e-9 {
			t.Errorf("stage %s = %v s, want %v", stage, got, want)
		}
	}

	q := ts.start(t0.Add(time.Second)) // a pass without a read (weights) and a node that leaves
	pushes.set("a", s1, s0, t0, q)
	ts.seal(q, t0.Add(time.Second), 1)
	pushes.forget("a")
	if got := ts.list(); len(got) != 2 || got[1].Pending != 0 || !got[1].Read.At.IsZero() || !got[1].Changed.Equal(t0.Add(time.Second)) {
		t.Errorf("second pass: %+v", got)
	}
	if _, n := sampleSum(t, hist, StageLastWrite); n != 1 {
		t.Errorf("%d last_write observations; a pass without writes observes none", n)
	}
	if _, n := sampleSum(t, hist, StageDiscovery); n != 1 {
		t.Errorf("%d discovery observations; a pass without a read observes none", n)
	}
}

func equalPass(a, b PassTimes) bool {
	return a.Seq == b.Seq && a.Read.At.Equal(b.Read.At) && a.Read.IndexFrom == b.Read.IndexFrom && a.Read.IndexTo == b.Read.IndexTo &&
		a.Changed.Equal(b.Changed) && a.Started.Equal(b.Started) && a.Translated.Equal(b.Translated) && a.Cached.Equal(b.Cached) &&
		a.Nodes == b.Nodes && a.Awaited == b.Awaited && a.Writes == b.Writes && a.Pending == b.Pending &&
		a.FirstWrite.Equal(b.FirstWrite) && a.LastWrite.Equal(b.LastWrite)
}

// sampleSum is the sum and count of stage's observations in hist.
func sampleSum(t *testing.T, hist *prometheus.HistogramVec, stage string) (float64, uint64) {
	t.Helper()
	h, err := hist.GetMetricWithLabelValues(stage)
	if err != nil {
		t.Fatal(err)
	}
	var m dto.Metric
	if err := h.(prometheus.Metric).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleSum(), m.GetHistogram().GetSampleCount()
}
