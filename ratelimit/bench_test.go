package ratelimit

import (
	"context"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

const benchYAML = `
domain: bench
descriptors:
  - key: remote_address
    rate_limit: {unit: second, requests_per_unit: 1000000}
  - key: tenant
    descriptors:
      - key: path
        value: /api/*
        rate_limit: {unit: minute, requests_per_unit: 1000000, algorithm: sliding_window}
`

// benchRequests are requests over 10,000 addresses and 100 tenants, two
// descriptors each.
func benchRequests() []*rlsv3.RateLimitRequest {
	reqs := make([]*rlsv3.RateLimitRequest, 10_000)
	for i := range reqs {
		reqs[i] = request("bench", "remote_address=10.0."+strconv.Itoa(i/256)+"."+strconv.Itoa(i%256),
			"tenant=t"+strconv.Itoa(i%100)+",path=/api/items")
	}
	return reqs
}

func reportDecisions(b *testing.B, perOp int) {
	b.ReportMetric(float64(b.N*perOp)/b.Elapsed().Seconds(), "decisions/s")
}

// reportRequests reports ShouldRateLimit calls per second and the
// descriptor decisions they carry.
func reportRequests(b *testing.B, descriptors int) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "requests/s")
	b.ReportMetric(float64(b.N*descriptors)/b.Elapsed().Seconds(), "descriptors/s")
}

// BenchmarkMemoryDecide is the memory store alone: one check per call
// over 100,000 keys.
func BenchmarkMemoryDecide(b *testing.B) {
	m, err := NewMemory(MemoryConfig{})
	if err != nil {
		b.Fatal(err)
	}
	keys := make([]string, 100_000)
	for i := range keys {
		keys[i] = "bench_remote_address_" + strconv.Itoa(i) + "_"
	}
	l := Limit{Algorithm: FixedWindow, Requests: 1_000_000, Unit: Second}
	var next atomic.Int64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		checks := make([]Check, 1)
		for pb.Next() {
			i := next.Add(1)
			checks[0] = Check{Key: keys[i%int64(len(keys))], Limit: l, Cap: l.Requests, Hits: 1}
			if _, err := m.Decide(context.Background(), t0, checks); err != nil {
				b.Error(err)
				return
			}
		}
	})
	reportDecisions(b, 1)
}

func newBenchService(b *testing.B) *Service {
	b.Helper()
	m, err := NewMemory(MemoryConfig{})
	if err != nil {
		b.Fatal(err)
	}
	cfg, err := Load(File{Name: "bench.yaml", Data: []byte(benchYAML)})
	if err != nil {
		b.Fatal(err)
	}
	svc, err := NewService(ServiceConfig{Store: m, Config: cfg, Registerer: prometheus.NewRegistry(), Headers: true})
	if err != nil {
		b.Fatal(err)
	}
	return svc
}

// BenchmarkServiceShouldRateLimit is the service handler in process
// (matching, memory store, metrics, response): one op is one request of
// two descriptors.
func BenchmarkServiceShouldRateLimit(b *testing.B) {
	svc := newBenchService(b)
	reqs := benchRequests()
	var next atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req := reqs[next.Add(1)%int64(len(reqs))]
			if _, err := svc.ShouldRateLimit(context.Background(), req); err != nil {
				b.Error(err)
				return
			}
		}
	})
	reportRequests(b, 2)
}

// BenchmarkGRPC is the whole path over loopback TCP: gRPC client and
// server in this process (sharing its cores), 32 x GOMAXPROCS concurrent
// callers on one connection; one op is one ShouldRateLimit call of two
// descriptors.
func BenchmarkGRPC(b *testing.B) {
	svc := newBenchService(b)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := grpc.NewServer()
	svc.Register(srv)
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	client := rlsv3.NewRateLimitServiceClient(conn)
	reqs := benchRequests()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := client.ShouldRateLimit(ctx, reqs[0]); err != nil {
		b.Fatal(err)
	}
	var next atomic.Int64
	b.SetParallelism(32)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req := reqs[next.Add(1)%int64(len(reqs))]
			if _, err := client.ShouldRateLimit(ctx, req); err != nil {
				b.Error(err)
				return
			}
		}
	})
	reportRequests(b, 2)
}

// BenchmarkMatch is the matcher alone: a nested descriptor through a
// wildcard.
func BenchmarkMatch(b *testing.B) {
	cfg, err := Load(File{Name: "bench.yaml", Data: []byte(benchYAML)})
	if err != nil {
		b.Fatal(err)
	}
	entries := []Entry{{"tenant", "t1"}, {"path", "/api/items"}}
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := cfg.Match("bench", entries, nil); !ok {
			b.Fatal("no match")
		}
	}
}
