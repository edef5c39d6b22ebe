package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	orcaservice "github.com/cncf/xds/go/xds/service/orca/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthgrpc "google.golang.org/grpc/health/grpc_health_v1"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/orca"
)

// backend is the running example: its servers, load reports and Consul
// registration.
type backend struct {
	cfg      Config
	log      *slog.Logger
	id       string // Consul service id
	grpcLis  net.Listener
	httpLis  net.Listener
	grpc     *grpc.Server
	http     *http.Server
	health   *health.Server
	metrics  *serverMetrics // reported over ORCA, out of band and per call
	load     *load          // of the test service, sampled into metrics
	slots    *slots         // the capacity model (-slots); nil: calls take no time
	registry *registry

	lameDuck chan struct{}      // closed when lame duck begins
	stopping chan struct{}      // closed when the servers stop accepting
	failed   chan error         // errors of servers that stopped on their own
	stopLoad context.CancelFunc // ends the load sampling
}

// start listens, serves and registers the backend in Consul.
func start(cfg Config, log *slog.Logger) (*backend, error) {
	grpcLis, err := net.Listen("tcp", cfg.GRPCAddr)
	if err != nil {
		return nil, fmt.Errorf("backend: grpc listen: %w", err)
	}
	httpLis, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		grpcLis.Close()
		return nil, fmt.Errorf("backend: http listen: %w", err)
	}
	grpcAddr, httpAddr := grpcLis.Addr().(*net.TCPAddr), httpLis.Addr().(*net.TCPAddr)
	id := cmp.Or(cfg.ID, cfg.Service+"-"+strconv.Itoa(grpcAddr.Port))
	reg, err := newRegistry(cfg.Consul, id, cfg.ConsulTimeout)
	if err != nil {
		grpcLis.Close()
		httpLis.Close()
		return nil, err
	}
	metrics := &serverMetrics{ServerMetricsRecorder: orca.NewServerMetricsRecorder(), lameDuckMetric: cfg.LameDuckMetric}
	b := &backend{cfg: cfg, log: log.With("id", id), id: id, grpcLis: grpcLis, httpLis: httpLis,
		health: health.NewServer(), metrics: metrics, load: newLoad(time.Now()), registry: reg,
		lameDuck: make(chan struct{}), stopping: make(chan struct{}), failed: make(chan error, 2)}
	if cfg.Slots > 0 {
		b.slots = newSlots(cfg.Slots, cfg.ServiceTime, time.Now())
	}
	b.grpc = b.newGRPCServer()
	b.http = &http.Server{Handler: b.httpHandler(), ReadHeaderTimeout: 5 * time.Second}
	b.serve()
	if err := reg.register(registration(cfg, id, grpcAddr, httpAddr)); err != nil {
		b.stopLoad()
		b.grpc.Stop()
		b.http.Close()
		return nil, err
	}
	return b, nil
}

// newGRPCServer returns the gRPC server with the test, health and ORCA
// services, and ORCA per-call metrics in the trailers of test calls.
func (b *backend) newGRPCServer() *grpc.Server {
	srv := grpc.NewServer(orca.CallMetricsServerOption(b.metrics))
	hostname, _ := os.Hostname()
	testgrpc.RegisterTestServiceServer(srv, &testService{id: b.id, hostname: hostname, load: b.load, slots: b.slots})
	b.health.SetServingStatus("grpc.testing.TestService", healthgrpc.HealthCheckResponse_SERVING)
	healthgrpc.RegisterHealthServer(srv, b.health)
	orcaservice.RegisterOpenRcaServiceServer(srv, &orcaService{metrics: b.metrics,
		minInterval: b.cfg.ORCAMinInterval, lameDuck: b.lameDuck, stopping: b.stopping})
	return srv
}

// httpHandler serves GET /healthz (200, also in lame duck: maintenance
// mode, not a failing check, is what tells Consul to drain) and says hello
// with the id and the path on any other GET, so that requests routed by a
// proxy show where they went.
func (b *backend) httpHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from %s (%s)\n", b.id, r.URL.Path)
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		if b.inLameDuck() {
			fmt.Fprintln(w, "ok, lame duck")
			return
		}
		fmt.Fprintln(w, "ok")
	})
	return mux
}

// serve runs both servers and the load sampling; a server that stops
// before the shutdown reports to b.failed.
func (b *backend) serve() {
	ctx, cancel := context.WithCancel(context.Background())
	b.stopLoad = cancel
	go reportLoad(ctx, b.load, b.slots, b.metrics, b.cfg.Utilization, b.cfg.Capacity)
	go func() {
		if err := b.grpc.Serve(b.grpcLis); err != nil {
			b.failed <- fmt.Errorf("backend: grpc serve: %w", err)
		}
	}()
	go func() {
		if err := b.http.Serve(b.httpLis); !errors.Is(err, http.ErrServerClosed) {
			b.failed <- fmt.Errorf("backend: http serve: %w", err)
		}
	}()
}

// inLameDuck tells whether lame duck has begun.
func (b *backend) inLameDuck() bool {
	select {
	case <-b.lameDuck:
		return true
	default:
		return false
	}
}

// readyLine is the line printed on stdout once the backend serves and is
// registered.
func (b *backend) readyLine() string {
	return fmt.Sprintf("ready grpc=%s http=%s id=%s", b.grpcLis.Addr(), b.httpLis.Addr(), b.id)
}
