package xds

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/xds-server/xds-server/discovery"
)

// pushBenchNodes is the fleet of BenchmarkPush.
const pushBenchNodes = 2000

// BenchmarkPush is one Consul change reaching a fleet: pushBenchNodes
// proxyless nodes (wildcard CDS, EDS, LDS, RDS; 50 services of 20
// endpoints) hold their streams open through go-control-plane's stream
// servers, our callbacks and our cache (in memory: no gRPC transport);
// each op flips the health of one endpoint of one service, reconciles,
// and waits until every node has read its EDS response (each node ACKs
// every response at once). Reported per node: time, bytes and allocations
// of the push (server and the light in-memory clients), the EDS bytes a
// node is sent (eds-B/node), and the heap the fleet holds after its first
// sync (heap-B/node).
func BenchmarkPush(b *testing.B) {
	for _, delta := range []bool{false, true} {
		name := "sotw"
		if delta {
			name = "delta"
		}
		b.Run(name, func(b *testing.B) { benchPush(b, delta) })
	}
}

func benchPush(b *testing.B, delta bool) {
	s, err := New(Config{Logger: quietLogger(), Registerer: prometheus.NewRegistry()})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	xs := streamServers(ctx, s.cache, s.cb)
	w := world(50, 20)
	s.Update(w)
	s.rec.reconcile()

	f := &benchFleet{synced: make(chan struct{}), pushed: make(chan struct{}, 1)}
	f.unsynced.Store(pushBenchNodes)
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	var wg sync.WaitGroup
	streams := make([]*benchStream, pushBenchNodes)
	for i := range streams {
		st := newBenchStream(ctx, f, fmt.Sprintf("bench-node-%05d", i))
		streams[i] = st
		wg.Go(func() {
			if delta {
				_ = xs.DeltaAggregatedResources(benchDeltaStream{st})
			} else {
				_ = xs.StreamAggregatedResources(benchSotwStream{st})
			}
		})
		st.subscribe(delta)
	}
	select {
	case <-f.synced:
	case <-time.After(2 * time.Minute):
		b.Fatalf("%d nodes not synced within 2m", f.unsynced.Load())
	}
	runtime.GC()
	var synced runtime.MemStats
	runtime.ReadMemStats(&synced)
	f.edsBytes.Store(0)

	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	ops := 0
	for b.Loop() {
		w.Services = slices.Clone(w.Services) // a new snapshot, as discovery sends
		svc := &w.Services[ops%len(w.Services)]
		svc.Endpoints = slices.Clone(svc.Endpoints)
		if svc.Endpoints[0].Health == discovery.HealthHealthy {
			svc.Endpoints[0].Health = discovery.HealthUnhealthy
		} else {
			svc.Endpoints[0].Health = discovery.HealthHealthy
		}
		f.pending.Store(pushBenchNodes)
		s.Update(w)
		s.rec.reconcile()
		select {
		case <-f.pushed:
		case <-time.After(time.Minute):
			b.Fatalf("%d nodes without the change after 1m", f.pending.Load())
		}
		ops++
	}
	b.StopTimer()
	runtime.ReadMemStats(&ms1)
	per := float64(ops * pushBenchNodes)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/per, "ns/node")
	b.ReportMetric(float64(ms1.TotalAlloc-ms0.TotalAlloc)/per, "B/node")
	b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/per, "allocs/node")
	b.ReportMetric(float64(f.edsBytes.Load())/per, "eds-B/node")
	b.ReportMetric(float64(int64(synced.HeapAlloc)-int64(before.HeapAlloc))/pushBenchNodes, "heap-B/node")
	cancel()
	for _, st := range streams {
		st.close()
	}
	wg.Wait()
}

// benchFleet counts what the fleet's streams read.
type benchFleet struct {
	unsynced atomic.Int64 // nodes that have not read all four types yet
	synced   chan struct{}
	pending  atomic.Int64 // nodes still waiting for the current change
	pushed   chan struct{}
	edsBytes atomic.Int64 // bytes of EDS responses read since the first sync
}

// benchStream is an in-memory ADS stream of one node: requests are queued
// for the server's Recv, and every response is ACKed at once from Send.
type benchStream struct {
	ctx    context.Context
	cancel context.CancelFunc
	f      *benchFleet
	node   *core.Node
	reqs   chan proto.Message
	types  int // response types read (Send runs on one goroutine per stream)
	seen   map[string]bool
}

func newBenchStream(ctx context.Context, f *benchFleet, id string) *benchStream {
	ctx, cancel := context.WithCancel(ctx)
	return &benchStream{ctx: ctx, cancel: cancel, f: f, reqs: make(chan proto.Message, 16), seen: map[string]bool{},
		node: &core.Node{Id: id, Cluster: "bench", UserAgentName: "xds-server-bench"}}
}

var benchTypes = []string{resource.ClusterType, resource.EndpointType, resource.ListenerType, resource.RouteType}

func (st *benchStream) subscribe(delta bool) {
	for i, t := range benchTypes {
		var node *core.Node
		if i == 0 {
			node = st.node
		}
		if delta {
			st.reqs <- &discoverygrpc.DeltaDiscoveryRequest{Node: node, TypeUrl: t, ResourceNamesSubscribe: []string{"*"}}
		} else {
			st.reqs <- &discoverygrpc.DiscoveryRequest{Node: node, TypeUrl: t}
		}
	}
}

func (st *benchStream) close() { st.cancel() }

func (st *benchStream) recv() (proto.Message, error) {
	select {
	case r := <-st.reqs:
		return r, nil
	case <-st.ctx.Done():
		return nil, io.EOF
	}
}

// read records a response of typeURL of size bytes and queues its ACK.
func (st *benchStream) read(typeURL string, size int, ack proto.Message) {
	if !st.seen[typeURL] {
		st.seen[typeURL] = true
		if st.types++; st.types == len(benchTypes) && st.f.unsynced.Add(-1) == 0 {
			close(st.f.synced)
		}
	}
	if typeURL == resource.EndpointType {
		st.f.edsBytes.Add(int64(size))
		if st.f.pending.Add(-1) == 0 {
			st.f.pushed <- struct{}{}
		}
	}
	st.reqs <- ack
}

// benchSotwStream and benchDeltaStream are the gRPC server stream
// interfaces over a benchStream.
type benchSotwStream struct{ *benchStream }

func (s benchSotwStream) Send(r *discoverygrpc.DiscoveryResponse) error {
	s.read(r.GetTypeUrl(), proto.Size(r), &discoverygrpc.DiscoveryRequest{TypeUrl: r.GetTypeUrl(), VersionInfo: r.GetVersionInfo(), ResponseNonce: r.GetNonce()})
	return nil
}

func (s benchSotwStream) Recv() (*discoverygrpc.DiscoveryRequest, error) {
	r, err := s.recv()
	if err != nil {
		return nil, err
	}
	return r.(*discoverygrpc.DiscoveryRequest), nil
}

type benchDeltaStream struct{ *benchStream }

func (s benchDeltaStream) Send(r *discoverygrpc.DeltaDiscoveryResponse) error {
	s.read(r.GetTypeUrl(), proto.Size(r), &discoverygrpc.DeltaDiscoveryRequest{TypeUrl: r.GetTypeUrl(), ResponseNonce: r.GetNonce()})
	return nil
}

func (s benchDeltaStream) Recv() (*discoverygrpc.DeltaDiscoveryRequest, error) {
	r, err := s.recv()
	if err != nil {
		return nil, err
	}
	return r.(*discoverygrpc.DeltaDiscoveryRequest), nil
}

func (st *benchStream) Context() context.Context     { return st.ctx }
func (st *benchStream) SetHeader(metadata.MD) error  { return nil }
func (st *benchStream) SendHeader(metadata.MD) error { return nil }
func (st *benchStream) SetTrailer(metadata.MD)       {}
func (st *benchStream) SendMsg(any) error            { return nil }
func (st *benchStream) RecvMsg(any) error            { return nil }
