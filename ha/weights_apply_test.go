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
// undecodable values, keeps the last table when the key is gone, and sets
// the age metric from an injected clock.
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
	})
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
	w.apply(api.KVPairs{}) // everything gone: the last table stays served
	if got, seq, ok := w.Table(); !ok || seq != 7 || got.Weights["api"]["a"] != 3 {
		t.Fatalf("table %v %d %v, want the last one kept", got, seq, ok)
	}
	if n := testutil.CollectAndCount(w.ages); n != 0 {
		t.Fatalf("%d age series left for replicas gone", n)
	}
	if st := w.Status(); st.Leader != "" {
		t.Fatalf("leader %q with no held leader key", st.Leader)
	}
}
