package weights

import (
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	orcadata "github.com/cncf/xds/go/xds/data/orca/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	lrsv3 "github.com/envoyproxy/go-control-plane/envoy/service/load_stats/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

// ingestFleet is 100 services x 100 endpoints ("10.S.0.E", port 8080),
// known to a fresh tracker.
func ingestFleet(b *testing.B) (*Tracker, []ORCATarget) {
	b.Helper()
	tr, err := NewTracker(DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	var targets []ORCATarget
	for s := range 100 {
		name := fmt.Sprintf("svc-%d", s)
		eps := make([]Endpoint, 100)
		for e := range eps {
			addr := fmt.Sprintf("10.%d.0.%d:8080", s, e)
			eps[e] = Endpoint{ID: addr}
			targets = append(targets, ORCATarget{Service: name, Endpoint: addr, Address: addr})
		}
		if err := tr.SetEndpoints(name, eps); err != nil {
			b.Fatal(err)
		}
	}
	return tr, targets
}

// BenchmarkIngestORCA is one second of 10,000 endpoints reporting over
// ORCA: each report's wire bytes decoded (proto.Unmarshal), converted and
// observed, then one Update. ns/op / 1 s is the fraction of one core,
// gRPC framing aside.
func BenchmarkIngestORCA(b *testing.B) {
	tr, targets := ingestFleet(b)
	wire := make([][]byte, len(targets))
	for i := range targets {
		lr := &orcadata.OrcaLoadReport{CpuUtilization: 0.5, RpsFractional: 100 + float64(i%100), Eps: 1}
		var err error
		if wire[i], err = proto.Marshal(lr); err != nil {
			b.Fatal(err)
		}
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var lr orcadata.OrcaLoadReport
	for b.Loop() {
		now = now.Add(time.Second)
		for i, t := range targets {
			if err := proto.Unmarshal(wire[i], &lr); err != nil {
				b.Fatal(err)
			}
			if err := tr.Observe(orcaReport(t, &lr, now), now); err != nil {
				b.Fatal(err)
			}
		}
		tr.Update(now)
	}
}

// BenchmarkIngestLRS is one second of LRS for 10,000 endpoints: 100
// requests (one per node and service) of 100 endpoint stats each, decoded,
// converted (address resolution included) and observed, then one Update.
func BenchmarkIngestLRS(b *testing.B) {
	tr, targets := ingestFleet(b)
	ids := make(map[string]string, len(targets))
	for _, t := range targets {
		ids[t.Service+"|"+t.Address] = t.Endpoint
	}
	resolve := func(cluster, address string, port uint32) (string, bool) {
		id, ok := ids[cluster+"|"+net.JoinHostPort(address, strconv.FormatUint(uint64(port), 10))]
		return id, ok
	}
	var wire [][]byte
	for s := range 100 {
		cs := &endpointv3.ClusterStats{ClusterName: fmt.Sprintf("svc-%d", s), LoadReportInterval: durationpb.New(time.Second)}
		loc := &endpointv3.UpstreamLocalityStats{}
		for e := range 100 {
			loc.UpstreamEndpointStats = append(loc.UpstreamEndpointStats, &endpointv3.UpstreamEndpointStats{
				Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
					Address: fmt.Sprintf("10.%d.0.%d", s, e), PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 8080}}}},
				TotalSuccessfulRequests: 100, TotalErrorRequests: 1,
				LoadMetricStats: []*endpointv3.EndpointLoadMetricStats{{MetricName: "cpu_utilization", NumRequestsFinishedWithMetric: 100, TotalMetricValue: 50}},
			})
		}
		cs.UpstreamLocalityStats = []*endpointv3.UpstreamLocalityStats{loc}
		w, err := proto.Marshal(&lrsv3.LoadStatsRequest{ClusterStats: []*endpointv3.ClusterStats{cs}})
		if err != nil {
			b.Fatal(err)
		}
		wire = append(wire, w)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for b.Loop() {
		now = now.Add(time.Second)
		for n, w := range wire {
			var req lrsv3.LoadStatsRequest
			if err := proto.Unmarshal(w, &req); err != nil {
				b.Fatal(err)
			}
			reports, _ := lrsReports("node-"+strconv.Itoa(n), &req, now, time.Second, resolve, nil)
			for _, r := range reports {
				if err := tr.Observe(r, now); err != nil {
					b.Fatal(err)
				}
			}
		}
		tr.Update(now)
	}
}
