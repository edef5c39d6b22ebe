package ratelimit

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// rawCodec sends requests given as wire bytes (which proto.Marshal would
// refuse to produce) and decodes replies as protobuf.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) {
	if b, ok := v.([]byte); ok {
		return b, nil
	}
	return nil, fmt.Errorf("rawCodec: %T is not []byte", v)
}
func (rawCodec) Unmarshal(data []byte, v any) error { return proto.Unmarshal(data, v.(proto.Message)) }
func (rawCodec) Name() string                       { return "proto" }

// Regression (issue 14): a request whose descriptor value is not valid
// UTF-8, sent as raw bytes over a real gRPC connection, was answered
// Internal by grpc-go's decoding; it is InvalidArgument, counted as
// invalid, and the server keeps answering.
func TestServiceInvalidUTF8OverGRPC(t *testing.T) {
	ts := newTestService(t, simpleYAML, nil)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(ServerOptions()...)
	ts.Register(srv)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	good, err := proto.Marshal(request("d", "k=Z"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Count(good, []byte("Z")) != 1 {
		t.Fatalf("placeholder not unique in %x", good)
	}
	bad := bytes.Replace(good, []byte("Z"), []byte{0xff}, 1)
	method := rlsv3.RateLimitService_ShouldRateLimit_FullMethodName
	var resp rlsv3.RateLimitResponse
	err = conn.Invoke(ctx, method, bad, &resp, grpc.ForceCodec(rawCodec{}))
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("invalid UTF-8: %v, want InvalidArgument", err)
	}
	err = conn.Invoke(ctx, method, []byte{0x0a, 0x7f}, &resp, grpc.ForceCodec(rawCodec{}))
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("truncated message: %v, want InvalidArgument", err)
	}
	if got := ts.counter(t, "ratelimit_requests_total", "result", "invalid"); got != 2 {
		t.Errorf("invalid requests = %v, want 2", got)
	}
	if err := conn.Invoke(ctx, method, good, &resp, grpc.ForceCodec(rawCodec{})); err != nil || resp.OverallCode != rlsv3.RateLimitResponse_OK {
		t.Errorf("valid request afterwards: %v, %v", &resp, err)
	}
}
