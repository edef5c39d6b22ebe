package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/xds"

	"github.com/xds-server/xds-server/e2e/harness"
)

// routesConfig is the xds-server config of TestRoutes: three Consul
// services and one listener whose routes pick among them by path and
// header, with a per-route timeout on the web route only.
const routesConfig = `
discovery:
  source: consul
  consul: { services: [web, api, canary] }
listeners:
  - name: ingress
    address: 127.0.0.1:10000
    nodes: ["routes-*"]
    routes:
      - { path: /grpc.testing.TestService/EmptyCall, service: api }
      - prefix: /grpc.testing.TestService/
        headers: [{ name: x-route, exact: canary }]
        service: canary
      - { prefix: /grpc.testing.TestService/UnaryCall, service: web, timeout: 500ms }
`

// routeTimeout is the web route's timeout in routesConfig.
const routeTimeout = 500 * time.Millisecond

// TestRoutes runs the real binary with a listeners: section against a
// real Consul and three example backends (web, api, canary), and checks
// with grpc-go's xDS resolver dialing xds:///ingress that the generated
// routes are followed: a path route and a header match pick other
// services than the default route, and the web route's timeout fails a
// slow RPC with DeadlineExceeded (a fast one passes, and a slow one on the
// canary route, without timeout, passes too).
func TestRoutes(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	consul := harness.Consul(t)
	backends := map[string]*harness.ExBackend{}
	for _, svc := range []string{"web", "api", "canary"} {
		backends[svc] = harness.StartExampleBackend(t, "-consul", consul.Addr(), "-service", svc, "-id", svc+"-1",
			"-grpc-addr", "127.0.0.1:0", "-http-addr", "127.0.0.1:0", "-check-interval", "1s", "-drain-delay", "0s")
	}
	cfg := t.TempDir() + "/xds-server.yaml"
	write(t, cfg, routesConfig)
	srv := startServer(t, consul, "--config", cfg)
	client := testgrpc.NewTestServiceClient(dialListener(t, srv.XDSAddr, "routes-1", "ingress"))

	unary := func(ctx context.Context, md ...string) (string, error) {
		ctx = metadata.AppendToOutgoingContext(ctx, md...)
		resp, err := client.UnaryCall(ctx, &testgrpc.SimpleRequest{})
		return resp.GetServerId(), err
	}
	// The backends' Consul checks pass within a second or two: until then
	// RPCs fail, so wait for the default route to answer.
	awaitAll(t, func(ctx context.Context) (string, error) { return unary(ctx) }, []string{"web-1"}, 30*time.Second)

	t.Run("default route", func(t *testing.T) {
		if id, err := unary(ctxT(t, 5*time.Second)); err != nil || id != "web-1" {
			t.Errorf("UnaryCall: %q, %v; want web-1", id, err)
		}
	})
	t.Run("header match", func(t *testing.T) {
		awaitAll(t, func(ctx context.Context) (string, error) { return unary(ctx, "x-route", "canary") }, []string{"canary-1"}, 10*time.Second)
		for range 5 {
			if id, err := unary(ctxT(t, 5*time.Second), "x-route", "canary"); err != nil || id != "canary-1" {
				t.Errorf("UnaryCall with x-route: canary: %q, %v; want canary-1", id, err)
			}
		}
		if id, err := unary(ctxT(t, 5*time.Second), "x-route", "other"); err != nil || id != "web-1" {
			t.Errorf("UnaryCall with x-route: other: %q, %v; want web-1", id, err)
		}
	})
	t.Run("path route", func(t *testing.T) {
		emptyCall := func(ctx context.Context) (string, error) {
			var p peer.Peer
			_, err := client.EmptyCall(ctx, &testgrpc.Empty{}, grpc.Peer(&p))
			if err != nil {
				return "", err
			}
			return p.Addr.String(), nil
		}
		awaitAll(t, emptyCall, []string{backends["api"].GRPCAddr}, 10*time.Second)
		for range 5 {
			if addr, err := emptyCall(ctxT(t, 5*time.Second)); err != nil || addr != backends["api"].GRPCAddr {
				t.Errorf("EmptyCall went to %q (%v); want api at %s", addr, err, backends["api"].GRPCAddr)
			}
		}
	})
	t.Run("route timeout", func(t *testing.T) {
		if id, err := unary(ctxT(t, 10*time.Second), "x-delay-ms", "50"); err != nil || id != "web-1" {
			t.Errorf("fast UnaryCall (50 ms): %q, %v; want web-1", id, err)
		}
		start := time.Now()
		_, err := unary(ctxT(t, 10*time.Second), "x-delay-ms", "3000")
		took := time.Since(start)
		if status.Code(err) != codes.DeadlineExceeded {
			t.Errorf("slow UnaryCall (3 s) on a route with timeout %v: %v; want DeadlineExceeded", routeTimeout, err)
		}
		if took < routeTimeout || took > 2*time.Second {
			t.Errorf("slow UnaryCall failed after %v; want about the route timeout %v (the client's deadline is 10s)", took, routeTimeout)
		}
		if id, err := unary(ctxT(t, 10*time.Second), "x-route", "canary", "x-delay-ms", "1000"); err != nil || id != "canary-1" {
			t.Errorf("slow UnaryCall (1 s) on the canary route (no timeout): %q, %v; want canary-1", id, err)
		}
	})
}

// ctxT is a context bounded by d and the test.
func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// dialListener returns a channel to xds:///<listener> through grpc-go's
// xDS resolver, as node nodeID, with a bootstrap of its own.
func dialListener(t *testing.T, xdsAddr, nodeID, listener string) *grpc.ClientConn {
	bootstrap := fmt.Sprintf(`{
		"xds_servers": [{"server_uri": %q, "channel_creds": [{"type": "insecure"}], "server_features": ["xds_v3"]}],
		"node": {"id": %q, "cluster": "e2e"}
	}`, xdsAddr, nodeID)
	rb, err := xds.NewXDSResolverWithConfigForTesting([]byte(bootstrap))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient("xds:///"+listener, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithResolvers(rb))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}
