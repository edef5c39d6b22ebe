package e2e

import (
	"context"
	"crypto/tls"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/hashicorp/consul/api"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/xds-server/xds-server/e2e/harness"
)

// writeSecret writes s to a new file and returns its path.
func writeSecret(t *testing.T, dir, name, s string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path+".tmp", []byte(s+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestAdminTokenOverTLS: with admin.tls and admin.token_file, /v1/* and
// /debug/* answer 401 without the bearer token and 200 with it, /healthz,
// /readyz and /metrics stay open, /debug/pprof/cmdline is not served, and
// a new token in the file replaces the old one without a restart.
func TestAdminTokenOverTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	p := newPKI(t)
	tokenFile := writeSecret(t, p.dir, "token", "first-admin-token")
	srv := harness.StartServerWith(t, harness.ServerOptions{AdminTLS: &tls.Config{RootCAs: p.ca.Pool()}},
		"--admin.tls.cert_file", p.serverCrt, "--admin.tls.key_file", p.serverK, "--admin.token_file", tokenFile)
	srv.WaitReady(t)
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		if code, _ := adminGet(t, srv, path, ""); code != http.StatusOK {
			t.Errorf("%s without a token: %d, want 200", path, code)
		}
	}
	for _, path := range []string{"/debug/nodes", "/debug/pprof/", "/v1/drain", "/debug/subsets?service=echo"} {
		if code, _ := adminGet(t, srv, path, ""); code != http.StatusUnauthorized {
			t.Errorf("%s without a token: %d, want 401", path, code)
		}
		if code, _ := adminGet(t, srv, path, "wrong-token"); code != http.StatusUnauthorized {
			t.Errorf("%s with a wrong token: %d, want 401", path, code)
		}
	}
	if code, body := adminGet(t, srv, "/debug/nodes", "first-admin-token"); code != http.StatusOK {
		t.Errorf("/debug/nodes with the token: %d %s", code, body)
	}
	if code, _ := adminGet(t, srv, "/debug/pprof/cmdline", "first-admin-token"); code != http.StatusNotFound {
		t.Errorf("/debug/pprof/cmdline: %d, want 404", code)
	}
	if got := metricValue(t, srv, "", "admin_unauthorized_total"); got < 8 {
		t.Errorf("admin_unauthorized_total = %v, want >= 8", got)
	}
	if resp, err := http.Get("http://" + srv.AdminAddr + "/healthz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("plain HTTP on the TLS admin listener: %s, want 400 (an HTTP request to an HTTPS server)", resp.Status)
		}
	}

	writeSecret(t, p.dir, "token", "second-admin-token")
	deadline := time.Now().Add(10 * time.Second)
	for code, _ := adminGet(t, srv, "/debug/nodes", "second-admin-token"); code != http.StatusOK; code, _ = adminGet(t, srv, "/debug/nodes", "second-admin-token") {
		if time.Now().After(deadline) {
			t.Fatalf("the rotated token is refused (%d) 10 s after the change", code)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if code, _ := adminGet(t, srv, "/debug/nodes", "first-admin-token"); code != http.StatusUnauthorized {
		t.Errorf("the old token after rotation: %d, want 401", code)
	}
}

// TestPublicAdminWithoutTokenRefusesToStart: a non-loopback admin address
// without TLS and token is a configuration error naming
// admin.allow_insecure; with it the server starts.
func TestPublicAdminWithoutTokenRefusesToStart(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	addr := "0.0.0.0:" + strconv.Itoa(harness.FreePort(t))
	cmd := exec.Command(harness.ServerBinary(t), "--admin.address", addr, "--xds.address", "127.0.0.1:0", "--ratelimit.address", "127.0.0.1:0")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() == 0 {
		t.Fatalf("started (or failed to run): %v\n%s", err, out)
	}
	for _, want := range []string{"admin.address: " + addr, "admin.allow_insecure: true"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestRateLimitMutualTLS: the RLS listener with a client CA and
// ratelimit.authorization.identities answers a client whose certificate
// matches, refuses one whose identity does not (PermissionDenied, counted)
// and one without a certificate (handshake).
func TestRateLimitMutualTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	p := newPKI(t)
	srv := harness.StartServer(t, "--ratelimit.tls.cert_file", p.serverCrt,
		"--ratelimit.tls.key_file", p.serverK, "--ratelimit.tls.client_ca_file", p.caFile,
		"--ratelimit.authorization.identities", "spiffe://e2e/envoy/*")
	srv.WaitReady(t)
	ask := func(certs ...tls.Certificate) error {
		t.Helper()
		conn, err := grpc.NewClient(srv.RateLimitAddr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: p.ca.Pool(), Certificates: certs})))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := rlsv3.NewRateLimitServiceClient(conn).ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "edge",
			Descriptors: []*rlcommon.RateLimitDescriptor{{Entries: []*rlcommon.RateLimitDescriptor_Entry{{Key: "k", Value: "v"}}}}})
		if err == nil && resp.GetOverallCode() != rlsv3.RateLimitResponse_OK {
			t.Errorf("overall code %v, want OK", resp.GetOverallCode())
		}
		return err
	}
	envoy := p.ca.Issue(t, certstestLeaf("spiffe://e2e/envoy/edge-1")).TLS(t)
	if err := ask(envoy); err != nil {
		t.Errorf("allowed identity: %v", err)
	}
	other := p.ca.Issue(t, certstestLeaf("spiffe://e2e/batch/job-1")).TLS(t)
	if err := ask(other); status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "spiffe://e2e/batch/job-1") {
		t.Errorf("identity not allowed: %v, want PermissionDenied naming it", err)
	}
	if got := metricValue(t, srv, "", "ratelimit_authz_denied_total"); got != 1 {
		t.Errorf("ratelimit_authz_denied_total = %v, want 1", got)
	}
	if err := ask(); status.Code(err) != codes.Unavailable {
		t.Errorf("no client certificate: %v, want Unavailable (handshake refused)", err)
	}
	awaitCounter(t, srv, `tls_client_cert_rejected_total{listener="ratelimit"}`, 1)
}

// TestConsulOverTLSAndSecrets: a real Consul agent serving HTTPS only, with
// its own CA and client certificates required, serves its catalog to
// xds-server, configured by keys and by Consul's own env vars; the Consul
// token, the Redis password and the admin token never appear in the logs,
// the debug pages or /metrics.
func TestConsulOverTLSAndSecrets(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	p := newPKI(t)
	ccrt, ckey := p.client(t, p.ca, "consul-client", "spiffe://e2e/xds-server")
	consul := harness.ConsulWith(t, harness.ConsulOptions{TLS: &harness.ConsulTLS{CAFile: p.caFile, CertFile: p.serverCrt,
		KeyFile: p.serverK, ClientCertFile: ccrt, ClientKeyFile: ckey}})
	backend := harness.StartBackend(t, "echo-1")
	if err := consul.Client().Agent().ServiceRegister(&api.AgentServiceRegistration{ID: backend.ID, Name: "echo",
		Address: backend.Host, Port: backend.Port}); err != nil {
		t.Fatal(err)
	}
	const consulToken, redisPassword, adminToken = "consul-secret-6b1f0e", "redis-secret-93ad27", "admin-secret-c4e8d1"
	redis := harness.Redis(t, harness.RedisOptions{Password: redisPassword})
	t.Setenv("XDS_SERVER_RATELIMIT_REDIS_PASSWORD", redisPassword)
	tokenFile := writeSecret(t, p.dir, "consul-token", consulToken)
	adminFile := writeSecret(t, p.dir, "admin-token", adminToken)
	common := []string{"--discovery.source", "consul", "--discovery.consul.address", consul.Addr(),
		"--discovery.consul.token_file", tokenFile, "--ratelimit.store", "redis", "--ratelimit.redis.address", redis.Addr(),
		"--admin.token_file", adminFile, "--log.level", "debug", "--xds.debounce", "10ms"}
	for name, extra := range map[string][]string{
		"keys": {"--discovery.consul.tls.ca_file", p.caFile, "--discovery.consul.tls.cert_file", ccrt,
			"--discovery.consul.tls.key_file", ckey, "--discovery.consul.tls.server_name", "localhost"},
		"consul env vars": nil,
	} {
		t.Run(name, func(t *testing.T) {
			if extra == nil {
				t.Setenv("CONSUL_CACERT", p.caFile)
				t.Setenv("CONSUL_CLIENT_CERT", ccrt)
				t.Setenv("CONSUL_CLIENT_KEY", ckey)
				t.Setenv("CONSUL_TLS_SERVER_NAME", "localhost")
			}
			srv := harness.StartServer(t, append(common, extra...)...)
			srv.WaitReady(t)
			awaitCounter(t, srv, `xds_service_endpoints{health="healthy",service="echo"}`, 1)
			call := dialGRPCXDSAs(t, srv.XDSAddr, "secrets-"+strings.ReplaceAll(name, " ", "-"))
			if id, err := call(ctxT(t, 20*time.Second)); err != nil || id != backend.ID {
				t.Fatalf("UnaryCall: %q, %v", id, err)
			}
			var seen strings.Builder
			for _, path := range []string{"/metrics", "/debug/nodes", "/debug/subsets?service=echo",
				"/debug/config?node=secrets-" + strings.ReplaceAll(name, " ", "-"), "/debug/pprof/cmdline", "/debug/pprof/goroutine?debug=2"} {
				code, body := adminGet(t, srv, path, adminToken)
				if code != http.StatusOK && path != "/debug/pprof/cmdline" {
					t.Errorf("%s: %d", path, code)
				}
				seen.WriteString(body)
			}
			seen.WriteString(srv.Logs())
			for secret, what := range map[string]string{consulToken: "Consul token", redisPassword: "Redis password", adminToken: "admin token"} {
				if strings.Contains(seen.String(), secret) {
					t.Errorf("the %s appears in the logs, debug pages or metrics", what)
				}
			}
		})
	}
}
