package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	testgrpc "google.golang.org/grpc/interop/grpc_testing"

	"github.com/xds-server/xds-server/e2e/harness"
)

// consulRoutesConfig routes to web, which only Consul knows (no
// services: entry, no discovery.consul.services filter), and to ghost,
// which nobody knows.
const consulRoutesConfig = `
discovery: { source: consul }
listeners:
  - name: ingress
    address: 127.0.0.1:10000
    nodes: ["validate-*"]
    routes: [{ prefix: /grpc.testing.TestService/, service: web }]
  - name: ghosts
    address: 127.0.0.1:10001
    nodes: ["nobody"]
    routes: [{ prefix: /, service: ghost }]
`

// runBinary runs the built xds-server and returns its exit code and output.
func runBinary(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(harness.ServerBinary(t), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return ee.ExitCode(), stdout.String(), stderr.String()
	case err != nil:
		t.Fatal(err)
	}
	return 0, stdout.String(), stderr.String()
}

// TestValidateAgainstConsul: with discovery.source consul, validate
// checks routes' services against a real Consul's catalog. A service
// present only in Consul validates (and is served: an RPC through the
// route reaches it); one that does not exist is a warning (exit 0), as is
// every route's service when Consul does not answer. The server counts
// the route to the missing service in xds_route_unknown_service.
func TestValidateAgainstConsul(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	consul := harness.Consul(t)
	harness.StartExampleBackend(t, "-consul", consul.Addr(), "-service", "web", "-id", "web-1",
		"-grpc-addr", "127.0.0.1:0", "-http-addr", "127.0.0.1:0", "-check-interval", "1s", "-drain-delay", "0s")
	cfg := t.TempDir() + "/xds-server.yaml"
	write(t, cfg, consulRoutesConfig)

	code, stdout, stderr := runBinary(t, "validate", "--config", cfg, "--discovery.consul.address", consul.Addr())
	if code != 0 || !strings.Contains(stdout, "configuration is valid") {
		t.Errorf("validate: exit %d, stdout %q, stderr %q; want 0 and valid", code, stdout, stderr)
	}
	wantWarn := fmt.Sprintf("listeners[1].routes[0].service: ghost: is not in Consul's catalog at %s (yet)", consul.Addr())
	if !strings.Contains(stderr, wantWarn) || strings.Contains(stderr, "service: web") {
		t.Errorf("validate's warnings:\n%s\nwant only %q", stderr, wantWarn)
	}

	code, stdout, _ = runBinary(t, "validate", "--config", cfg, "--discovery.consul.address", consul.Addr(), "--output", "json")
	var problems []struct {
		Key, Value, Reason string
		Warning            bool
	}
	if err := json.Unmarshal([]byte(stdout), &problems); err != nil || code != 0 {
		t.Fatalf("--output json: exit %d, %v:\n%s", code, err, stdout)
	}
	if len(problems) != 1 || problems[0].Key != "listeners[1].routes[0].service" || !problems[0].Warning {
		t.Errorf("--output json: %+v", problems)
	}

	// A Consul that accepts connections but never answers: validate waits
	// 2s, then warns.
	mute, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mute.Close() })
	go func() {
		for {
			c, err := mute.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()
	start := time.Now()
	code, _, stderr = runBinary(t, "validate", "--config", cfg, "--discovery.consul.address", mute.Addr().String())
	took := time.Since(start)
	if code != 0 || !strings.Contains(stderr, "listeners[0].routes[0].service: web: not checked: Consul at "+mute.Addr().String()+" did not answer within 2s") ||
		!strings.Contains(stderr, "listeners[1].routes[0].service: ghost: not checked") {
		t.Errorf("Consul mute: exit %d, stderr:\n%s", code, stderr)
	}
	if took < 2*time.Second || took > 10*time.Second {
		t.Errorf("validate with a mute Consul took %v, want about 2s", took)
	}
	down := fmt.Sprintf("127.0.0.1:%d", harness.FreePort(t))
	code, _, stderr = runBinary(t, "validate", "--config", cfg, "--discovery.consul.address", down)
	if code != 0 || !strings.Contains(stderr, "listeners[0].routes[0].service: web: not checked: Consul at "+down+" could not be asked") {
		t.Errorf("Consul down: exit %d, stderr:\n%s", code, stderr)
	}

	srv := startServer(t, consul, "--config", cfg)
	client := testgrpc.NewTestServiceClient(dialListener(t, srv.XDSAddr, "validate-1", "ingress"))
	awaitAll(t, func(ctx context.Context) (string, error) {
		resp, err := client.UnaryCall(ctx, &testgrpc.SimpleRequest{})
		return resp.GetServerId(), err
	}, []string{"web-1"}, 30*time.Second)
	awaitMetric(t, srv, `xds_route_unknown_service{service="ghost"} 1`)
	awaitMetric(t, srv, `xds_route_unknown_service{service="web"} 0`)
	if !strings.Contains(srv.Logs(), "listener routes point at a service with no instances") {
		t.Error("the server did not warn about the route to ghost")
	}
}
