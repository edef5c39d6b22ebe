package harness

import (
	"context"
	"net"
	"strconv"
	"testing"

	"google.golang.org/grpc"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/orca"
)

// Backend is a real gRPC server implementing grpc.testing.TestService; its
// UnaryCall answers with its own id in server_id. It also serves ORCA out
// of band (grpc-go's orca package), reporting the load set with SetLoad.
type Backend struct {
	testgrpc.UnimplementedTestServiceServer
	ID   string
	Host string
	Port int
	srv  *grpc.Server
	load orca.ServerMetricsRecorder
}

// StartBackend serves a backend on a free loopback port until cleanup.
func StartBackend(t testing.TB, id string) *Backend {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &Backend{ID: id, Host: "127.0.0.1", Port: lis.Addr().(*net.TCPAddr).Port, srv: grpc.NewServer(),
		load: orca.NewServerMetricsRecorder()}
	testgrpc.RegisterTestServiceServer(b.srv, b)
	if err := orca.Register(b.srv, orca.ServiceOptions{ServerMetricsProvider: b.load}); err != nil {
		t.Fatal(err)
	}
	go func() { _ = b.srv.Serve(lis) }()
	t.Cleanup(b.srv.Stop)
	return b
}

// SetLoad sets what the backend reports over ORCA: CPU utilization in
// [0, 1] and requests per second. A report goes out when a stream opens,
// then every 30s (grpc-go's minimum reporting interval).
func (b *Backend) SetLoad(cpu, qps float64) {
	b.load.SetCPUUtilization(cpu)
	b.load.SetQPS(qps)
}

// SetNamed sets a named utilization of the backend's ORCA reports (e.g.
// the lame-duck metric; grpc-go's recorder has no other named metrics); it
// goes out with the next report.
func (b *Backend) SetNamed(name string, v float64) { b.load.SetNamedUtilization(name, v) }

// Addr is host:port.
func (b *Backend) Addr() string { return net.JoinHostPort(b.Host, strconv.Itoa(b.Port)) }

// UnaryCall answers with the backend's id.
func (b *Backend) UnaryCall(context.Context, *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	return &testgrpc.SimpleResponse{ServerId: b.ID}, nil
}

// EmptyCall answers nothing.
func (b *Backend) EmptyCall(context.Context, *testgrpc.Empty) (*testgrpc.Empty, error) {
	return &testgrpc.Empty{}, nil
}
