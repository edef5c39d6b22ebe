package e2e

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/xds-server/xds-server/e2e/harness"
)

// startRLS runs the real binary with the rate-limit config yaml and
// args, and returns it with an RLS client of its rate-limit listener.
func startRLS(t *testing.T, yaml string, args ...string) (*harness.Server, rlsv3.RateLimitServiceClient) {
	t.Helper()
	cfg := t.TempDir() + "/rules.yaml"
	write(t, cfg, yaml)
	srv := harness.StartServer(t, append([]string{"--ratelimit.config", cfg}, args...)...)
	srv.WaitReady(t)
	conn, err := grpc.NewClient(srv.RateLimitAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return srv, rlsv3.NewRateLimitServiceClient(conn)
}

// TestRateLimitService runs the real binary with an envoyproxy/ratelimit
// config and asks its RLS listener: 3 requests per minute for one remote
// address are OK, the fourth is OVER_LIMIT, another address is OK, and an
// unknown domain is OK.
func TestRateLimitService(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	srv, client := startRLS(t, "domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: { unit: minute, requests_per_unit: 3 }\n")
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
	// The JSON front end on the admin address, at both paths: 200 with
	// the response, 429 over the limit.
	for path, tc := range map[string]struct {
		ip   string
		code int
		want string
	}{"/v1/ratelimit": {"10.0.0.3", http.StatusOK, `"overall_code":"OK"`}, "/json": {"10.0.0.1", http.StatusTooManyRequests, `"overall_code":"OVER_LIMIT"`}} {
		body := `{"domain": "edge", "descriptors": [{"entries": [{"key": "remote_address", "value": "` + tc.ip + `"}]}]}`
		resp, err := http.Post("http://"+srv.AdminAddr+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.code || !strings.Contains(string(got), tc.want) {
			t.Errorf("POST %s: %d %s, want %d with %s", path, resp.StatusCode, got, tc.code, tc.want)
		}
	}
}

// TestRateLimitServiceSettings: the service's knobs from flags. The
// criticality rides in the descriptor entry named by
// ratelimit.criticality.key, and ratelimit.criticality.enabled gives
// every rule the default shares: SHEDDABLE fills 7 of a limit of 10,
// CRITICAL_PLUS the rest. ratelimit.max_descriptors bounds requests.
func TestRateLimitServiceSettings(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	_, client := startRLS(t, "domain: edge\ndescriptors:\n  - key: user\n    rate_limit: { unit: hour, requests_per_unit: 10 }\n",
		"--ratelimit.criticality.key", "prio", "--ratelimit.criticality.enabled", "--ratelimit.max_descriptors", "2")
	call := func(descriptors int, class string) (*rlsv3.RateLimitResponse, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		req := &rlsv3.RateLimitRequest{Domain: "edge"}
		for range descriptors {
			req.Descriptors = append(req.Descriptors, &rlcommon.RateLimitDescriptor{Entries: []*rlcommon.RateLimitDescriptor_Entry{
				{Key: "user", Value: "alice"}, {Key: "prio", Value: class}}})
		}
		return client.ShouldRateLimit(ctx, req)
	}
	admitted := func(class string, n int) int {
		t.Helper()
		ok := 0
		for range n {
			resp, err := call(1, class)
			if err != nil {
				t.Fatalf("ShouldRateLimit: %v", err)
			}
			if resp.GetOverallCode() == rlsv3.RateLimitResponse_OK {
				ok++
			}
		}
		return ok
	}
	if got := admitted("SHEDDABLE", 10); got != 7 {
		t.Errorf("SHEDDABLE: %d of 10 admitted, want 7 (share 0.7 of 10)", got)
	}
	if got := admitted("CRITICAL_PLUS", 10); got != 3 {
		t.Errorf("CRITICAL_PLUS after that: %d of 10 admitted, want the 3 left", got)
	}
	if _, err := call(3, "CRITICAL"); status.Code(err) != codes.InvalidArgument {
		t.Errorf("3 descriptors with ratelimit.max_descriptors 2: %v, want InvalidArgument", err)
	}
}

// TestRateLimitCriticalityOverload: the real binary with a plain
// envoyproxy/ratelimit rule (no criticality settings), 2x its limit of
// mixed traffic in real time, an equal share of each class, counted after
// a second of warm-up. CRITICAL_PLUS keeps >= 99% of its requests, no
// class is accepted more than a higher one, and SHEDDABLE is refused. Real time on a busy machine bunches
// requests, so the strict figures are the fake-clock unit tests'
// (TestCriticalityAdaptiveUnderOverload); this one checks the wiring.
func TestRateLimitCriticalityOverload(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	_, client := startRLS(t, "domain: api\ndescriptors:\n  - key: customer\n    rate_limit: { unit: second, requests_per_unit: 100 }\n")
	classes := []string{"CRITICAL_PLUS", "CRITICAL", "SHEDDABLE_PLUS", "SHEDDABLE"}
	var sent, admitted [4]int
	tick := time.NewTicker(5 * time.Millisecond) // 200 requests/s: 2x the limit
	defer tick.Stop()
	const warmup, counted = 200, 600
	start := time.Now()
	for i := range warmup + counted {
		<-tick.C
		c := i % 4
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := client.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "api", Descriptors: []*rlcommon.RateLimitDescriptor{{
			Entries: []*rlcommon.RateLimitDescriptor_Entry{{Key: "customer", Value: "acme"}, {Key: "criticality", Value: classes[c]}}}}})
		cancel()
		if err != nil {
			t.Fatalf("ShouldRateLimit: %v", err)
		}
		if i < warmup {
			continue
		}
		sent[c]++
		if resp.GetOverallCode() == rlsv3.RateLimitResponse_OK {
			admitted[c]++
		}
	}
	t.Logf("admitted per class (CRITICAL_PLUS first): %v of %v in %v", admitted, sent, time.Since(start))
	if acc := float64(admitted[0]) / float64(sent[0]); acc < 0.99 {
		t.Errorf("CRITICAL_PLUS acceptance %.3f, want >= 0.99", acc)
	}
	for c := 1; c < 4; c++ { // lower classes first, within a few requests
		if lo, hi := float64(admitted[c])/float64(sent[c]), float64(admitted[c-1])/float64(sent[c-1]); lo > hi+0.05 {
			t.Errorf("%s accepted %.3f, more than %s (%.3f)", classes[c], lo, classes[c-1], hi)
		}
	}
	if acc := float64(admitted[3]) / float64(sent[3]); acc > 0.25 {
		t.Errorf("SHEDDABLE acceptance %.3f under 2x overload, want <= 0.25", acc)
	}
}
