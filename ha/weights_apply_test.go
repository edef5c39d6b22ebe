package ha

import (
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/xds-server/xds-server/weights"
)

func mustEncode(t *testing.T, v any) []byte {
	t.Helper()
	b, err := encodeGzipJSON(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// apply (the watch's result) takes summaries by their key's replica, skips
// undecodable values, reports no table when the key is gone (a table seen
// again is a new one, even at the ModifyIndex of the last: a restarted
// Consul's indexes start over), and sets the age metric from an injected
// clock.
func TestWeightsApply(t *testing.T) {
	client, err := api.NewClient(api.DefaultConfig()) // never called: apply does no I/O
	if err != nil {
		t.Fatal(err)
	}
	now := time.UnixMilli(1_700_000_010_000)
	var errs []string
	w, err := NewWeights(WeightsConfig{Client: client, Prefix: "p/", Replica: "xds-1", Now: func() time.Time { return now },
		CountError: func(op string) { errs = append(errs, op) }, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	tab := weights.SharedTable{At: 1, Weights: map[string]map[string]uint32{"api": {"a": 3}}}
	w.apply(api.KVPairs{
		{Key: "p/weights/summaries/xds-2", Value: mustEncode(t, weights.Summary{Replica: "forged", At: 1_700_000_000_000})},
		{Key: "p/weights/summaries/xds-3", Value: []byte("not gzip")},
		{Key: "p/weights/table", Value: mustEncode(t, tab), ModifyIndex: 7},
		{Key: "p/weights/leader", Value: []byte("xds-2"), Session: "s1"},
	}, 9)
	sums := w.Summaries()
	if len(sums) != 1 || sums[0].Replica != "xds-2" {
		t.Fatalf("summaries %+v, want xds-2's only (named by its key)", sums)
	}
	if len(errs) != 1 || errs[0] != "decode" {
		t.Fatalf("errors %v, want one decode", errs)
	}
	if got := testutil.ToFloat64(w.ages.WithLabelValues("xds-2")); got != 10 {
		t.Fatalf("age %v, want 10", got)
	}
	if st := w.Status(); st.Leader != "xds-2" || st.IsLeader || st.SummaryAge["xds-2"] != 10 {
		t.Fatalf("status %+v", st)
	}
	if ops := w.staleOps("session"); len(ops) != 0 {
		t.Fatalf("deletes %v of a 10s old summary", ops)
	}
	now = now.Add(10 * time.Minute) // xds-2's summary is now older than SummaryTTL (10m)
	if ops := w.staleOps(""); len(ops) != 0 {
		t.Fatal("a replica that does not lead deletes summaries")
	}
	if ops := w.staleOps("session"); len(ops) != 1 || ops[0].KV.Verb != api.KVDelete || ops[0].KV.Key != "p/weights/summaries/xds-2" {
		t.Fatalf("stale ops %+v, want xds-2's summary deleted", ops)
	}
	_, seq1, ok := w.Table()
	if !ok {
		t.Fatal("no table")
	}
	w.apply(api.KVPairs{{Key: "p/weights/table", Value: mustEncode(t, tab), ModifyIndex: 7}}, 10) // the same table read again
	if _, seq, _ := w.Table(); seq != seq1 {
		t.Fatalf("the same table read again changed the sequence %d -> %d", seq1, seq)
	}
	w.apply(api.KVPairs{}, 3) // everything gone (Consul lost its state)
	if _, _, ok := w.Table(); ok {
		t.Fatal("a table is reported while KV has none")
	}
	if st := w.Status(); st.TableAt.IsZero() {
		t.Fatal("the status forgot the last table seen")
	}
	tab.Weights["api"]["a"] = 4
	w.apply(api.KVPairs{{Key: "p/weights/table", Value: mustEncode(t, tab), ModifyIndex: 7}}, 7) // written again, same index
	if got, seq, ok := w.Table(); !ok || seq == seq1 || got.Weights["api"]["a"] != 4 {
		t.Fatalf("table %v %d %v, want the new one under a new sequence (was %d)", got, seq, ok, seq1)
	}
	w.apply(api.KVPairs{}, 8)
	if n := testutil.CollectAndCount(w.ages); n != 0 {
		t.Fatalf("%d age series left for replicas gone", n)
	}
	if st := w.Status(); st.Leader != "" {
		t.Fatalf("leader %q with no held leader key", st.Leader)
	}
}

// A summary this replica wrote and a listing lacks (Consul lost its state,
// or the key was deleted) is written again at the next tick although its
// content did not change; a listing older than the write does not count.
func TestWeightsApplyOwnSummaryLost(t *testing.T) {
	client, err := api.NewClient(api.DefaultConfig()) // never called: apply does no I/O
	if err != nil {
		t.Fatal(err)
	}
	w, err := NewWeights(WeightsConfig{Client: client, Prefix: "p/", Replica: "xds-1", Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	sum := weights.Summary{Replica: "xds-1", At: 1, Services: []weights.ServiceSummary{{Name: "api"}}}
	own := api.KVPairs{{Key: "p/weights/summaries/xds-1", Value: mustEncode(t, sum), ModifyIndex: 20}}
	wrote := func(idx uint64) {
		ops, content, _ := w.summaryOps(&sum, nil)
		if len(ops) != 1 {
			t.Fatalf("summary ops %v, want one write", ops)
		}
		w.written, w.wroteIdx = content, idx
	}
	again := func() bool { ops, _, _ := w.summaryOps(&sum, w.written); return len(ops) == 1 }

	wrote(20)
	if again() {
		t.Fatal("an unchanged summary is written again")
	}
	w.apply(api.KVPairs{}, 15) // a listing from before the write
	if again() {
		t.Fatal("a listing older than the write made it write again")
	}
	w.apply(own, 20)
	w.apply(api.KVPairs{}, 25) // deleted after it was written
	if !again() {
		t.Fatal("a summary gone from KV is not written again")
	}
	wrote(40)
	w.apply(own, 40)
	w.apply(api.KVPairs{}, 6) // Consul back empty: its index started over
	if !again() {
		t.Fatal("a summary lost with Consul's state is not written again")
	}
}
