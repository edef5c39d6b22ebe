package weights

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"reflect"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	lrsv3 "github.com/envoyproxy/go-control-plane/envoy/service/load_stats/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

var lrsT0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// lrsAddrs maps "service|host:port" to endpoint IDs: the Resolve of the tests.
var lrsAddrs = map[string]string{
	"api|10.0.0.1:8080": "a",
	"api|10.0.0.2:8080": "b",
	"api|10.0.0.3:8080": "c",
}

func lrsResolveMap(cluster, address string, port uint32) (string, bool) {
	id, ok := lrsAddrs[fmt.Sprintf("%s|%s:%d", cluster, address, port)]
	return id, ok
}

// recordingSink records the reports it is given; its error, if set, is
// returned for every report.
type recordingSink struct {
	mu      sync.Mutex
	reports []Report
	err     error
}

func (s *recordingSink) Observe(r Report, now time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reports = append(s.reports, r)
	return s.err
}

func (s *recordingSink) byNode() map[string][]Report {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string][]Report{}
	for _, r := range s.reports {
		out[r.Node] = append(out[r.Node], r)
	}
	return out
}

// lrsHarness is an LRS server on a real gRPC server on loopback and a
// client connection to it.
type lrsHarness struct {
	lrs    *LRS
	srv    *grpc.Server
	client lrsv3.LoadReportingServiceClient
	ended  chan error // the result of every StreamLoadStats handler, once it returned
}

// newLRSHarness starts the server; cfg.Now, when nil, is a clock that
// advances 10s per call from lrsT0.
func newLRSHarness(t *testing.T, cfg LRSConfig) *lrsHarness {
	t.Helper()
	if cfg.Now == nil {
		cfg.Now = steppingClock(10 * time.Second)
	}
	if cfg.Resolve == nil {
		cfg.Resolve = lrsResolveMap
	}
	if cfg.Registerer == nil {
		cfg.Registerer = prometheus.NewRegistry()
	}
	cfg.Logger = slog.New(slog.DiscardHandler)
	s, err := NewLRS(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := &lrsHarness{lrs: s, ended: make(chan error, 16)}
	h.srv = grpc.NewServer(grpc.StreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		err := handler(srv, ss)
		h.ended <- err
		return err
	}))
	s.Register(h.srv)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- h.srv.Serve(lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		s.Stop()
		h.srv.GracefulStop()
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	h.client = lrsv3.NewLoadReportingServiceClient(conn)
	return h
}

// steppingClock returns a clock that starts at lrsT0 and advances step per call.
func steppingClock(step time.Duration) func() time.Time {
	var mu sync.Mutex
	now := lrsT0.Add(-step)
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(step)
		return now
	}
}

// open opens a stream for node and returns it with the server's first response.
func (h *lrsHarness) open(t *testing.T, ctx context.Context, node string) (lrsv3.LoadReportingService_StreamLoadStatsClient, *lrsv3.LoadStatsResponse) {
	t.Helper()
	stream, err := h.client.StreamLoadStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&lrsv3.LoadStatsRequest{Node: &corev3.Node{Id: node}}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatalf("node %s: first response: %v", node, err)
	}
	return stream, resp
}

// report sends one request per cluster-stats list, closes the stream and
// waits for the server to end it: by then every request was handled.
func report(t *testing.T, stream lrsv3.LoadReportingService_StreamLoadStatsClient, reqs ...[]*endpointv3.ClusterStats) {
	t.Helper()
	for _, cs := range reqs {
		if err := stream.Send(&lrsv3.LoadStatsRequest{ClusterStats: cs}); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("stream ended with %v, want io.EOF (status OK)", err)
	}
}

func clusterStats(cluster string, interval time.Duration, eps ...*endpointv3.UpstreamEndpointStats) *endpointv3.ClusterStats {
	cs := &endpointv3.ClusterStats{
		ClusterName:           cluster,
		UpstreamLocalityStats: []*endpointv3.UpstreamLocalityStats{{UpstreamEndpointStats: eps}},
	}
	if interval > 0 {
		cs.LoadReportInterval = durationpb.New(interval)
	}
	return cs
}

func endpointStats(hostPort string, ok, failed uint64, metrics ...*endpointv3.EndpointLoadMetricStats) *endpointv3.UpstreamEndpointStats {
	host, portStr, _ := net.SplitHostPort(hostPort)
	var port uint32
	fmt.Sscan(portStr, &port)
	return &endpointv3.UpstreamEndpointStats{
		Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
			Address: host, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port},
		}}},
		TotalSuccessfulRequests: ok,
		TotalErrorRequests:      failed,
		LoadMetricStats:         metrics,
	}
}

func metric(name string, n uint64, total float64) *endpointv3.EndpointLoadMetricStats {
	return &endpointv3.EndpointLoadMetricStats{MetricName: name, NumRequestsFinishedWithMetric: n, TotalMetricValue: total}
}

func TestLRSConfigValidate(t *testing.T) {
	sink := &recordingSink{}
	for name, tc := range map[string]struct {
		cfg  LRSConfig
		want []string
	}{
		"valid":             {cfg: LRSConfig{Sink: sink, Resolve: lrsResolveMap}},
		"valid with period": {cfg: LRSConfig{Sink: sink, Resolve: lrsResolveMap, Interval: 5 * time.Second}},
		"nothing set":       {cfg: LRSConfig{}, want: []string{"weights: lrs: invalid config", "sink is required", "resolve is required"}},
		"negative interval": {cfg: LRSConfig{Sink: sink, Resolve: lrsResolveMap, Interval: -time.Second}, want: []string{"interval -1s is negative"}},
	} {
		t.Run(name, func(t *testing.T) {
			checkErr(t, tc.cfg.Validate(), ErrInvalidConfig, tc.want)
			_, err := NewLRS(tc.cfg)
			checkErr(t, err, ErrInvalidConfig, tc.want)
		})
	}
}

func TestLRSFirstResponse(t *testing.T) {
	for name, tc := range map[string]struct {
		interval, want time.Duration
	}{
		"configured interval": {interval: 250 * time.Millisecond, want: 250 * time.Millisecond},
		"default interval":    {want: time.Second},
	} {
		t.Run(name, func(t *testing.T) {
			h := newLRSHarness(t, LRSConfig{Sink: &recordingSink{}, Interval: tc.interval})
			stream, resp := h.open(t, t.Context(), "node-1")
			if !resp.GetSendAllClusters() || !resp.GetReportEndpointGranularity() || len(resp.GetClusters()) != 0 {
				t.Errorf("first response %v, want all clusters with endpoint granularity", resp)
			}
			if got := resp.GetLoadReportingInterval().AsDuration(); got != tc.want {
				t.Errorf("load_reporting_interval %v, want %v", got, tc.want)
			}
			report(t, stream)
		})
	}
}

func TestLRSTwoNodesReportPerNodeLoad(t *testing.T) {
	sink := &recordingSink{}
	h := newLRSHarness(t, LRSConfig{Sink: sink})
	s1, _ := h.open(t, t.Context(), "node-1")
	s2, _ := h.open(t, t.Context(), "node-2")
	// node-1: 100 requests (10 errors) to a and 50 to b over 10s, and an
	// unknown address; node-2: 400 to a and 20 (20 errors) to c over 5s.
	report(t, s1, []*endpointv3.ClusterStats{clusterStats("api", 10*time.Second,
		endpointStats("10.0.0.1:8080", 90, 10, metric("cpu_utilization", 4, 2), metric("queue", 2, 6)),
		endpointStats("10.0.0.2:8080", 50, 0),
		endpointStats("10.9.9.9:8080", 70, 0),
	)})
	report(t, s2, []*endpointv3.ClusterStats{
		clusterStats("api", 5*time.Second, endpointStats("10.0.0.1:8080", 400, 0, metric("application_utilization", 10, 3)), endpointStats("10.0.0.3:8080", 0, 20)),
		clusterStats("unknown-service", 5*time.Second, endpointStats("10.0.0.1:8080", 5, 0)),
	})
	// The clock reads t0 and t0+10s for the first requests of node-1 and
	// node-2, then t0+20s and t0+30s for their reports.
	at1, at2 := lrsT0.Add(20*time.Second), lrsT0.Add(30*time.Second)
	got := sink.byNode()
	want := map[string][]Report{
		"node-1": {
			{Service: "api", Endpoint: "a", Node: "node-1", At: at1, QPS: 10, EPS: 1, CPU: 0.5,
				Named: map[string]float64{"cpu_utilization": 0.5, "queue": 3}},
			{Service: "api", Endpoint: "b", Node: "node-1", At: at1, QPS: 5},
		},
		"node-2": {
			{Service: "api", Endpoint: "a", Node: "node-2", At: at2, QPS: 80, App: 0.3,
				Named: map[string]float64{"application_utilization": 0.3}},
			{Service: "api", Endpoint: "c", Node: "node-2", At: at2, QPS: 4, EPS: 4},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("reports by node:\n got %+v\nwant %+v", got, want)
	}
	if n := testutil.ToFloat64(h.lrs.m.skipped.WithLabelValues(skipUnknown)); n != 2 {
		t.Errorf("skipped unknown endpoints = %v, want 2", n)
	}
	if n := testutil.ToFloat64(h.lrs.m.reports); n != 4 {
		t.Errorf("reports = %v, want 4", n)
	}
}

func TestLRSFeedsTrackerNodeRates(t *testing.T) {
	tr, err := NewTracker(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.SetEndpoints("api", []Endpoint{{ID: "a"}, {ID: "b"}}); err != nil {
		t.Fatal(err)
	}
	// c resolves but the tracker does not know it: rejected, counted, and
	// the stream carries on.
	h := newLRSHarness(t, LRSConfig{Sink: tr})
	s1, _ := h.open(t, t.Context(), "node-1")
	s2, _ := h.open(t, t.Context(), "node-2")
	report(t, s1, []*endpointv3.ClusterStats{clusterStats("api", 10*time.Second,
		endpointStats("10.0.0.1:8080", 100, 0), endpointStats("10.0.0.2:8080", 300, 0))})
	report(t, s2, []*endpointv3.ClusterStats{clusterStats("api", 10*time.Second,
		endpointStats("10.0.0.1:8080", 2000, 0), endpointStats("10.0.0.2:8080", 500, 0),
		endpointStats("10.0.0.3:8080", 10, 0))})
	got := tr.NodeRates("api", lrsT0.Add(time.Minute))
	want := map[string]map[string]float64{
		"node-1": {"a": 10, "b": 30},
		"node-2": {"a": 200, "b": 50},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("NodeRates:\n got %+v\nwant %+v", got, want)
	}
	if n := testutil.ToFloat64(h.lrs.m.skipped.WithLabelValues(skipRejected)); n != 1 {
		t.Errorf("rejected = %v, want 1", n)
	}
	if n := testutil.ToFloat64(h.lrs.m.reports); n != 4 {
		t.Errorf("reports = %v, want 4", n)
	}
}

func TestLRSIntervalFallsBackToTimeSincePreviousRequest(t *testing.T) {
	sink := &recordingSink{}
	// The clock advances 4s per request: the first request (the node) at
	// t0, the reports at t0+4s and t0+8s.
	h := newLRSHarness(t, LRSConfig{Sink: sink, Now: steppingClock(4 * time.Second)})
	stream, _ := h.open(t, t.Context(), "node-1")
	report(t, stream,
		[]*endpointv3.ClusterStats{clusterStats("api", 0, endpointStats("10.0.0.1:8080", 40, 0))},
		[]*endpointv3.ClusterStats{clusterStats("api", 0, endpointStats("10.0.0.1:8080", 72, 8))},
	)
	var got []Report
	for _, r := range sink.byNode()["node-1"] {
		got = append(got, Report{QPS: r.QPS, EPS: r.EPS, At: r.At})
	}
	want := []Report{{QPS: 10, At: lrsT0.Add(4 * time.Second)}, {QPS: 20, EPS: 2, At: lrsT0.Add(8 * time.Second)}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("reports:\n got %+v\nwant %+v", got, want)
	}
}

func TestLRSStreamEndsWhenClientCancels(t *testing.T) {
	h := newLRSHarness(t, LRSConfig{Sink: &recordingSink{}})
	ctx, cancel := context.WithCancel(t.Context())
	h.open(t, ctx, "node-1")
	if n := testutil.ToFloat64(h.lrs.m.streams); n != 1 {
		t.Errorf("open streams = %v, want 1", n)
	}
	cancel()
	if err := <-h.ended; status.Code(err) != codes.Canceled {
		t.Errorf("handler returned %v, want Canceled", err)
	}
	if n := testutil.ToFloat64(h.lrs.m.streams); n != 0 {
		t.Errorf("open streams after cancel = %v, want 0", n)
	}
}

func TestLRSStopEndsStreams(t *testing.T) {
	h := newLRSHarness(t, LRSConfig{Sink: &recordingSink{}})
	stream, _ := h.open(t, t.Context(), "node-1")
	h.lrs.Stop()
	if _, err := stream.Recv(); !errors.Is(err, io.EOF) {
		t.Errorf("after Stop the stream ended with %v, want io.EOF (status OK)", err)
	}
	if err := <-h.ended; err != nil {
		t.Errorf("handler returned %v, want nil", err)
	}
	// A new stream is refused.
	again, err := h.client.StreamLoadStats(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := again.Recv(); status.Code(err) != codes.Unavailable {
		t.Errorf("stream after Stop: %v, want Unavailable", err)
	}
	// GracefulStop does not wait for the clients.
	h.srv.GracefulStop()
}

func TestLRSFirstRequestWithoutNodeIsRefused(t *testing.T) {
	h := newLRSHarness(t, LRSConfig{Sink: &recordingSink{}})
	stream, err := h.client.StreamLoadStats(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&lrsv3.LoadStatsRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); status.Code(err) != codes.InvalidArgument {
		t.Errorf("stream without a node: %v, want InvalidArgument", err)
	}
}
