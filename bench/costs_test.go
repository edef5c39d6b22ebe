package bench

import (
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// TestRecvBytesCountsResponses: the fleet counts the encoded size of every
// response of both protocols, any type, and not the requests it decodes.
func TestRecvBytesCountsResponses(t *testing.T) {
	f, err := NewFleet(FleetConfig{Addr: "127.0.0.1:1", Nodes: 1})
	if err != nil {
		t.Fatal(err)
	}
	c := codec{t: f.t}
	sotw, err := proto.Marshal(&discoveryv3.DiscoveryResponse{VersionInfo: "v1", TypeUrl: resource.EndpointType, Nonce: "n1",
		Resources: []*anypb.Any{testCLA(t, "a", corev3.HealthStatus_HEALTHY)}})
	if err != nil {
		t.Fatal(err)
	}
	delta, err := proto.Marshal(&discoveryv3.DeltaDiscoveryResponse{TypeUrl: resource.ClusterType, Nonce: "n2"})
	if err != nil {
		t.Fatal(err)
	}
	req, err := proto.Marshal(&discoveryv3.DiscoveryRequest{TypeUrl: resource.EndpointType})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []struct {
		b []byte
		v any
	}{{sotw, &sotwResponse{}}, {delta, &deltaResponse{}}, {req, &discoveryv3.DiscoveryRequest{}}} {
		if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(m.b)}, m.v); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := f.RecvBytes(), int64(len(sotw)+len(delta)); got != want || want == 0 {
		t.Errorf("RecvBytes = %d, want %d (the two responses)", got, want)
	}
}

func TestSumAddsEveryLabelledSeries(t *testing.T) {
	m := Metrics{
		`xds_discovery_consul_queries_total{kind="health"}`:  7,
		`xds_discovery_consul_queries_total{kind="catalog"}`: 2,
		`xds_discovery_consul_queries_total_other`:           100,
		`xds_ha_consul_writes_total`:                         3,
	}
	if got := Sum(m, MetricConsulReads); got != 9 {
		t.Errorf("reads = %v, want 9 (both kinds, not the other metric)", got)
	}
	if got := Sum(m, MetricConsulWrites); got != 3 {
		t.Errorf("writes = %v, want 3", got)
	}
}
