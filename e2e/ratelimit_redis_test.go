package e2e

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/xds-server/xds-server/e2e/harness"
)

// TestRateLimitRedisReplicas runs two xds-server binaries with the redis
// store on one redis-server and the same rules, and sends concurrent
// ShouldRateLimit calls to both: together they admit the limit once.
func TestRateLimitRedisReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	const limit, perReplica = 100, 150 // 300 requests for a limit of 100
	redis := harness.Redis(t, harness.RedisOptions{Password: "e2e-secret"})
	cfg := t.TempDir() + "/edge.yaml"
	write(t, cfg, "domain: edge\ndescriptors:\n  - key: tenant\n    rate_limit: { unit: hour, requests_per_unit: "+strconv.Itoa(limit)+" }\n")
	t.Setenv("XDS_SERVER_RATELIMIT_REDIS_PASSWORD", "e2e-secret") // inherited by the servers
	var clients []rlsv3.RateLimitServiceClient
	for range 2 {
		srv := harness.StartServer(t, "--ratelimit.config", cfg,
			"--ratelimit.store", "redis", "--ratelimit.redis.address", redis.Addr(), "--ratelimit.failure_mode", "deny")
		srv.WaitReady(t)
		conn, err := grpc.NewClient(srv.RateLimitAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		clients = append(clients, rlsv3.NewRateLimitServiceClient(conn))
	}
	// The fixed window is the hour: measure again if the load straddled
	// the turn of an hour (and so two windows).
	for attempt := range 2 {
		hour := time.Now().Unix() / 3600
		tenant := "t" + strconv.Itoa(attempt)
		var ok, over atomic.Int64
		var wg sync.WaitGroup
		for _, c := range clients {
			for range 3 {
				wg.Go(func() {
					for range perReplica / 3 {
						switch shouldRateLimit(t, c, tenant) {
						case rlsv3.RateLimitResponse_OK:
							ok.Add(1)
						case rlsv3.RateLimitResponse_OVER_LIMIT:
							over.Add(1)
						}
					}
				})
			}
		}
		wg.Wait()
		if time.Now().Unix()/3600 != hour {
			continue
		}
		if ok.Load() != limit || over.Load() != 2*perReplica-limit {
			t.Errorf("2 replicas answered %d OK and %d OVER_LIMIT to %d requests; want %d OK", ok.Load(), over.Load(), 2*perReplica, limit)
		}
		return
	}
	t.Fatal("every attempt straddled the turn of an hour")
}

func shouldRateLimit(t *testing.T, c rlsv3.RateLimitServiceClient, tenant string) rlsv3.RateLimitResponse_Code {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "edge",
		Descriptors: []*rlcommon.RateLimitDescriptor{{Entries: []*rlcommon.RateLimitDescriptor_Entry{{Key: "tenant", Value: tenant}}}}})
	if err != nil {
		t.Errorf("ShouldRateLimit: %v", err)
		return rlsv3.RateLimitResponse_UNKNOWN
	}
	return resp.GetOverallCode()
}
