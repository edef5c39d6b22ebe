package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/xds-server/xds-server/e2e/harness"
)

// Issue 24, items 1, 5 and 10: what one outsider on the xDS port can make
// the server hold (resource names, known nodes) and log.

// namesStart runs xds-server with one static service and args.
func namesStart(t *testing.T, args ...string) (*harness.Server, *grpc.ClientConn) {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	path := filepath.Join(t.TempDir(), "endpoints.yaml")
	file := "services:\n  - name: web\n    endpoints:\n      - { id: web-1, address: 127.0.0.1, port: 9, zone: zone-0 }\n"
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := harness.StartServer(t, append([]string{"--discovery.static.file", path}, args...)...)
	srv.WaitReady(t)
	conn, err := grpc.NewClient(srv.XDSAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return srv, conn
}

// namesLiveHeap forces collections in the server (/debug/pprof/heap?gc=1,
// twice: pooled buffers go at the second) and returns its live heap, in bytes.
func namesLiveHeap(t *testing.T, srv *harness.Server) float64 {
	t.Helper()
	for range 2 {
		if code, _ := adminGet(t, srv, "/debug/pprof/heap?gc=1", ""); code != 200 {
			t.Fatalf("/debug/pprof/heap: %d", code)
		}
	}
	return metricValue(t, srv, "", "go_memstats_heap_alloc_bytes")
}

// namesMade returns n made-up resource names starting with prefix.
func namesMade(prefix string, from, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%07d", prefix, from+i)
	}
	return out
}

// namesStatus returns the status a stream ended with: the first error
// its Recv returned.
func namesStatus(recv func() error) error {
	for {
		if err := recv(); err != nil {
			return err
		}
	}
}

// namesDeltaFlood subscribes node, on a delta stream, to total made-up
// load assignments, batch a request, until the server ends the stream;
// it returns the status it ended with.
func namesDeltaFlood(ctx context.Context, conn *grpc.ClientConn, node string, batch, total int) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := discoverygrpc.NewAggregatedDiscoveryServiceClient(conn).DeltaAggregatedResources(ctx)
	if err != nil {
		return err
	}
	ended := make(chan error, 1)
	go func() { ended <- namesStatus(func() error { _, err := st.Recv(); return err }) }()
	for sent := 0; sent < total; sent += batch {
		req := &discoverygrpc.DeltaDiscoveryRequest{TypeUrl: resource.EndpointType, ResourceNamesSubscribe: namesMade(node, sent, batch)}
		if sent == 0 {
			req.Node = &core.Node{Id: node, Cluster: "attack"}
		}
		if st.Send(req) != nil {
			break // the server ended the stream
		}
		select {
		case err := <-ended:
			return err
		default:
		}
	}
	select {
	case err := <-ended:
		return err
	case <-time.After(20 * time.Second):
		return errors.New("the stream of made-up names was never refused")
	}
}

// namesSotWFlood sends one SotW request naming n made-up load assignments
// and returns the status the stream ended with.
func namesSotWFlood(ctx context.Context, conn *grpc.ClientConn, node string, n int) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	st, err := discoverygrpc.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	if err != nil {
		return err
	}
	if err := st.Send(&discoverygrpc.DiscoveryRequest{Node: &core.Node{Id: node, Cluster: "attack"}, TypeUrl: resource.EndpointType,
		ResourceNames: namesMade(node, 0, n)}); err != nil {
		return err
	}
	return namesStatus(func() error { _, err := st.Recv(); return err })
}

// namesHold opens a stream of node that subscribes to names of load
// assignments, and returns once the server took the subscription (it
// answered a later listener request) or refused it (the error). Cancel
// ctx to close it.
func namesHold(ctx context.Context, conn *grpc.ClientConn, node string, delta bool, names []string) error {
	cli := discoverygrpc.NewAggregatedDiscoveryServiceClient(conn)
	n := &core.Node{Id: node, Cluster: "attack"}
	if delta {
		st, err := cli.DeltaAggregatedResources(ctx)
		if err != nil {
			return err
		}
		for _, req := range []*discoverygrpc.DeltaDiscoveryRequest{
			{Node: n, TypeUrl: resource.EndpointType, ResourceNamesSubscribe: names},
			{TypeUrl: resource.ListenerType, ResourceNamesSubscribe: []string{"*"}},
		} {
			if err := st.Send(req); err != nil {
				break
			}
		}
		for {
			resp, err := st.Recv()
			if err != nil || resp.GetTypeUrl() == resource.ListenerType {
				return err
			}
		}
	}
	st, err := cli.StreamAggregatedResources(ctx)
	if err != nil {
		return err
	}
	for _, req := range []*discoverygrpc.DiscoveryRequest{
		{Node: n, TypeUrl: resource.EndpointType, ResourceNames: names},
		{TypeUrl: resource.ListenerType},
	} {
		if err := st.Send(req); err != nil {
			break
		}
	}
	for {
		resp, err := st.Recv()
		if err != nil || resp.GetTypeUrl() == resource.ListenerType {
			return err
		}
	}
}

// namesHonest checks that a new node still gets clusters and load assignments.
func namesHonest(t *testing.T, conn *grpc.ClientConn, id string, delta bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := harness.StartADS(ctx, harness.ADSConfig{Conn: conn, NodeID: id, Cluster: "honest", Delta: delta,
		Types: []string{resource.ClusterType, resource.EndpointType}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got := map[string]bool{}
	for !got[resource.ClusterType] || !got[resource.EndpointType] {
		select {
		case u := <-c.Updates():
			if _, ok := u.Resources["web"]; ok {
				got[u.TypeURL] = true
			}
		case <-ctx.Done():
			t.Fatalf("honest node %s (delta %v) got %v of clusters and load assignments of web", id, delta, got)
		}
	}
}

func namesWant(t *testing.T, what string, err error, code codes.Code, text string) {
	t.Helper()
	if status.Code(err) != code || !strings.Contains(status.Convert(err).Message(), text) {
		t.Errorf("%s: %v, want %v naming %s", what, err, code, text)
	}
}

// TestResourceNameFloodIsRefused reproduces item 1: four delta streams
// each subscribing to a million made-up names (1,000 a request) pinned
// +466 MiB, twenty SotW streams of 60k names +144 MiB. With
// xds.max_resource_names (60 here) and xds.max_unknown_resource_names
// (100 here) each is refused with ResourceExhausted at the first request
// past a bound, counted by reason, and so is a delta stream claiming 100k
// resources (initial_resource_versions) or adding 40 names a request; a
// node's streams share its bound on unknown names; the heap stays flat;
// honest nodes are served.
func TestResourceNameFloodIsRefused(t *testing.T) {
	srv, conn := namesStart(t, "--xds.max_resource_names", "60", "--xds.max_unknown_resource_names", "100")
	namesHonest(t, conn, "honest-before", false)
	before := namesLiveHeap(t, srv)
	logsBefore := len(srv.Logs())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	var wg sync.WaitGroup
	for i := range 4 { // the finding's delta flood
		wg.Go(func() {
			err := namesDeltaFlood(ctx, conn, fmt.Sprint("delta-flood-", i), 1000, 1_000_000)
			namesWant(t, "delta stream of a million names", err, codes.ResourceExhausted, "xds.max_resource_names")
		})
	}
	for i := range 20 { // the finding's SotW flood
		wg.Go(func() {
			err := namesSotWFlood(ctx, conn, fmt.Sprint("sotw-flood-", i), 60_000)
			namesWant(t, "SotW request of 60k names", err, codes.ResourceExhausted, "xds.max_resource_names")
		})
	}
	wg.Wait()
	// A delta stream saying it already has 100k made-up resources.
	claims := map[string]string{}
	for _, name := range namesMade("claimed", 0, 100_000) {
		claims[name] = "1"
	}
	claimer, err := discoverygrpc.NewAggregatedDiscoveryServiceClient(conn).DeltaAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := claimer.Send(&discoverygrpc.DeltaDiscoveryRequest{Node: &core.Node{Id: "claimer", Cluster: "attack"},
		TypeUrl: resource.EndpointType, ResourceNamesSubscribe: []string{"web"}, InitialResourceVersions: claims}); err != nil {
		t.Fatal(err)
	}
	err = namesStatus(func() error { _, err := claimer.Recv(); return err })
	namesWant(t, "delta stream claiming 100k resources", err, codes.ResourceExhausted, "xds.max_resource_names")
	// A delta stream adding 40 names a request: its subscriptions add up.
	err = namesDeltaFlood(ctx, conn, "delta-slices", 40, 1_000_000)
	namesWant(t, "delta stream of 40 names a request", err, codes.ResourceExhausted, "xds.max_resource_names")
	// Streams of one node, each within xds.max_resource_names: the third
	// takes the node past 100 unknown names.
	for _, delta := range []bool{true, false} {
		node := fmt.Sprint("greedy-delta-", delta)
		held, release := context.WithCancel(ctx)
		for i := range 2 {
			if err := namesHold(held, conn, node, delta, namesMade(node, 40*i, 40)); err != nil {
				t.Fatalf("%s: 40 unknown names on stream %d: %v", node, i, err)
			}
		}
		err := namesHold(held, conn, node, delta, namesMade(node, 80, 40))
		namesWant(t, node+": 120 unknown names over three streams", err, codes.ResourceExhausted, "xds.max_unknown_resource_names")
		release()
	}

	awaitCounter(t, srv, `xds_resource_names_refused_total{reason="max_resource_names"}`, 26)
	awaitCounter(t, srv, `xds_resource_names_refused_total{reason="max_unknown_resource_names"}`, 2)
	namesHonest(t, conn, "honest-sotw", false)
	namesHonest(t, conn, "honest-delta", true)
	after := namesLiveHeap(t, srv)
	logBytes := len(srv.Logs()) - logsBefore
	t.Logf("live heap %.1f MiB before, %.1f MiB after 4 delta streams of 1M names, 20 SotW streams of 60k and the slicing; %d log bytes",
		before/(1<<20), after/(1<<20), logBytes)
	if after > before+4<<20 {
		t.Errorf("live heap grew %.1f MiB, want at most 4 MiB (the finding: +466 MiB)", (after-before)/(1<<20))
	}
	if logBytes > 30*1000 {
		t.Errorf("%d log bytes for 28 refused streams, want at most one clipped line each", logBytes)
	}
}

// namesConnectOnce connects node id on a fresh SotW stream, waits for its
// clusters and closes the stream.
func namesConnectOnce(ctx context.Context, conn *grpc.ClientConn, id string) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	st, err := discoverygrpc.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	if err != nil {
		return err
	}
	if err := st.Send(&discoverygrpc.DiscoveryRequest{Node: &core.Node{Id: id, Cluster: "flood"}, TypeUrl: resource.ClusterType}); err != nil {
		return err
	}
	_, err = st.Recv()
	return err
}

// namesLines counts the log lines holding every part.
func namesLines(logs string, parts ...string) int {
	n := 0
	for line := range strings.Lines(logs) {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			n++
		}
	}
	return n
}

// namesPage is a page of /debug/nodes.
type namesPage struct {
	Nodes []struct {
		ID      string `json:"id"`
		Streams int    `json:"streams"`
	} `json:"nodes"`
	Total int    `json:"total"`
	Next  string `json:"next"`
}

// TestFreshNodeIDFloodIsCapped reproduces item 5: 200,000 fresh node ids
// in 50 s held 279 MiB for the 5-minute xds.node_grace, wrote 58 MB of log
// (a connect and a disconnect line each) and made /debug/nodes 66 MB.
// Scaled down: 5,000 fresh ids against xds.max_known_nodes 200. The known
// nodes stay at the cap (the longest disconnected evicted, counted), the
// connect and disconnect lines stay within the overall rate (100, then 10
// a second), /debug/nodes answers pages of 100, and a connected node is
// never evicted and keeps being served.
func TestFreshNodeIDFloodIsCapped(t *testing.T) {
	const known, flood = 200, 5000
	srv, conn := namesStart(t, "--xds.max_known_nodes", fmt.Sprint(known))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	honest, err := harness.StartADS(ctx, harness.ADSConfig{Conn: conn, NodeID: "honest-connected", Cluster: "honest",
		Types: []string{resource.ClusterType}})
	if err != nil {
		t.Fatal(err)
	}
	defer honest.Close()
	<-honest.Updates()
	before := namesLiveHeap(t, srv)
	logsBefore := len(srv.Logs())
	start := time.Now()
	ids := make(chan int)
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for i := range ids {
				// ResourceExhausted: every known node looked connected (closes not seen yet): the cap's other half.
				if err := namesConnectOnce(ctx, conn, fmt.Sprintf("fresh-%05d", i)); err != nil && status.Code(err) != codes.ResourceExhausted {
					t.Errorf("fresh node %d: %v", i, err)
				}
			}
		})
	}
	for i := range flood {
		ids <- i
	}
	close(ids)
	wg.Wait()
	elapsed := time.Since(start)

	awaitMetric(t, srv, fmt.Sprintf("xds_known_nodes %d", known))
	refused := int(metricValue(t, srv, "", `xds_nodes_refused_total{reason="max_known_nodes"}`))
	if evicted := int(metricValue(t, srv, "", "xds_nodes_evicted_total")); evicted != flood+1-refused-known {
		t.Errorf("xds_nodes_evicted_total = %d, want %d (%d nodes, %d refused, %d kept)", evicted, flood+1-refused-known, flood+1, refused, known)
	}
	logs := srv.Logs()[logsBefore:]
	connects, disconnects := namesLines(logs, `msg="node connected"`), namesLines(logs, `msg="node disconnected"`)
	evictions := namesLines(logs, `msg="node evicted"`)
	after := namesLiveHeap(t, srv)
	t.Logf("%d refused with every known node connected", refused)
	t.Logf("%d fresh node ids in %v: %d connect, %d disconnect, %d eviction lines, %d log bytes; live heap %.1f -> %.1f MiB",
		flood, elapsed.Round(time.Millisecond), connects, disconnects, evictions, len(logs), before/(1<<20), after/(1<<20))
	if most := 100 + int(10*elapsed.Seconds()) + 10; connects > most {
		t.Errorf("%d connect lines in %v, want at most %d (100, then 10 a second)", connects, elapsed, most)
	}
	if after > before+4<<20 {
		t.Errorf("live heap grew %.1f MiB for %d fresh node ids, want at most 4 MiB (the cap holds %d)", (after-before)/(1<<20), flood, known)
	}
	if disconnects > connects {
		t.Errorf("%d disconnect lines for %d connect lines", disconnects, connects)
	}
	if most := 1 + int(elapsed.Seconds()/10) + 1; evictions > most {
		t.Errorf("%d eviction lines in %v, want at most one per 10s", evictions, elapsed)
	}

	var page namesPage
	code, body := adminGet(t, srv, "/debug/nodes", "")
	if err := json.Unmarshal([]byte(body), &page); code != 200 || err != nil {
		t.Fatalf("/debug/nodes: %d %v", code, err)
	}
	if len(page.Nodes) != 100 || page.Total != known || page.Next == "" {
		t.Errorf("/debug/nodes: %d nodes of %d, next %q; want a page of 100 of %d", len(page.Nodes), page.Total, page.Next, known)
	}
	t.Logf("/debug/nodes: %d bytes for a page of %d", len(body), len(page.Nodes))
	seen, connected := 0, false
	for after := ""; ; {
		code, body := adminGet(t, srv, "/debug/nodes?limit=75&after="+url.QueryEscape(after), "")
		var p namesPage
		if err := json.Unmarshal([]byte(body), &p); code != 200 || err != nil {
			t.Fatalf("/debug/nodes after %q: %d %v", after, code, err)
		}
		for _, n := range p.Nodes {
			connected = connected || n.ID == "honest-connected" && n.Streams > 0
		}
		seen += len(p.Nodes)
		if after = p.Next; after == "" || seen > known {
			break
		}
	}
	if seen != known || !connected {
		t.Errorf("paging /debug/nodes saw %d nodes (want %d), the connected honest node: %v", seen, known, connected)
	}
	namesHonest(t, conn, "honest-after", false)
}

// TestRefusalLinesArePerNode reproduces item 10: refusal lines were
// limited to one per 10 s for every node together, so a node's refusal
// hid every other's. Now each node gets its own line (one per 10 s each)
// and a flood of fresh refused ids stays within the overall rate.
func TestRefusalLinesArePerNode(t *testing.T) {
	srv, conn := namesStart(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	refuse := func(id string) {
		t.Helper()
		st, err := discoverygrpc.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Send(&discoverygrpc.DiscoveryRequest{Node: &core.Node{Id: id, Cluster: strings.Repeat("c", 2<<10)},
			TypeUrl: resource.ClusterType}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Recv(); status.Code(err) != codes.InvalidArgument {
			t.Fatalf("node %s with a 2 KiB cluster: %v, want InvalidArgument", id, err)
		}
	}
	logsBefore := len(srv.Logs())
	start := time.Now()
	for range 50 {
		refuse("loud")
	}
	for i := range 5 {
		refuse(fmt.Sprint("quiet-", i))
	}
	awaitCounter(t, srv, `xds_nodes_refused_total{reason="node_too_large"}`, 55)
	logs := srv.Logs()[logsBefore:]
	if n := namesLines(logs, `msg="node refused"`, "node=loud "); n != 1 && time.Since(start) < 10*time.Second {
		t.Errorf("%d refusal lines for 50 refusals of one node within 10s, want 1", n)
	}
	for i := range 5 {
		if n := namesLines(logs, `msg="node refused"`, fmt.Sprintf("node=quiet-%d ", i)); n != 1 {
			t.Errorf("%d refusal lines for quiet-%d, want its own line", n, i)
		}
	}

	const fresh = 1000
	logsBefore, start = len(srv.Logs()), time.Now()
	var wg sync.WaitGroup
	ids := make(chan int)
	for range 16 {
		wg.Go(func() {
			for i := range ids {
				refuse(fmt.Sprint("fresh-", i))
			}
		})
	}
	for i := range fresh {
		ids <- i
	}
	close(ids)
	wg.Wait()
	elapsed := time.Since(start)
	awaitCounter(t, srv, `xds_nodes_refused_total{reason="node_too_large"}`, 55+fresh)
	logs = srv.Logs()[logsBefore:]
	lines := namesLines(logs, `msg="node refused"`)
	t.Logf("%d fresh refused node ids in %v: %d refusal lines, %d log bytes", fresh, elapsed.Round(time.Millisecond), lines, len(logs))
	if most := 100 + int(10*elapsed.Seconds()) + 10; lines > most {
		t.Errorf("%d refusal lines in %v, want at most %d (100, then 10 a second)", lines, elapsed, most)
	}
	namesHonest(t, conn, "honest", true)
}
