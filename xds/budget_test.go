package xds_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/xds-server/xds-server/xds"
)

// TestPendingBytesAreBounded floods the server with nodes that do not read:
// their EDS responses (about 40 KiB each) cannot all be written, so past
// xds.max_pending_bytes the next ones wait, then go ahead after the
// longest wait; once the nodes read, every one gets its response and the
// pending bytes go back to zero (nothing leaks).
func TestPendingBytesAreBounded(t *testing.T) {
	const nodes, limit = 12, 64 << 10
	f := startWith(t, xds.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), MaxPendingBytes: limit})
	f.srv.Update(testWorld(20, 50))
	f.srv.Reconcile()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	streams := make([]discoverygrpc.AggregatedDiscoveryService_StreamAggregatedResourcesClient, nodes)
	for i := range streams {
		st, err := discoverygrpc.NewAggregatedDiscoveryServiceClient(f.conn).StreamAggregatedResources(ctx)
		if err != nil {
			t.Fatal(err)
		}
		req := &discoverygrpc.DiscoveryRequest{Node: &core.Node{Id: fmt.Sprint("flood-", i), Cluster: "flood"}, TypeUrl: resource.EndpointType}
		if err := st.Send(req); err != nil {
			t.Fatal(err)
		}
		streams[i] = st
	}
	// Nobody reads: the connection's window fills, responses stay pending.
	eventually(t, func() bool { return metric(t, f, "xds_pending_bytes_waits_total") >= nodes/2 })
	for i, st := range streams {
		r, err := st.Recv()
		if err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
		if r.GetTypeUrl() != resource.EndpointType || len(r.GetResources()) != 20 {
			t.Fatalf("node %d: %s with %d resources, want 20 load assignments", i, r.GetTypeUrl(), len(r.GetResources()))
		}
	}
	eventually(t, func() bool { return metric(t, f, "xds_pending_response_bytes") == 0 })
}
