package xds_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"testing"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/xds-server/xds-server/xds"
)

// floodWindow is the flow-control window, in bytes, of each stream of the
// test's nodes: fixed (grpc-go's default grows it with its BDP estimate,
// which lets a node that does not read take whole responses), and smaller
// than a response, so a node that does not read keeps its response
// pending.
const floodWindow = 64 << 10

// TestPendingBytesAreBounded floods the server with nodes that do not read:
// their EDS responses (about 71 KiB each, more than their streams' windows;
// each node names every load assignment but its own one, so that no two
// responses carry the same resources, see TestPendingBytesShared) cannot
// be written, so the first one holds the budget (128 KiB: one response)
// and the others wait for it, holding no buffer. Once the nodes
// read, every one gets its response, the waiting ones in turn, each counted
// as a wait that ended by a write (none timed out), and the pending bytes go
// back to zero (nothing leaks).
func TestPendingBytesAreBounded(t *testing.T) {
	const nodes, limit = 12, 2 * floodWindow
	f := startWith(t, xds.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), MaxPendingBytes: limit})
	f.srv.Update(testWorld(20, 50))
	f.srv.Reconcile()
	_, streams := floodStreams(t, f, "flood", nodes, allBut(20))
	// Nobody reads: one response is pending, the others wait for the budget.
	var pending float64
	eventually(t, func() bool {
		pending = metric(t, f, "xds_pending_response_bytes")
		return pending > 0 && waitingForBudget() == nodes-1
	})
	sizes := make(chan int, nodes)
	for i, st := range streams {
		go func() {
			r, err := st.Recv()
			switch {
			case err != nil:
				t.Errorf("node %d: %v", i, err)
			case r.GetTypeUrl() != resource.EndpointType || len(r.GetResources()) != 19:
				t.Errorf("node %d: %s with %d resources, want 19 load assignments", i, r.GetTypeUrl(), len(r.GetResources()))
			}
			sizes <- proto.Size(r)
		}()
	}
	least, most := limit, 0
	for range nodes {
		n := <-sizes
		least, most = min(least, n), max(most, n)
	}
	if least <= floodWindow || most > limit {
		t.Fatalf("responses of %d to %d bytes, want more than a stream's window (%d) and at most the budget (%d)", least, most, floodWindow, limit)
	}
	if pending < float64(least) || pending > float64(most) {
		t.Errorf("%.0f bytes pending while the nodes did not read, want one response (%d to %d bytes)", pending, least, most)
	}
	if got := waits(t, f, "written"); got != nodes-1 {
		t.Errorf("%.0f responses waited for others to be written, want %d", got, nodes-1)
	}
	if got := waits(t, f, "timeout"); got != 0 {
		t.Errorf("%.0f responses went ahead after the longest wait, want none", got)
	}
	eventually(t, func() bool { return metric(t, f, "xds_pending_response_bytes") == 0 })
}

// TestPendingBytesOfClosedConnectionsAreReleased: a node's connection
// closes while its response is pending (grpc drops, without freeing, what
// it had not written) and two reading nodes wait for the budget. Its bytes
// come back to the budget (at the next garbage collection): the waiting
// responses go ahead before the longest wait, and once they are written
// nothing is pending.
func TestPendingBytesOfClosedConnectionsAreReleased(t *testing.T) {
	f := startWith(t, xds.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), MaxPendingBytes: 2 * floodWindow})
	f.srv.Update(testWorld(20, 50))
	f.srv.Reconcile()
	stalled, _ := floodStreams(t, f, "stalled", 1, allBut(20))
	eventually(t, func() bool { return metric(t, f, "xds_pending_response_bytes") > 0 })
	_, readers := floodStreams(t, f, "reader", 2, func(i int) []string { return allBut(20)(i + 1) })
	delivered := make(chan error, len(readers))
	for _, st := range readers {
		go func() {
			_, err := st.Recv()
			delivered <- err
		}()
	}
	eventually(t, func() bool { return waitingForBudget() == len(readers) })
	stalled.Close()
	eventually(t, func() bool {
		runtime.GC() // the dropped buffer's bytes come back once it is collected
		return len(delivered) == len(readers)
	})
	for range readers {
		if err := <-delivered; err != nil {
			t.Fatal(err)
		}
	}
	if got := waits(t, f, "timeout"); got != 0 {
		t.Errorf("%.0f responses went ahead after the longest wait, want none: the closed connection's bytes did not come back", got)
	}
	if got := waits(t, f, "written"); got != float64(len(readers)) {
		t.Errorf("%.0f responses waited for others to be written, want %d", got, len(readers))
	}
	eventually(t, func() bool { return metric(t, f, "xds_pending_response_bytes") == 0 })
}

// floodStreams opens n EDS streams, one node each (ids prefix-0 on), on a
// connection of its own with fixed floodWindow windows, and sends their
// first requests: for the names names(i) returns (nil: every load
// assignment).
func floodStreams(t *testing.T, f *fixture, prefix string, n int, names func(i int) []string) (*grpc.ClientConn, []discoverygrpc.AggregatedDiscoveryService_StreamAggregatedResourcesClient) {
	t.Helper()
	conn, err := grpc.NewClient(f.conn.Target(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithStaticStreamWindowSize(floodWindow), grpc.WithStaticConnWindowSize(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	streams := make([]discoverygrpc.AggregatedDiscoveryService_StreamAggregatedResourcesClient, n)
	for i := range streams {
		st, err := discoverygrpc.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
		if err != nil {
			t.Fatal(err)
		}
		req := &discoverygrpc.DiscoveryRequest{Node: &core.Node{Id: fmt.Sprint(prefix, "-", i), Cluster: "flood"}, TypeUrl: resource.EndpointType}
		if names != nil {
			req.ResourceNames = names(i)
		}
		if err := st.Send(req); err != nil {
			t.Fatal(err)
		}
		streams[i] = st
	}
	return conn, streams
}

// allBut returns, for node i, the names of the load assignments of
// testWorld(services, ...) but svc-i's.
func allBut(services int) func(i int) []string {
	return func(i int) []string {
		var names []string
		for j := range services {
			if j != i%services {
				names = append(names, fmt.Sprint("svc-", j))
			}
		}
		return names
	}
}

// TestPendingBytesShared: nodes that do not read are sent the same
// response. The first one's is encoded whole; from the second on its head
// (its resources, most of its bytes) is encoded once and shared, so the
// pending bytes are two responses' (the budget holds three), and no node
// waits for the budget. Once the nodes read, each gets every load
// assignment, and once the shared head is dropped nothing is pending.
func TestPendingBytesShared(t *testing.T) {
	const nodes, limit = 12, 3 * floodWindow
	// Kept longer than the 1s default: on a loaded machine (CI, -race)
	// the 12 responses can take more than a second to encode, and a
	// head dropped meanwhile is encoded again, which is what the budget
	// check below would then see. Registered first: restored last.
	t.Cleanup(xds.SetHeadLife(3 * time.Second))
	f := startWith(t, xds.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), MaxPendingBytes: limit})
	f.srv.Update(testWorld(20, 50))
	f.srv.Reconcile()
	_, streams := floodStreams(t, f, "shared", nodes, nil)
	eventually(t, func() bool { return metric(t, f, "xds_pending_response_bytes") > 2*floodWindow })
	if n := waitingForBudget(); n != 0 {
		t.Errorf("%d responses wait for the budget, want none", n)
	}
	got := make(chan error, nodes)
	for _, st := range streams {
		go func() {
			r, err := st.Recv()
			if err == nil && len(r.GetResources()) != 20 {
				err = fmt.Errorf("%d resources, want 20", len(r.GetResources()))
			}
			got <- err
		}()
	}
	for range nodes {
		if err := <-got; err != nil {
			t.Fatal(err)
		}
	}
	if n := waits(t, f, "written") + waits(t, f, "timeout"); n != 0 {
		t.Errorf("%.0f responses waited for the budget, want none: they share one head", n)
	}
	eventually(t, func() bool { return metric(t, f, "xds_pending_response_bytes") == 0 })
}

// waitingForBudget counts the goroutines blocked waiting for the pending
// bytes budget (the server runs in this process): the event the metrics do
// not show, since a wait is counted only once it ends.
func waitingForBudget() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	waiting := 0
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		if bytes.Contains(g, []byte(" [select")) && bytes.Contains(g, []byte("semaphore.(*Weighted).Acquire")) &&
			bytes.Contains(g, []byte("xds.(*sendBudget).hold")) {
			waiting++
		}
	}
	return waiting
}

// waits is xds_pending_bytes_waits_total{outcome=outcome}.
func waits(t *testing.T, f *fixture, outcome string) float64 {
	t.Helper()
	mfs, err := f.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if mf.GetName() == "xds_pending_bytes_waits_total" && m.GetLabel()[0].GetValue() == outcome {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
