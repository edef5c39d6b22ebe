package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/xds"

	"github.com/xds-server/xds-server/certs/certstest"
	"github.com/xds-server/xds-server/e2e/harness"
	"github.com/xds-server/xds-server/envoy"
)

// pki is the test's certificate material, written to dir.
type pki struct {
	dir                string
	ca, other          *certstest.CA
	caFile             string
	serverCrt, serverK string
}

func newPKI(t *testing.T) *pki {
	p := &pki{dir: t.TempDir(), ca: certstest.NewCA(t, "e2e-ca"), other: certstest.NewCA(t, "other-ca")}
	p.caFile = p.ca.WriteCA(t, p.dir, "ca.pem")
	p.serverCrt, p.serverK = p.ca.Localhost(t).Write(t, p.dir, "server")
	return p
}

// client writes a client certificate of ca with URI SAN uri; it returns
// the certificate and key files.
func (p *pki) client(t *testing.T, ca *certstest.CA, name, uri string) (string, string) {
	return ca.Issue(t, certstest.Leaf{URIs: []string{uri}, Client: true}).Write(t, p.dir, name)
}

// staticEndpoints writes an endpoints file with service echo on the backends.
func staticEndpoints(t *testing.T, backends ...*harness.Backend) string {
	var b strings.Builder
	b.WriteString("services:\n  - name: echo\n    endpoints:\n")
	for _, be := range backends {
		fmt.Fprintf(&b, "      - { id: %s, address: %s, port: %d, zone: zone-0 }\n", be.ID, be.Host, be.Port)
	}
	path := filepath.Join(t.TempDir(), "endpoints.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// dialTLSXDS dials xds:///echo with grpc-go's xDS resolver, as node nodeID,
// with the bootstrap "xds-server grpc bootstrap --tls-ca --tls-cert
// --tls-key" writes: grpc-go's "tls" channel credentials (certFile ""
// leaves the client certificate out).
func dialTLSXDS(t *testing.T, xdsAddr, nodeID, caFile, certFile, keyFile string) callFunc {
	bootstrap, err := envoy.GRPCBootstrap(envoy.BootstrapConfig{NodeID: nodeID, Cluster: "e2e", XDSAddress: xdsAddr,
		Locality: envoy.Locality{Zone: "zone-0"}, TLS: &envoy.BootstrapTLS{CAFile: caFile, CertFile: certFile, KeyFile: keyFile}})
	if err != nil {
		t.Fatal(err)
	}
	rb, err := xds.NewXDSResolverWithConfigForTesting(bootstrap)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient("xds:///echo", grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithResolvers(rb))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	c := testgrpc.NewTestServiceClient(conn)
	return func(ctx context.Context) (string, error) {
		resp, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{})
		return resp.GetServerId(), err
	}
}

// adminGet GETs path from the admin listener with an optional bearer token.
func adminGet(t *testing.T, srv *harness.Server, path, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, srv.AdminURL(path), nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := srv.Admin.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// metricValue is the value of series (name{labels} as /metrics writes it); 0 if absent.
func metricValue(t *testing.T, srv *harness.Server, token, series string) float64 {
	t.Helper()
	_, body := adminGet(t, srv, "/metrics", token)
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}

// awaitCounter polls /metrics until series reaches at least want.
func awaitCounter(t *testing.T, srv *harness.Server, series string, want float64) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for metricValue(t, srv, "", series) < want {
		if time.Now().After(deadline) {
			t.Fatalf("%s stayed below %v", series, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestXDSMutualTLS: grpc-go's xDS client with a "tls" bootstrap and a
// client certificate that a rule allows for its node id gets its config
// (RPCs reach the backend); without a certificate, with one of another CA,
// or with an identity no rule allows for its node id it gets nothing, and
// the server counts each refusal.
func TestXDSMutualTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	p := newPKI(t)
	backend := harness.StartBackend(t, "echo-1")
	cfg := filepath.Join(p.dir, "xds-server.yaml")
	if err := os.WriteFile(cfg, []byte(`xds:
  authorization:
    rules:
      - identities: ["spiffe://e2e/grpc/*"]
        node_ids: ["client-*"]
        clusters: [e2e]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := harness.StartServer(t, "--config", cfg, "--discovery.static.file", staticEndpoints(t, backend),
		"--xds.debounce", "10ms", "--xds.tls.cert_file", p.serverCrt, "--xds.tls.key_file", p.serverK,
		"--xds.tls.client_ca_file", p.caFile)
	srv.WaitReady(t)

	goodCrt, goodKey := p.client(t, p.ca, "good", "spiffe://e2e/grpc/client-1")
	t.Run("allowed", func(t *testing.T) {
		call := dialTLSXDS(t, srv.XDSAddr, "client-1", p.caFile, goodCrt, goodKey)
		if id, err := call(ctxT(t, 20*time.Second)); err != nil || id != backend.ID {
			t.Fatalf("UnaryCall: %q, %v; want %s", id, err, backend.ID)
		}
	})
	refused := func(t *testing.T, call callFunc) {
		t.Helper()
		if id, err := call(ctxT(t, 3*time.Second)); err == nil {
			t.Fatalf("UnaryCall reached %s; want no config", id)
		}
	}
	t.Run("no certificate", func(t *testing.T) {
		before := metricValue(t, srv, "", `tls_client_cert_rejected_total{listener="xds"}`)
		refused(t, dialTLSXDS(t, srv.XDSAddr, "client-2", p.caFile, "", ""))
		awaitCounter(t, srv, `tls_client_cert_rejected_total{listener="xds"}`, before+1)
	})
	t.Run("certificate of another CA", func(t *testing.T) {
		crt, key := p.client(t, p.other, "stranger", "spiffe://e2e/grpc/client-3")
		before := metricValue(t, srv, "", `tls_client_cert_rejected_total{listener="xds"}`)
		refused(t, dialTLSXDS(t, srv.XDSAddr, "client-3", p.caFile, crt, key))
		awaitCounter(t, srv, `tls_client_cert_rejected_total{listener="xds"}`, before+1)
	})
	t.Run("identity not allowed for the node", func(t *testing.T) {
		refused(t, dialTLSXDS(t, srv.XDSAddr, "admin-node", p.caFile, goodCrt, goodKey))
		awaitCounter(t, srv, "xds_authz_denied_total", 1)
		_, nodes := adminGet(t, srv, "/debug/nodes", "")
		if strings.Contains(nodes, "admin-node") {
			t.Errorf("/debug/nodes lists the refused node: %s", nodes)
		}
		if logs := srv.Logs(); !strings.Contains(logs, "spiffe://e2e/grpc/client-1") || !strings.Contains(logs, "admin-node") {
			t.Errorf("the refusal is not logged with identity and node:\n%s", logs)
		}
	})
}

// TestXDSCertificateRotation: replacing the certificate files on disk is
// picked up without a restart: a new handshake sees the new serial.
func TestXDSCertificateRotation(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	p := newPKI(t)
	srv := harness.StartServer(t, "--xds.tls.cert_file", p.serverCrt, "--xds.tls.key_file", p.serverK)
	serial := func() string {
		conn, err := tls.Dial("tcp", srv.XDSAddr, &tls.Config{RootCAs: p.ca.Pool(), NextProtos: []string{"h2"}})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	first := serial()
	next := p.ca.Localhost(t)
	next.Write(t, p.dir, "server")
	want := next.Cert.SerialNumber.String()
	deadline := time.Now().Add(10 * time.Second)
	for got := serial(); got != want; got = serial() {
		if got != first {
			t.Fatalf("serial %s is neither the first %s nor the new %s", got, first, want)
		}
		if time.Now().After(deadline) {
			t.Fatalf("new handshakes still see serial %s 10 s after the rotation; want %s", got, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
	awaitCounter(t, srv, `tls_reloads_total{listener="xds",result="ok"}`, 1)
}

// certstestLeaf is a client certificate's request with URI SAN uri.
func certstestLeaf(uri string) certstest.Leaf {
	return certstest.Leaf{URIs: []string{uri}, Client: true}
}
