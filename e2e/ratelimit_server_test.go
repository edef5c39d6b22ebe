package e2e

import (
	"context"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding/gzip"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	"github.com/xds-server/xds-server/e2e/harness"
)

// TestRateLimitServers: behind ratelimit.server lean (the default) and
// grpc, the real binary answers grpc-go's RLS client alike, and answers
// what it does not serve (the health service, server reflection) with
// UNIMPLEMENTED; the lean server also refuses compressed requests with
// UNIMPLEMENTED, counted by reason, and serves on.
func TestRateLimitServers(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	for _, server := range []string{"lean", "grpc"} {
		t.Run(server, func(t *testing.T) {
			cfg := t.TempDir() + "/rules.yaml"
			write(t, cfg, "domain: edge\ndescriptors:\n  - key: k\n    rate_limit: { unit: minute, requests_per_unit: 1 }\n")
			srv := harness.StartServer(t, "--ratelimit.config", cfg, "--ratelimit.server", server)
			srv.WaitReady(t)
			conn, err := grpc.NewClient(srv.RateLimitAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			client := rlsv3.NewRateLimitServiceClient(conn)
			req := &rlsv3.RateLimitRequest{Domain: "edge",
				Descriptors: []*rlcommon.RateLimitDescriptor{{Entries: []*rlcommon.RateLimitDescriptor_Entry{{Key: "k", Value: "v"}}}}}
			if resp, err := client.ShouldRateLimit(ctx, req); err != nil || resp.OverallCode != rlsv3.RateLimitResponse_OK {
				t.Fatalf("first request: %v, %v; want OK", resp, err)
			}
			_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
			if status.Code(err) != codes.Unimplemented {
				t.Errorf("health check: %v, want Unimplemented", err)
			}
			stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
			if err == nil {
				_, err = stream.Recv()
			}
			if status.Code(err) != codes.Unimplemented {
				t.Errorf("server reflection: %v, want Unimplemented", err)
			}
			if server == "lean" {
				_, err = client.ShouldRateLimit(ctx, req, grpc.UseCompressor(gzip.Name))
				if status.Code(err) != codes.Unimplemented {
					t.Errorf("gzip request: %v, want Unimplemented", err)
				}
				awaitCounter(t, srv, `ratelimit_lean_refused_total{reason="unimplemented"}`, 2)
				awaitCounter(t, srv, `ratelimit_lean_refused_total{reason="compressed"}`, 1)
			}
			resp, err := client.ShouldRateLimit(ctx, req)
			if err != nil || resp.OverallCode != rlsv3.RateLimitResponse_OVER_LIMIT || resp.Statuses[0].GetCurrentLimit().GetRequestsPerUnit() != 1 {
				t.Errorf("second request: %v, %v; want OVER_LIMIT of a limit of 1", resp, err)
			}
		})
	}
}
