package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/xds-server/xds-server/e2e/harness"
)

// floodRequest is a request of the edge domain with one user descriptor
// per name.
func floodRequest(names ...string) *rlsv3.RateLimitRequest {
	req := &rlsv3.RateLimitRequest{Domain: "edge"}
	for _, n := range names {
		req.Descriptors = append(req.Descriptors, &rlcommon.RateLimitDescriptor{
			Entries: []*rlcommon.RateLimitDescriptor_Entry{{Key: "user", Value: n}}})
	}
	return req
}

// floodUsers is n user names: prefix0, prefix1, ...
func floodUsers(prefix string, from, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = prefix + strconv.Itoa(from+i)
	}
	return out
}

// floodRefused counts the descriptors refused in resp.
func floodRefused(resp *rlsv3.RateLimitResponse) int {
	n := 0
	for _, s := range resp.Statuses {
		if s.Code == rlsv3.RateLimitResponse_OVER_LIMIT {
			n++
		}
	}
	return n
}

// TestFloodNewKeysStillServed (issue 24, item 3): with the memory store
// full of hour-window keys, every new key landed in shared overflow
// counters, and after the flood 62% of brand-new users got OVER_LIMIT on
// their first request. Against the real binary with a low key cap
// (20,000): a flood of 200,000 distinct users (one hit each of 3 per
// hour, through RLS gRPC, 1,000 descriptors a request); then brand-new
// users' first hits (500 through gRPC, 11 through /v1/ratelimit) are all
// admitted, a user at 2 of 3 before the flood keeps its usage (one more
// hit admitted, the next refused), the store holds at most its cap, and
// the flood's evictions are counted.
func TestFloodNewKeysStillServed(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	const maxKeys, flood = 20_000, 200_000
	rules := t.TempDir() + "/rules.yaml"
	write(t, rules, "domain: edge\ndescriptors:\n  - key: user\n    rate_limit: { unit: hour, requests_per_unit: 3 }\n")
	srv := harness.StartServer(t, "--ratelimit.config", rules, "--ratelimit.memory.max_keys", strconv.Itoa(maxKeys),
		"--ratelimit.max_descriptors", "1000")
	srv.WaitReady(t)
	conn, err := grpc.NewClient(srv.RateLimitAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := rlsv3.NewRateLimitServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	call := func(req *rlsv3.RateLimitRequest) *rlsv3.RateLimitResponse {
		t.Helper()
		resp, err := client.ShouldRateLimit(ctx, req)
		if err != nil {
			t.Fatalf("ShouldRateLimit: %v", err)
		}
		return resp
	}
	for range 2 {
		call(floodRequest("victim"))
	}
	start := time.Now()
	for i := 0; i < flood; i += 1000 {
		call(floodRequest(floodUsers("flood-", i, 1000)...))
	}
	t.Logf("flood of %d keys in %v", flood, time.Since(start).Round(time.Millisecond))

	refused, fresh := 0, 0
	for i := 0; i < 500; i += 100 {
		refused += floodRefused(call(floodRequest(floodUsers("new-user-", i, 100)...)))
		fresh += 100
	}
	for i := range 11 {
		body := fmt.Sprintf(`{"domain":"edge","descriptors":[{"entries":[{"key":"user","value":"http-user-%d"}]}]}`, i)
		resp, err := http.Post(srv.AdminURL("/v1/ratelimit"), "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			refused++
		}
		fresh++
	}
	t.Logf("%d of %d brand-new users refused their first request after the flood", refused, fresh)
	if refused*100 > fresh {
		t.Errorf("%d of %d brand-new users refused their first request, want at most 1%%", refused, fresh)
	}
	if r := call(floodRequest("victim")); r.OverallCode != rlsv3.RateLimitResponse_OK {
		t.Errorf("victim's 3rd hit of 3: %v, want OK", r.OverallCode)
	}
	if r := call(floodRequest("victim")); r.OverallCode != rlsv3.RateLimitResponse_OVER_LIMIT {
		t.Errorf("victim's 4th hit of 3: %v, want OVER_LIMIT (its usage was forgotten in the flood)", r.OverallCode)
	}
	if n := metricValue(t, srv, "", "ratelimit_memory_keys"); n > maxKeys || n == 0 {
		t.Errorf("ratelimit_memory_keys = %v, want in (0, %d]", n, maxKeys)
	}
	cold := metricValue(t, srv, "", `ratelimit_memory_evictions_total{reason="cold"}`)
	if cold < flood-maxKeys {
		t.Errorf(`ratelimit_memory_evictions_total{reason="cold"} = %v, want at least %d`, cold, flood-maxKeys)
	}
	t.Logf("keys held %v, cold evictions %v, hot %v, overflow %v", metricValue(t, srv, "", "ratelimit_memory_keys"), cold,
		metricValue(t, srv, "", `ratelimit_memory_evictions_total{reason="hot"}`), metricValue(t, srv, "", "ratelimit_memory_overflow_total"))
}
