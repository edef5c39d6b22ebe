package envoye2e

import (
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xds-server/xds-server/certs/certstest"
	"github.com/xds-server/xds-server/e2e/harness"
)

// secServerConfig: Envoys of cluster edge named edge-* may connect with a
// certificate of spiffe://e2e/envoy/edge-*; the RLS takes calls from
// spiffe://e2e/envoy/* only; listener sec asks it about each user.
const secServerConfig = `
services:
  web: {}
xds:
  authorization:
    rules:
      - identities: ["spiffe://e2e/envoy/edge-*"]
        node_ids: ["edge-*"]
        clusters: [edge]
ratelimit:
  config: %s
  authorization:
    identities: ["spiffe://e2e/envoy/*"]
listeners:
  - name: sec
    address: 127.0.0.1:0
    routes: [ { prefix: /, service: web } ]
    ratelimit:
      domain: sec
      timeout: 5s                # generous: the machine is shared
      actions: [ [ { request_headers: { header_name: x-user-id, descriptor_key: user } } ] ]
`

// secDomain: user limited may make 2 requests a day.
const secDomain = `domain: sec
descriptors:
  - { key: user, value: limited, rate_limit: { unit: day, requests_per_unit: 2 } }
`

// secPKI is the test's certificates, made at test time (no private key is
// checked in): one CA for xds-server's listeners and the Envoys.
type secPKI struct {
	dir, ca         string // directory, CA file
	srvCert, srvKey string // xds-server's, for 127.0.0.1
	caObj           *certstest.CA
}

func secNewPKI(t *testing.T) *secPKI {
	t.Helper()
	p := &secPKI{dir: t.TempDir(), caObj: certstest.NewCA(t, "envoye2e-ca")}
	p.ca = p.caObj.WriteCA(t, p.dir, "ca.pem")
	p.srvCert, p.srvKey = p.caObj.Localhost(t).Write(t, p.dir, "server")
	return p
}

// envoyArgs are the bootstrap flags of an Envoy whose client certificate
// names uri.
func (p *secPKI) envoyArgs(t *testing.T, name, uri string) []string {
	t.Helper()
	crt, key := p.caObj.Issue(t, certstest.Leaf{URIs: []string{uri}, Client: true}).Write(t, p.dir, name)
	return []string{"--tls-ca", p.ca, "--tls-cert", crt, "--tls-key", key}
}

// secStart runs Consul, web (the example backend) and xds-server with
// mTLS on its xDS and rate-limit listeners.
func secStart(t *testing.T, p *secPKI) *harness.Server {
	t.Helper()
	consul := harness.Consul(t)
	harness.StartExampleBackend(t, "-consul", consul.Addr(), "-service", "web", "-id", "web-1", "-register-port", "http",
		"-grpc-addr", "127.0.0.1:0", "-http-addr", "127.0.0.1:0", "-check-interval", "1s", "-drain-delay", "0s")
	rlDir := filepath.Join(p.dir, "ratelimit")
	rlWrite(t, filepath.Join(rlDir, "sec.yaml"), secDomain)
	cfg := filepath.Join(p.dir, "xds-server.yaml")
	rlWrite(t, cfg, fmt.Sprintf(secServerConfig, rlDir))
	return startServerWith(t, consul, harness.ServerOptions{PortArgs: func(addr string) []string {
		return []string{"--ratelimit.address", addr, "--ratelimit.advertise_address", addr}
	}}, "--config", cfg,
		"--xds.tls.cert_file", p.srvCert, "--xds.tls.key_file", p.srvKey, "--xds.tls.client_ca_file", p.ca,
		"--ratelimit.tls.cert_file", p.srvCert, "--ratelimit.tls.key_file", p.srvKey, "--ratelimit.tls.client_ca_file", p.ca)
}

// secMetric is one series of xds-server's /metrics (0 when absent).
func secMetric(t *testing.T, srv *harness.Server, series string) float64 {
	t.Helper()
	resp, err := srv.Admin.Get(srv.AdminURL("/metrics"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), series+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}

// TestEnvoyMutualTLS: Envoys bootstrapped with --tls-ca, --tls-cert and
// --tls-key against xds-server's mTLS xDS listener with
// xds.authorization.rules: the Envoy a rule allows gets its clusters and
// listener; one whose certificate (of the same CA) matches no rule gets
// nothing, its (delta) stream refused with PermissionDenied; and the allowed Envoy
// asks the RLS over mTLS (the generated xds-server-ratelimit cluster
// presents its bootstrap's client certificate), getting 429s from it.
func TestEnvoyMutualTLS(t *testing.T) {
	skipShort(t)
	p := secNewPKI(t)
	srv := secStart(t, p)

	allowed := harness.StartEnvoy(t, harness.EnvoyOptions{NodeID: "edge-1", XDSAddr: srv.XDSAddr,
		BootstrapArgs: p.envoyArgs(t, "edge-1", "spiffe://e2e/envoy/edge-1")})
	url := "http://" + allowed.AwaitListener(t, "sec", 60*time.Second) + "/"
	allowed.AwaitHosts(t, "web", 60*time.Second, func(h []harness.EnvoyHost) bool { return len(h) == 1 })
	allowed.AssertAccepted(t)
	t.Logf("edge-1: connected_state %d, ssl handshakes to xds-server %d", allowed.Stat(t, "control_plane.connected_state"),
		allowed.Stat(t, "cluster.xds-server.ssl.handshake"))

	t.Run("certificate matching no rule", func(t *testing.T) {
		denied := secMetric(t, srv, "xds_authz_denied_total")
		e := harness.StartEnvoy(t, harness.EnvoyOptions{NodeID: "edge-2", XDSAddr: srv.XDSAddr, Delta: true,
			BootstrapArgs: p.envoyArgs(t, "intruder", "spiffe://e2e/intruder/edge-2")})
		// PermissionDenied is gRPC status 7: Envoy logs the closed stream.
		e.Await(t, "a refused ADS stream", 60*time.Second, func() (bool, string, error) {
			return strings.Contains(e.Logs(), "to xds-server closed: 7"), "no stream closed with status 7 in Envoy's log", nil
		})
		if n := secMetric(t, srv, "xds_authz_denied_total"); n <= denied {
			t.Errorf("xds_authz_denied_total %v -> %v, want more", denied, n)
		}
		st, err := e.Stats()
		if err != nil {
			t.Fatal(err)
		}
		c, err := e.Clusters()
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, cs := range c.GetClusterStatuses() {
			names = append(names, cs.GetName())
		}
		t.Logf("edge-2: clusters %v, connected_state %d, cds.update_success %d, lds.update_success %d, listeners %d",
			names, st["control_plane.connected_state"], st["cluster_manager.cds.update_success"],
			st["listener_manager.lds.update_success"], st["listener_manager.total_listeners_active"])
		// connected_state is not judged: it is 1 for the moment each retried
		// stream is open, before the server refuses it.
		if len(names) != 1 || names[0] != "xds-server" || st["cluster_manager.cds.update_success"] != 0 ||
			st["listener_manager.lds.update_success"] != 0 || st["listener_manager.total_listeners_active"] != 0 {
			t.Errorf("the Envoy no rule allows got something: clusters %v, stats above", names)
		}
	})

	t.Run("RLS over mTLS", func(t *testing.T) {
		rlAwaitStatus(t, url, http.StatusOK, 60*time.Second)
		calls := secMetric(t, srv, `ratelimit_requests_total{result="ok"}`)
		for i := range 2 {
			if a := rlDo(t, http.MethodGet, url, "x-user-id", "limited"); a.status != http.StatusOK {
				t.Fatalf("request %d of user limited: %v, want 200", i+1, a)
			}
		}
		a := rlDo(t, http.MethodGet, url, "x-user-id", "limited")
		st, _ := allowed.Stats()
		t.Logf("request 3: %v; RLS answered ok %v more; xds-server-ratelimit: ssl.handshake %d, upstream_cx_connect_fail %d; web ratelimit.error %d",
			a, secMetric(t, srv, `ratelimit_requests_total{result="ok"}`)-calls, st["cluster.xds-server-ratelimit.ssl.handshake"],
			st["cluster.xds-server-ratelimit.upstream_cx_connect_fail"], st["cluster.web.ratelimit.error"])
		if a.status != http.StatusTooManyRequests || a.header.Get("x-envoy-ratelimited") != "true" {
			t.Errorf("request 3 of user limited: %v, want 429 with x-envoy-ratelimited\nEnvoy said:\n%s", a,
				strings.Join(allowed.Complaints(), "\n"))
		}
		if st["cluster.xds-server-ratelimit.ssl.handshake"] == 0 {
			t.Errorf("Envoy made no TLS handshake with the RLS")
		}
	})
}

// TestEnvoyRLSClusterWithoutSecrets: with a TLS rate-limit listener but a
// plaintext xDS one, an Envoy bootstrapped without --tls-ca has none of
// the static secrets the generated xds-server-ratelimit cluster refers to:
// it rejects that cluster, saying which secret it lacks, and keeps the
// others. The server does not send the rejected clusters again until they
// change (SotW: Envoy 1.40 NACKed them 630 times a second while each NACK
// was answered with the same state), and then sends the change.
func TestEnvoyRLSClusterWithoutSecrets(t *testing.T) {
	skipShort(t)
	for _, delta := range []bool{false, true} {
		t.Run(map[bool]string{false: "sotw", true: "delta"}[delta], func(t *testing.T) { secRLSWithoutSecrets(t, delta) })
	}
}

func secRLSWithoutSecrets(t *testing.T, delta bool) {
	p := secNewPKI(t)
	consul := harness.Consul(t)
	cfg := filepath.Join(p.dir, "xds-server.yaml")
	rlWrite(t, cfg, `
services: { web: {} }
listeners:
  - name: sec
    address: 127.0.0.1:0
    routes: [ { prefix: /, service: web } ]
    ratelimit: { domain: sec, actions: [ [ { remote_address: {} } ] ] }
`)
	srv := startServerWith(t, consul, harness.ServerOptions{PortArgs: func(addr string) []string {
		return []string{"--ratelimit.address", addr, "--ratelimit.advertise_address", addr}
	}}, "--config", cfg, "--ratelimit.tls.cert_file", p.srvCert, "--ratelimit.tls.key_file", p.srvKey)
	e := harness.StartEnvoy(t, harness.EnvoyOptions{NodeID: "edge-9", XDSAddr: srv.XDSAddr, Delta: delta})
	const rejectedStat = "cluster_manager.cds.update_rejected"
	e.Await(t, "a rejected cluster", 60*time.Second, func() (bool, string, error) {
		n, err := e.Stats()
		return n[rejectedStat] > 0, "cds.update_rejected 0", err
	})
	said := strings.Join(e.Complaints(), "\n")
	if !strings.Contains(said, "cluster 'xds-server-ratelimit' config rejected: Unknown static certificate validation context: xds-server-ca") {
		t.Errorf("Envoy did not say that xds-server-ratelimit lacks the secret xds-server-ca; it said:\n%s", said)
	}
	e.AwaitHosts(t, "web", 30*time.Second, func([]harness.EnvoyHost) bool { return true }) // kept (warmed)
	// No NACK loop: over a quiet window (nothing changes; what is measured
	// is that nothing happens) Envoy rejects nothing more.
	before := e.Stat(t, rejectedStat)
	const window = 3 * time.Second
	time.Sleep(window)
	quiet := e.Stat(t, rejectedStat)
	if quiet-before > 1 {
		t.Errorf("%d more cds.update_rejected in %v with nothing changed: the rejected clusters were sent again and again", quiet-before, window)
	}
	// A change of the clusters is sent (and the rate-limit cluster, still
	// in it, rejected once more): a new service reaches Envoy.
	b := ordBackend(t, "api-1")
	ordRegister(t, consul.Client().Agent(), "api", "api-1", b)
	e.AwaitHosts(t, "api", 60*time.Second, func(h []harness.EnvoyHost) bool { return len(h) == 1 })
	after := e.Stat(t, rejectedStat)
	t.Logf("cds.update_rejected: %d at first, %d after a %v quiet window, %d after a new service", before, quiet, window, after)
}
