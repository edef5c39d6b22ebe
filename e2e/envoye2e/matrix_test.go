package envoye2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"

	"github.com/xds-server/xds-server/e2e/harness"
)

// matrixConfig is an xds-server config that uses every services.<name>
// option and every listener option: each service is a cluster with one
// feature, each route a way to match. The route of each request below is
// proven by the cluster whose upstream_rq_total it moves.
const matrixConfig = `
services:
  "*":
    connect_timeout: 1s
  m-rr:
    lb_policy: round_robin
    health_check: { path: /healthz, interval: 1s, timeout: 500ms, unhealthy_threshold: 2, healthy_threshold: 1 }
  m-lr:
    lb_policy: least_request
    locality_weighted_lb: true
    outlier_detection: { consecutive_5xx: 3, interval: 1s, base_ejection_time: 5s, max_ejection_percent: 50 }
    circuit_breakers: { max_connections: 100, max_pending_requests: 50, max_requests: 200, max_retries: 5 }
  m-rh:
    lb_policy: ring_hash
    ring_hash: { minimum_ring_size: 64, maximum_ring_size: 4096 }
  m-rnd:
    lb_policy: random
    locality_weighted_lb: true
  m-mg:
    lb_policy: maglev
    locality_weighted_lb: true
    connect_timeout: 250ms
    drain_window: 5s
  m-sub:
    subset_size: 2
    subsetting: classic
  m-sub2:
    subset_size: 2
  m-wt:
    weights: { enabled: true, sources: [http] }
  m-h2:
    protocol: http2
    health_check: { grpc: true, interval: 1s }
    outlier_detection: { enabled: false }
  m-grpc:
    protocol: grpc
    lb_policy: ring_hash
    health_check: { grpc: true, interval: 1s, timeout: 1s }
    weights: { enabled: true, mode: per_node, sources: [lrs, http] }
listeners:
  - name: matrix
    address: 127.0.0.1:0
    nodes: ["matrix-*"]
    routes:
      - { path: /exact, service: m-rr }
      - { prefix: /lr, service: m-lr, timeout: 5s, retries: 2, retry_on: "5xx,connect-failure", per_try_timeout: 1s }
      - { safe_regex: "/rh/[0-9]+", service: m-rh, retries: 1 }
      - { prefix: /, headers: [{ name: x-e, exact: rnd }], service: m-rnd }
      - { prefix: /, headers: [{ name: x-p, prefix: mag }], service: m-mg }
      - { prefix: /, headers: [{ name: x-r, regex: "s[0-9]+" }], service: m-sub }
      - { prefix: /, headers: [{ name: x-s2, present: true }], service: m-sub2 }
      - { prefix: /, headers: [{ name: x-inv, exact: "no", invert: true }, { name: x-w, present: true }], service: m-wt }
      - { prefix: /grpc.testing.TestService/, headers: [{ name: x-svc, exact: h2 }], service: m-h2, timeout: 3s }
      - { prefix: /grpc.testing.TestService/, service: m-grpc, retries: 1, retry_on: "unavailable,resource-exhausted" }
      - { prefix: /, headers: [{ name: x-absent, present: false }], service: m-rr, timeout: 10s }
    ratelimit:
      domain: matrix
      timeout: 200ms
      failure_mode_deny: false
      actions:
        - [ { remote_address: {} } ]
        - [ { generic_key: { value: matrix } }, { request_headers: { header_name: x-user, descriptor_key: user } } ]
        - [ { generic_key: { value: opt, descriptor_key: kind } }, { request_headers: { header_name: x-opt, descriptor_key: opt, skip_if_absent: true } } ]
        - [ { header_value_match: { descriptor_key: path, descriptor_value: lr, headers: [{ name: ":path", prefix: /lr }] } } ]
        - [ { header_value_match: { descriptor_value: not-get, expect_match: false, headers: [{ name: ":method", exact: GET }] } } ]
    admission_control: { k: 2, aggression: 1.5, sampling_window: 10s, rps_threshold: 5, max_rejection_probability: 0.5 }
`

// matrixLimits is the rate-limit domain of the listener: generous limits,
// so no request of this test is refused.
const matrixLimits = `domain: matrix
descriptors:
  - key: remote_address
    rate_limit: { unit: second, requests_per_unit: 10000 }
  - key: generic_key
    value: matrix
    descriptors:
      - key: user
        rate_limit: { unit: minute, requests_per_unit: 10000, algorithm: token_bucket }
`

// TestEnvoyFeatureMatrix: Envoy accepts everything xds-server sends for
// every service and listener option (no update_rejected, nothing left
// warming, connected), over state of the world and delta; its
// /config_dump holds what /debug/config says was sent, versions included;
// and a request of each route reaches its service's cluster.
func TestEnvoyFeatureMatrix(t *testing.T) {
	skipShort(t)
	consul := harness.Consul(t)
	m := startMatrixFleet(t, consul)
	for _, delta := range []bool{false, true} {
		name := map[bool]string{false: "sotw", true: "delta"}[delta]
		t.Run(name, func(t *testing.T) {
			e := harness.StartEnvoy(t, harness.EnvoyOptions{NodeID: "matrix-" + name, Cluster: "matrix",
				XDSAddr: m.srv.XDSAddr, Delta: delta, BootstrapArgs: []string{"--locality", "r1/z1"}})
			listener := e.AwaitListener(t, "matrix", 30*time.Second)
			for _, svc := range matrixServices {
				e.AwaitHosts(t, svc.name, 30*time.Second, func(h []harness.EnvoyHost) bool { return len(h) >= svc.hosts })
			}
			e.AssertAccepted(t)
			matrixTraffic(t, e, listener)
			if hosts, _ := e.Hosts("m-sub"); len(hosts) != 2 {
				t.Errorf("m-sub (subset_size 2 of 3): Envoy has %s", harness.DescribeHosts(hosts))
			}
			compareConfigDump(t, e, m.srv, delta)
			e.AssertAccepted(t)
			if c := e.Complaints(); len(c) > 0 {
				t.Errorf("Envoy complained:\n%v", c)
			}
		})
	}
}

// matrixServices are the services of matrixConfig and how many hosts
// each Envoy gets.
var matrixServices = []struct {
	name  string
	grpc  bool // registered on the backends' gRPC port
	hosts int
}{
	{"m-rr", false, 2}, {"m-lr", false, 2}, {"m-rh", false, 2}, {"m-rnd", false, 2}, {"m-mg", false, 2},
	{"m-sub", false, 2}, {"m-sub2", false, 2}, {"m-wt", false, 2}, {"m-h2", true, 2}, {"m-grpc", true, 2},
}

// matrixFleet is the server and the backends of the matrix.
type matrixFleet struct {
	srv      *harness.Server
	backends []*harness.ExBackend
}

// startMatrixFleet starts three example backends and registers every
// matrix service on them (HTTP or gRPC port), with zones, then the
// server with matrixConfig.
func startMatrixFleet(t *testing.T, consul *harness.ConsulAgent) *matrixFleet {
	t.Helper()
	m := &matrixFleet{}
	for i := range 3 {
		m.backends = append(m.backends, harness.StartExampleBackend(t, "-consul", consul.Addr(), "-service", "m-pool",
			"-id", fmt.Sprintf("m-pool-%d", i+1), "-http-addr", "127.0.0.1:0", "-grpc-addr", "127.0.0.1:0"))
	}
	for _, svc := range matrixServices {
		for i, b := range m.backends {
			addr := b.HTTPAddr
			if svc.grpc {
				addr = b.GRPCAddr
			}
			host, p, _ := net.SplitHostPort(addr)
			port, _ := strconv.Atoi(p)
			reg := &api.AgentServiceRegistration{ID: fmt.Sprintf("%s-%d", svc.name, i+1), Name: svc.name,
				Address: host, Port: port, Meta: map[string]string{"zone": fmt.Sprintf("z%d", i%2+1), "region": "r1"}}
			if err := consul.Client().Agent().ServiceRegister(reg); err != nil {
				t.Fatal(err)
			}
		}
	}
	dir := t.TempDir()
	rl := filepath.Join(dir, "rl")
	if err := os.Mkdir(rl, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(rl, "matrix.yaml"), []byte(matrixLimits), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "xds-server.yaml")
	if err := os.WriteFile(cfg, []byte(matrixConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	m.srv = startServerWith(t, consul, harness.ServerOptions{PortArgs: func(addr string) []string {
		return []string{"--ratelimit.address", addr, "--ratelimit.advertise_address", addr}
	}}, "--config", cfg, "--ratelimit.config", rl, "--weights.update_period", "200ms")
	return m
}

// matrixTraffic sends a request of each route through Envoy's listener
// and checks that it moved the upstream_rq_total of the right cluster.
func matrixTraffic(t *testing.T, e *harness.Envoy, listener string) {
	t.Helper()
	for _, r := range []struct {
		path    string
		headers map[string]string
		cluster string
	}{
		{"/exact", nil, "m-rr"},
		{"/lr/x", map[string]string{"x-user": "u1", "x-opt": "o"}, "m-lr"},
		{"/rh/42", nil, "m-rh"},
		{"/other", map[string]string{"x-e": "rnd"}, "m-rnd"},
		{"/other", map[string]string{"x-p": "maglev"}, "m-mg"},
		{"/other", map[string]string{"x-r": "s7"}, "m-sub"},
		{"/other", map[string]string{"x-s2": ""}, "m-sub2"},
		{"/other", map[string]string{"x-w": "1", "x-inv": "yes"}, "m-wt"},
		{"/other", map[string]string{"x-w": "1", "x-inv": "no"}, "m-rr"}, // invert: x-inv: no does not match
		{"/other", nil, "m-rr"},
	} {
		before := e.Stat(t, "cluster."+r.cluster+".upstream_rq_total")
		req, _ := http.NewRequest(http.MethodGet, "http://"+listener+r.path, nil)
		for k, v := range r.headers {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("GET %s %v: %v", r.path, r.headers, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s %v through Envoy: %s, want 200", r.path, r.headers, resp.Status)
		}
		if after := e.Stat(t, "cluster."+r.cluster+".upstream_rq_total"); after != before+1 {
			t.Errorf("GET %s %v: cluster %s upstream_rq_total %d -> %d, want one more", r.path, r.headers, r.cluster, before, after)
		}
	}
	conn, err := grpc.NewClient(listener, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, c := range []struct{ svc, header string }{{"m-h2", "h2"}, {"m-grpc", ""}} {
		before := e.Stat(t, "cluster."+c.svc+".upstream_rq_total")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if c.header != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, "x-svc", c.header)
		}
		_, err := testgrpc.NewTestServiceClient(conn).UnaryCall(ctx, &testgrpc.SimpleRequest{})
		cancel()
		if err != nil {
			t.Errorf("gRPC UnaryCall through Envoy to %s: %v", c.svc, err)
		}
		if after := e.Stat(t, "cluster."+c.svc+".upstream_rq_total"); after != before+1 {
			t.Errorf("gRPC call: cluster %s upstream_rq_total %d -> %d, want one more", c.svc, before, after)
		}
	}
}
