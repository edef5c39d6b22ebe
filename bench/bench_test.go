package bench

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

func testCLA(t *testing.T, name string, status corev3.HealthStatus) *anypb.Any {
	t.Helper()
	a, err := anypb.New(&endpointv3.ClusterLoadAssignment{ClusterName: name, Endpoints: []*endpointv3.LocalityLbEndpoints{{
		LbEndpoints: []*endpointv3.LbEndpoint{{
			HealthStatus: status,
			HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{Address: &corev3.Address{
				Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
					Address: "10.0.0.1", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 8080}}}}}},
		}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestParseSotWDecodesEachResourceOnce(t *testing.T) {
	tab := newTable()
	b, err := proto.Marshal(&discoveryv3.DiscoveryResponse{VersionInfo: "v1", TypeUrl: resource.EndpointType, Nonce: "n1",
		Resources: []*anypb.Any{testCLA(t, "a", corev3.HealthStatus_UNHEALTHY), testCLA(t, "b", corev3.HealthStatus_HEALTHY)}})
	if err != nil {
		t.Fatal(err)
	}
	var r1, r2 sotwResponse
	if err := tab.parseSotW(b, &r1); err != nil {
		t.Fatal(err)
	}
	if err := tab.parseSotW(b, &r2); err != nil {
		t.Fatal(err)
	}
	if r1.version != "v1" || r1.nonce != "n1" || r1.typeURL != resource.EndpointType || len(r1.eds) != 2 || len(r2.eds) != 2 {
		t.Fatalf("got %+v and %+v, want v1/n1/EDS with two resources", r1, r2)
	}
	for i, want := range []struct {
		name   string
		status corev3.HealthStatus
	}{{"a", corev3.HealthStatus_UNHEALTHY}, {"b", corev3.HealthStatus_HEALTHY}} {
		if r1.eds[i].name != want.name || r1.eds[i].eds != r2.eds[i].eds {
			t.Fatalf("resource %d: %q, shared %v; want %q shared by both responses", i, r1.eds[i].name, r1.eds[i].eds == r2.eds[i].eds, want.name)
		}
		if got := r1.eds[i].eds.clas[want.name]["10.0.0.1:8080"]; got != want.status {
			t.Errorf("%s = %v, want %v", want.name, got, want.status)
		}
	}
	if tab.sotwEntry("v1", "a") != r1.eds[0].eds {
		t.Error("the entry is not shared by version and name")
	}
}

func TestParseDeltaKeepsResourcesAndRemovals(t *testing.T) {
	tab := newTable()
	b, err := proto.Marshal(&discoveryv3.DeltaDiscoveryResponse{TypeUrl: resource.EndpointType, Nonce: "n",
		Resources:        []*discoveryv3.Resource{{Name: "a", Version: "h1", Resource: testCLA(t, "a", corev3.HealthStatus_DRAINING)}},
		RemovedResources: []string{"gone"}})
	if err != nil {
		t.Fatal(err)
	}
	var r deltaResponse
	if err := tab.parseDelta(b, &r); err != nil {
		t.Fatal(err)
	}
	if len(r.resources) != 1 || r.resources[0].name != "a" || len(r.removed) != 1 || r.removed[0] != "gone" || r.nonce != "n" {
		t.Fatalf("got %+v", r)
	}
	if got := r.resources[0].eds.clas["a"]["10.0.0.1:8080"]; got != corev3.HealthStatus_DRAINING {
		t.Errorf("a = %v, want DRAINING", got)
	}
	if tab.deltaEntry("a", "h1") != r.resources[0].eds {
		t.Error("the entry is not shared by name and version")
	}
}

func TestParseMetrics(t *testing.T) {
	m, err := ParseMetrics(strings.NewReader(`# HELP x y
process_cpu_seconds_total 1.25
xds_pushes_total{type="endpoint"} 3000
xds_service_endpoints{health="healthy",service="a b"} 20
go_memstats_heap_inuse_bytes 1.5e+07
`))
	if err != nil {
		t.Fatal(err)
	}
	for series, want := range map[string]float64{
		MetricCPU: 1.25, MetricEDSPushes: 3000, MetricHeapInuse: 1.5e7,
		`xds_service_endpoints{health="healthy",service="a b"}`: 20,
	} {
		if m[series] != want {
			t.Errorf("%s = %v, want %v", series, m[series], want)
		}
	}
}

func TestPercentileAndMedian(t *testing.T) {
	xs := []float64{5, 1, 4, 2, 3, 6, 7, 8, 9, 10}
	for name, tc := range map[string]struct{ got, want float64 }{
		"p50 is the 5th of 10":  {Percentile(xs, 50), 5},
		"p99 is the largest":    {Percentile(xs, 99), 10},
		"p10 is the smallest":   {Percentile(xs, 10), 1},
		"even median averages":  {Median(xs), 5.5},
		"odd median is the mid": {Median([]float64{3, 1, 2}), 2},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: got %v, want %v", name, tc.got, tc.want)
		}
	}
	if !math.IsNaN(Percentile(nil, 50)) || !math.IsNaN(Median(nil)) {
		t.Error("no samples should give NaN")
	}
}

func TestWritesByKindAndHARunFigures(t *testing.T) {
	m, err := ParseMetrics(strings.NewReader(`xds_ha_consul_writes_total{kind="drain_put"} 4
xds_ha_consul_writes_total{kind="summary"} 6
xds_ha_errors_total{op="drain_put"} 9
`))
	if err != nil {
		t.Fatal(err)
	}
	w := WritesByKind(m)
	if len(w) != 2 || w["drain_put"] != 4 || w["summary"] != 6 {
		t.Fatalf("WritesByKind = %v, want drain_put 4 and summary 6 only", w)
	}
	r := HARun{Writes: []map[string]float64{w, {"summary": 2}}, WriteSeconds: 2,
		RSSAfter: []float64{150, 130}, BaseRSSAfter: 100}
	if got := r.WritesPerSecond(); len(got) != 2 || got[0] != 5 || got[1] != 1 {
		t.Errorf("WritesPerSecond = %v, want [5 1]", got)
	}
	if got := r.ExtraRSS(); len(got) != 2 || got[0] != 50 || got[1] != 30 {
		t.Errorf("ExtraRSS = %v, want [50 30]", got)
	}
}

func TestLoadBatchSplitsEndpointsAcrossReplicas(t *testing.T) {
	cat := Catalog{Services: 2, Endpoints: 5}
	seen := map[string]int{}
	for of := range 3 {
		b, err := cat.LoadBatch(of, 3, 0)
		if err != nil {
			t.Fatal(err)
		}
		var batch struct{ Reports []loadReport }
		if err := json.Unmarshal(b, &batch); err != nil {
			t.Fatal(err)
		}
		for _, r := range batch.Reports {
			seen[r.Endpoint]++
			if r.Utilization < 0.29 || r.Utilization > 0.71 || r.QPS != 100 {
				t.Errorf("report %+v out of range", r)
			}
		}
	}
	if len(seen) != cat.Size() {
		t.Fatalf("%d endpoints reported, want %d", len(seen), cat.Size())
	}
	for e, n := range seen {
		if n != 1 {
			t.Errorf("%s reported to %d replicas, want 1", e, n)
		}
	}
	if got := cat.WeightsConfig(); !strings.Contains(got, "  bench-svc-001: { weights: { enabled: true, sources: [http] } }\n") {
		t.Errorf("WeightsConfig lacks bench-svc-001:\n%s", got)
	}
}
