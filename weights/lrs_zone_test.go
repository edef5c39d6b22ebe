package weights

import (
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	lrsv3 "github.com/envoyproxy/go-control-plane/envoy/service/load_stats/v3"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestLRSCountsRequestsInAndOutOfZone(t *testing.T) {
	m, err := newLRSMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	s := &LRS{cfg: LRSConfig{Known: func(svc string) bool { return svc == "api" }}, m: m}
	loc := func(region, zone string) *corev3.Locality { return &corev3.Locality{Region: region, Zone: zone} }
	up := func(l *corev3.Locality, ok, failed uint64) *endpointv3.UpstreamLocalityStats {
		return &endpointv3.UpstreamLocalityStats{Locality: l, TotalSuccessfulRequests: ok, TotalErrorRequests: failed}
	}
	req := &lrsv3.LoadStatsRequest{ClusterStats: []*endpointv3.ClusterStats{
		{ClusterName: "api", UpstreamLocalityStats: []*endpointv3.UpstreamLocalityStats{
			up(loc("r1", "a"), 90, 5), up(loc("r1", "b"), 4, 1), up(loc("r2", "a"), 10, 0), up(loc("r1", ""), 7, 0)}},
		{ClusterName: "made-up", UpstreamLocalityStats: []*endpointv3.UpstreamLocalityStats{up(loc("r1", "a"), 1000, 0)}},
	}}
	s.countZones(&lrsStream{at: loc("r1", "a")}, req)
	for where, want := range map[string]float64{zoneIn: 95, zoneOut: 15, zoneUnknown: 7} {
		if got := testutil.ToFloat64(m.zones.WithLabelValues("api", where)); got != want {
			t.Errorf("api %s = %v, want %v", where, got, want)
		}
	}
	if got := testutil.CollectAndCount(m.zones); got != 3 {
		t.Errorf("%d series, want 3 (nothing for a service the pipeline does not know)", got)
	}
	s.countZones(&lrsStream{at: loc("", "b")}, req) // a node naming no region: the zone name alone
	if got := testutil.ToFloat64(m.zones.WithLabelValues("api", zoneIn)); got != 95+5 {
		t.Errorf("api in_zone = %v after a zone-b node without region, want %v", got, 95+5)
	}
}
