package main

import (
	"testing"
	"time"
)

// TestParseHostStats: each host of the lab cluster in Envoy's
// /clusters?format=json becomes its backend's index, weight and request
// counters (uint64 stats come as strings); other clusters are skipped, an
// unknown address is backend -1.
func TestParseHostStats(t *testing.T) {
	b := []byte(`{"cluster_statuses":[
 {"name":"other","host_statuses":[{"address":{"socket_address":{"address":"127.0.0.1","port_value":1}},"weight":9}]},
 {"name":"lab","host_statuses":[
  {"address":{"socket_address":{"address":"127.0.0.1","port_value":4001}},"weight":10000,
   "stats":[{"name":"rq_active","value":"772","type":"GAUGE"},{"name":"rq_total","value":"5000"},{"name":"rq_timeout","value":"3"},{"name":"cx_active","value":"1","type":"GAUGE"}]},
  {"address":{"socket_address":{"address":"127.0.0.1","port_value":4999}},"weight":100}]}]}`)
	hs, err := parseHostStats(b, "lab", map[string]int{"127.0.0.1:4001": 1})
	if err != nil {
		t.Fatal(err)
	}
	want := []envoyHostSample{{Backend: 1, Weight: 10000, RqActive: 772, RqTotal: 5000, RqTimeout: 3, CxActive: 1}, {Backend: -1, Weight: 100}}
	if len(hs) != len(want) || hs[0] != want[0] || hs[1] != want[1] {
		t.Errorf("hosts %+v, want %+v", hs, want)
	}
	if _, err := parseHostStats(b, "missing", nil); err == nil {
		t.Error("a cluster Envoy does not have: no error")
	}
}

// TestTimeline: events count in the second of the run they fall in.
func TestTimeline(t *testing.T) {
	var tl timeline
	t0 := time.Unix(1000, 0)
	for _, d := range []time.Duration{0, 999 * time.Millisecond, time.Second, 11500 * time.Millisecond} {
		tl.add(t0, t0.Add(d))
	}
	got := tl.snapshot()
	if len(got) != 3 || got[0] != 2 || got[1] != 1 || got[11] != 1 {
		t.Errorf("by second %v, want 0:2 1:1 11:1", got)
	}
}
