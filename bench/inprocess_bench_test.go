package bench

import (
	"context"
	"log/slog"
	"net"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/xds-server/xds-server/discovery"
	"github.com/xds-server/xds-server/xds"
)

// BenchmarkInProcessPush measures the reconcile and push path alone: an
// in-process xds.Server (debounce 1µs) with 1,000 connected nodes over
// loopback, 50 services x 20 endpoints; one op is one endpoint's health
// changing in a discovery snapshot (Update) until every node received the
// EDS response showing it. No Consul, no process boundary.
func BenchmarkInProcessPush(b *testing.B) {
	cat := Catalog{Services: *flagServices, Endpoints: *flagEndpoints}
	for _, mode := range []string{"sotw", "delta"} {
		b.Run(mode, func(b *testing.B) { benchInProcess(b, cat, *flagNodes, mode == "delta") })
	}
}

func benchInProcess(b *testing.B, cat Catalog, nodes int, delta bool) {
	ctx, cancel := context.WithCancel(b.Context())
	defer cancel()
	srv, err := xds.New(xds.Config{Debounce: time.Microsecond, MaxDelay: time.Millisecond,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	health := map[Key]discovery.Health{}
	srv.Update(cat.Snapshot(health))
	go srv.Run(ctx)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	defer func() {
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		srv.Shutdown(sctx)
	}()

	fleet, err := NewFleet(FleetConfig{Addr: lis.Addr().String(), Nodes: nodes, Delta: delta})
	if err != nil {
		b.Fatal(err)
	}
	defer fleet.Close()
	w := fleet.Install(cat.Healthy())
	if err := fleet.Connect(ctx); err != nil {
		b.Fatal(err)
	}
	if err := fleet.Await(ctx, w, syncTimeout); err != nil {
		b.Fatal(err)
	}

	var p99 []float64
	k := 0
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		s, e := k%cat.Services, (k/cat.Services)%cat.Endpoints
		k++
		key := cat.Key(s, e)
		want := Want{Key: key, Status: corev3.HealthStatus_UNHEALTHY}
		if health[key] == discovery.HealthUnhealthy {
			health[key], want.Status = discovery.HealthHealthy, corev3.HealthStatus_HEALTHY
		} else {
			health[key] = discovery.HealthUnhealthy
		}
		w := fleet.Install([]Want{want})
		srv.Update(cat.Snapshot(health))
		if err := fleet.Await(ctx, w, changeTimeout); err != nil {
			b.Fatal(err)
		}
		lat := w.Latencies()
		secs := make([]float64, len(lat))
		for i, d := range lat {
			secs[i] = d.Seconds()
		}
		p99 = append(p99, Percentile(secs, 99))
	}
	b.StopTimer()
	b.ReportMetric(Median(p99)*1e3, "p99-ms")
}
