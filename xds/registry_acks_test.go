package xds_test

import (
	"testing"
	"time"

	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/xds-server/xds-server/e2e/harness"
)

// TestNodesReportAckedVersions: the versions a SotW node acknowledged
// (recorded per node, off the registry's lock) are in the node list,
// each the latest of its type, and a copy.
func TestNodesReportAckedVersions(t *testing.T) {
	f := start(t)
	c := f.client(t, harness.ADSConfig{NodeID: "acker", Cluster: "c"})
	f.srv.Update(testWorld(2, 3))
	firstOfEach(t, c, allTypes)
	w := testWorld(2, 3)
	w.Services[1].Endpoints[0].Port += 1000
	f.srv.Update(w)
	eds := next(t, c, resource.EndpointType)
	deadline := time.Now().Add(10 * time.Second)
	for {
		nodes := f.srv.Nodes()
		if len(nodes) != 1 {
			t.Fatalf("%d nodes, want 1", len(nodes))
		}
		got := nodes[0].Versions
		if got[resource.EndpointType] == eds.Version && len(got) == len(allTypes) {
			got[resource.EndpointType] = "changed by the caller"
			if again := f.srv.Nodes()[0].Versions[resource.EndpointType]; again != eds.Version {
				t.Errorf("a caller's change reached the registry: %q", again)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("acked versions %v, want every type, endpoints at %q", got, eds.Version)
		}
		time.Sleep(5 * time.Millisecond) // polls the node list for the harness's ACK, which nothing signals
	}
}
