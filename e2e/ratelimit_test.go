package e2e

import (
	"context"
	"strconv"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/xds-server/xds-server/e2e/harness"
)

// TestRateLimitService runs the real binary with an envoyproxy/ratelimit
// config and asks its RLS listener: 3 requests per minute for one remote
// address are OK, the fourth is OVER_LIMIT, another address is OK, and an
// unknown domain is OK.
func TestRateLimitService(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	cfg := t.TempDir() + "/edge.yaml"
	write(t, cfg, "domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: { unit: minute, requests_per_unit: 3 }\n")
	addr := "127.0.0.1:" + strconv.Itoa(harness.FreePort(t))
	srv := harness.StartServer(t, "--ratelimit.address", addr, "--ratelimit.config", cfg)
	srv.WaitReady(t)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	client := rlsv3.NewRateLimitServiceClient(conn)
	ask := func(domain, ip string) rlsv3.RateLimitResponse_Code {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := client.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: domain,
			Descriptors: []*rlcommon.RateLimitDescriptor{{Entries: []*rlcommon.RateLimitDescriptor_Entry{{Key: "remote_address", Value: ip}}}}})
		if err != nil {
			t.Fatalf("ShouldRateLimit: %v", err)
		}
		return resp.GetOverallCode()
	}
	for i := range 3 {
		if got := ask("edge", "10.0.0.1"); got != rlsv3.RateLimitResponse_OK {
			t.Fatalf("request %d: %v, want OK", i+1, got)
		}
	}
	if got := ask("edge", "10.0.0.1"); got != rlsv3.RateLimitResponse_OVER_LIMIT {
		t.Errorf("fourth request: %v, want OVER_LIMIT", got)
	}
	if got := ask("edge", "10.0.0.2"); got != rlsv3.RateLimitResponse_OK {
		t.Errorf("another address: %v, want OK", got)
	}
	if got := ask("other", "10.0.0.1"); got != rlsv3.RateLimitResponse_OK {
		t.Errorf("unknown domain: %v, want OK", got)
	}
}
