package e2e

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/xds-server/xds-server/e2e/harness"
)

// TestLogsTellTheStory runs the real binary on a real Consul through a
// scripted day: start, a health flip, a Consul maintenance drain, an admin
// drain and undrain, a grpc-go node connecting and leaving, and Consul
// going down and coming back. Each step must show in the log as one
// readable line (text format), durations as strings.
func TestLogsTellTheStory(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	consul := harness.Consul(t)
	backends := startEcho(t, 3)
	registerEcho(t, consul, backends, "")
	srv := startServer(t, consul, "--log.level", "info")
	agent := consul.Client().Agent()
	step := func(what, pattern string) {
		t.Helper()
		re := regexp.MustCompile(pattern)
		deadline := time.Now().Add(20 * time.Second)
		for !re.MatchString(srv.Logs()) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: no line matching %s in the log:\n%s", what, pattern, srv.Logs())
			}
			time.Sleep(20 * time.Millisecond) // the log is a file written by another process: polled
		}
	}
	step("start-up", `level=INFO msg="xds-server started" xds_address=\S+ admin_address=\S+ console=http://127.0.0.1:\d+/ui/ discovery=consul ratelimit_address=\S+ .* listeners=0 .*ratelimit_domains=0`)
	step("first snapshot", `level=INFO msg="first snapshot" component=discovery source=consul services=1 endpoints=3 unknown=0 healthy=3`)

	if err := agent.UpdateTTL("ttl-"+backends[0].ID, "down", api.HealthCritical); err != nil {
		t.Fatal(err)
	}
	step("health flip", `msg="endpoints changed" component=discovery service=echo endpoints=3 healthy=-1 unhealthy=\+1 source=consul\n`)

	if err := agent.EnableServiceMaintenance(backends[1].ID, "deploy"); err != nil {
		t.Fatal(err)
	}
	step("consul maintenance", `msg="endpoints changed" component=discovery service=echo endpoints=3 healthy=-1 draining=\+1 drained=consul_maintenance:1 source=consul_maintenance\n`)

	post(t, srv, http.MethodPost, `{"service": "echo", "endpoint": "`+backends[2].ID+`", "ttl": "10m"}`)
	step("admin drain request", `level=INFO msg="admin drain" component=drain service=echo endpoint=`+backends[2].ID+` until=\d{4}-\S+Z remote=127.0.0.1:\d+`)
	step("admin drain applied", `msg="endpoints changed" component=discovery service=echo endpoints=3 healthy=-1 draining=\+1 drained=admin:1 source=admin\n`)
	post(t, srv, http.MethodDelete, `{"service": "echo", "endpoint": "`+backends[2].ID+`"}`)
	step("admin undrain request", `level=INFO msg="admin undrain" component=drain service=echo endpoint=`+backends[2].ID+` deleted=true remote=`)
	step("admin undrain applied", `service=echo endpoints=3 healthy=\+1 draining=-1 undrained=admin:1 source=admin\n`)

	conn := dialXDS(t, srv.XDSAddr, "story-node")
	call := unaryCall(conn)
	awaitAll(t, call, []string{backends[2].ID}, 30*time.Second)
	step("node connected", `level=INFO msg="node connected" component=xds node=story-node cluster=e2e`)
	conn.Close()
	step("node disconnected", `level=INFO msg="node disconnected" component=xds node=story-node connected_for=[0-9.]+m?s\n`)

	consul.Stop()
	step("consul down", `level=WARN msg="consul unreachable; retrying" component=discovery.consul kind=\w+ service=\S* attempt=1 retry_in=\d+ms down_for=0s suppressed=0 error=`)
	consul.Start()
	step("consul back", `level=INFO msg="consul query recovered" component=discovery.consul kind=\w+ service=\S* failures=\d+ down_for=[0-9.]+m?s\n`)

	logs := srv.Logs()
	if n := strings.Count(logs, `msg="consul unreachable; retrying"`); n > 2 {
		t.Errorf("%d WARN lines for a short outage of two watches, want at most 2 (one per watch per 30s)", n)
	}
	if strings.Contains(logs, "grace=5000000000") || regexp.MustCompile(`connected_for=\d{5,}`).MatchString(logs) {
		t.Error("durations written as nanoseconds")
	}
	t.Logf("the story:\n%s", logs)
}

// post sends a drain request and fails the test unless it is 200.
func post(t *testing.T, srv *harness.Server, method, body string) {
	t.Helper()
	req, err := http.NewRequest(method, srv.AdminURL("/v1/drain"), strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s /v1/drain %s: %s", method, body, resp.Status)
	}
}
