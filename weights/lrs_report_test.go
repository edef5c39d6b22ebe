package weights

import (
	"fmt"
	"math"
	"reflect"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	lrsv3 "github.com/envoyproxy/go-control-plane/envoy/service/load_stats/v3"
)

func TestLRSReports(t *testing.T) {
	at := lrsT0
	locality := func(cs *endpointv3.ClusterStats, ok uint64) *endpointv3.ClusterStats {
		cs.UpstreamLocalityStats = append(cs.UpstreamLocalityStats, &endpointv3.UpstreamLocalityStats{TotalSuccessfulRequests: ok})
		return cs
	}
	twoLocalities := func(cs *endpointv3.ClusterStats, ep *endpointv3.UpstreamEndpointStats) *endpointv3.ClusterStats {
		cs.UpstreamLocalityStats = append(cs.UpstreamLocalityStats, &endpointv3.UpstreamLocalityStats{UpstreamEndpointStats: []*endpointv3.UpstreamEndpointStats{ep}})
		return cs
	}
	pipe := &endpointv3.UpstreamEndpointStats{Address: &corev3.Address{Address: &corev3.Address_Pipe{Pipe: &corev3.Pipe{Path: "/tmp/s"}}}}
	for name, tc := range map[string]struct {
		stats   []*endpointv3.ClusterStats
		elapsed time.Duration
		want    []Report
		skipped map[string]int
	}{
		"an endpoint in two localities sums its load": {
			stats: []*endpointv3.ClusterStats{twoLocalities(clusterStats("api", 2*time.Second,
				endpointStats("10.0.0.1:8080", 10, 2, metric("cpu_utilization", 1, 0.2))), endpointStats("10.0.0.1:8080", 0, 0))},
			want: []Report{{Service: "api", Endpoint: "a", Node: "n", At: at, QPS: 6, EPS: 1, CPU: 0.2, Named: map[string]float64{"cpu_utilization": 0.2}}},
		},
		"a cluster reported twice is summed": {
			stats: []*endpointv3.ClusterStats{
				clusterStats("api", 2*time.Second, endpointStats("10.0.0.1:8080", 10, 0, metric("m", 1, 1))),
				clusterStats("api", 4*time.Second, endpointStats("10.0.0.1:8080", 8, 0, metric("m", 3, 9))),
			},
			want: []Report{{Service: "api", Endpoint: "a", Node: "n", At: at, QPS: 7, Named: map[string]float64{"m": 2.5}}},
		},
		"a traffic policy's subset cluster reports its service's endpoints": {
			stats: []*endpointv3.ClusterStats{
				clusterStats("api~v2", 2*time.Second, endpointStats("10.0.0.1:8080", 10, 0)),
				clusterStats("api", 2*time.Second, endpointStats("10.0.0.1:8080", 4, 0)),
			},
			want: []Report{{Service: "api", Endpoint: "a", Node: "n", At: at, QPS: 7}},
		},
		"no interval uses the elapsed time": {
			stats:   []*endpointv3.ClusterStats{clusterStats("api", 0, endpointStats("10.0.0.2:8080", 30, 0))},
			elapsed: 3 * time.Second,
			want:    []Report{{Service: "api", Endpoint: "b", Node: "n", At: at, QPS: 10}},
		},
		"no interval and no elapsed time": {
			stats:   []*endpointv3.ClusterStats{clusterStats("api", 0, endpointStats("10.0.0.2:8080", 30, 0))},
			skipped: map[string]int{skipNoInterval: 1},
		},
		"skips": {
			stats: []*endpointv3.ClusterStats{
				clusterStats("", time.Second, endpointStats("10.0.0.2:8080", 1, 0)),
				clusterStats("api", time.Second, pipe, endpointStats("10.0.0.7:8080", 1, 0)),
				locality(clusterStats("api", time.Second), 5),
			},
			skipped: map[string]int{skipNoCluster: 1, skipNoAddress: 1, skipUnknown: 1, skipLocalityOnly: 1},
		},
		"bad metrics are dropped, out of range utilization stays named": {
			stats: []*endpointv3.ClusterStats{clusterStats("api", time.Second, endpointStats("10.0.0.3:8080", 1, 0,
				metric("cpu_utilization", 1, 250), metric("application_utilization", 0, 1),
				metric("nan", 1, math.NaN()), metric("", 1, 1), metric("ok", 2, 1)))},
			want: []Report{{Service: "api", Endpoint: "c", Node: "n", At: at, QPS: 1,
				Named: map[string]float64{"cpu_utilization": 250, "ok": 0.5}}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			got, skipped := lrsReports("n", &lrsv3.LoadStatsRequest{ClusterStats: tc.stats}, at, tc.elapsed, lrsResolveMap, nil)
			if len(got) == 0 {
				got = nil
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("reports:\n got %+v\nwant %+v", got, tc.want)
			}
			if tc.skipped == nil {
				tc.skipped = map[string]int{}
			}
			if !reflect.DeepEqual(skipped, tc.skipped) {
				t.Errorf("skipped %v, want %v", skipped, tc.skipped)
			}
			for _, r := range got {
				if err := r.Validate(); err != nil {
					t.Errorf("invalid report: %v", err)
				}
			}
		})
	}
}

func TestLRSReportsKeepAtMostMaxNamed(t *testing.T) {
	var ms []*endpointv3.EndpointLoadMetricStats
	for i := range MaxNamed + 5 {
		ms = append(ms, metric(fmt.Sprintf("m%03d", i), 1, 1))
	}
	stats := []*endpointv3.ClusterStats{clusterStats("api", time.Second, endpointStats("10.0.0.1:8080", 1, 0, ms...))}
	got, _ := lrsReports("n", &lrsv3.LoadStatsRequest{ClusterStats: stats}, lrsT0, 0, lrsResolveMap, nil)
	if len(got) != 1 || len(got[0].Named) != MaxNamed || got[0].Validate() != nil {
		t.Fatalf("reports %+v, want one valid report with %d named metrics", got, MaxNamed)
	}
	if _, ok := got[0].Named["m000"]; !ok {
		t.Errorf("named metrics %v lack m000: want the first by name", got[0].Named)
	}
}

// TestLRSReportsSpreadLocalityLoad: grpc-go reports a locality's load
// without endpoint stats; it is spread over the node's endpoints by the
// split (the shares of the weights it was sent), and skipped without one.
func TestLRSReportsSpreadLocalityLoad(t *testing.T) {
	localityOnly := func(ok, failed uint64) *endpointv3.UpstreamLocalityStats {
		return &endpointv3.UpstreamLocalityStats{TotalSuccessfulRequests: ok, TotalErrorRequests: failed, TotalIssuedRequests: ok + failed}
	}
	stats := func() []*endpointv3.ClusterStats {
		cs := clusterStats("api", 2*time.Second)
		cs.UpstreamLocalityStats = append(cs.UpstreamLocalityStats, localityOnly(30, 10), localityOnly(20, 0))
		return []*endpointv3.ClusterStats{cs}
	}
	split := func(node, cluster string) ([]string, []float64, bool) {
		if node != "n" || cluster != "api" {
			return nil, nil, false
		}
		return []string{"a", "b"}, []float64{0.75, 0.25}, true
	}
	got, skipped := lrsReports("n", &lrsv3.LoadStatsRequest{ClusterStats: stats()}, lrsT0, 0, lrsResolveMap, split)
	want := []Report{ // 60 requests (10 failed) in 2s: 30/s, 5/s failed
		{Service: "api", Endpoint: "a", Node: "n", At: lrsT0, QPS: 22.5, EPS: 3.75},
		{Service: "api", Endpoint: "b", Node: "n", At: lrsT0, QPS: 7.5, EPS: 1.25},
	}
	if !reflect.DeepEqual(got, want) || len(skipped) != 0 {
		t.Errorf("spread: reports %+v, skipped %v; want %+v and none skipped", got, skipped, want)
	}
	got, skipped = lrsReports("other", &lrsv3.LoadStatsRequest{ClusterStats: stats()}, lrsT0, 0, lrsResolveMap, split)
	if len(got) != 0 || skipped[skipLocalityOnly] != 2 {
		t.Errorf("no split known: reports %+v, skipped %v; want none and 2 locality_only", got, skipped)
	}
}
