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

	"github.com/xds-server/xds-server/h2rpc"
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

// servers start the service behind each server ratelimit.server
// chooses (grpc-go, and h2rpc's lean server with Service.Call) on a
// loopback port; both are stopped at the end of the test.
var servers = map[string]func(t *testing.T, s *Service) string{
	"grpc": func(t *testing.T, s *Service) string {
		lis := listenLoopback(t)
		srv := grpc.NewServer(ServerOptions()...)
		s.Register(srv)
		go func() { _ = srv.Serve(lis) }()
		t.Cleanup(srv.Stop)
		return lis.Addr().String()
	},
	"lean": func(t *testing.T, s *Service) string {
		lis := listenLoopback(t)
		srv, err := h2rpc.New(h2rpc.Config{Method: RLSPath, Handler: s.Call})
		if err != nil {
			t.Fatal(err)
		}
		go func() { _ = srv.Serve(lis) }()
		t.Cleanup(func() { _ = srv.Close() })
		return lis.Addr().String()
	},
}

func listenLoopback(t *testing.T) net.Listener {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return lis
}

func dialService(t *testing.T, addr string) *grpc.ClientConn {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// The service over a real gRPC connection, behind either server: answers
// (headers included) and InvalidArgument.
func TestServiceOverGRPC(t *testing.T) {
	for name, start := range servers {
		t.Run(name, func(t *testing.T) {
			ts := newTestService(t, simpleYAML, func(c *ServiceConfig) { c.Headers = true })
			client := rlsv3.NewRateLimitServiceClient(dialService(t, start(t, ts.Service)))
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			resp, err := client.ShouldRateLimit(ctx, request("d", "k=a"))
			if err != nil {
				t.Fatal(err)
			}
			if resp.OverallCode != rlsv3.RateLimitResponse_OK || resp.Statuses[0].LimitRemaining != 1 || len(resp.ResponseHeadersToAdd) != 3 {
				t.Errorf("response %v", resp)
			}
			if resp, err = client.ShouldRateLimit(ctx, request("d", "k=a", "k=a")); err != nil || resp.OverallCode != rlsv3.RateLimitResponse_OVER_LIMIT {
				t.Errorf("over the limit: %v, %v", resp, err)
			}
			_, err = client.ShouldRateLimit(ctx, request("", "k=a"))
			if status.Code(err) != codes.InvalidArgument {
				t.Errorf("empty domain: %v, want InvalidArgument", err)
			}
		})
	}
}

// Regression (issue 14): a request whose descriptor value is not valid
// UTF-8, sent as raw bytes over a real gRPC connection, was answered
// Internal by grpc-go's decoding; it is InvalidArgument, counted as
// invalid, and the server keeps answering. So it is behind the lean
// server.
func TestServiceInvalidUTF8OverGRPC(t *testing.T) {
	for name, start := range servers {
		t.Run(name, func(t *testing.T) {
			ts := newTestService(t, simpleYAML, nil)
			invalidOverGRPC(t, ts, dialService(t, start(t, ts.Service)))
		})
	}
}

func invalidOverGRPC(t *testing.T, ts *testService, conn *grpc.ClientConn) {
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
