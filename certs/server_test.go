package certs_test

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/xds-server/xds-server/certs"
	"github.com/xds-server/xds-server/certs/certstest"
)

// clock is a manual clock for the file checks.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// handshake runs a TLS handshake between srv and a client with roots and
// (optionally) cert, and returns the server's certificate as the client saw
// it, the client certificate as the server saw it, and the error of either side.
func handshake(t *testing.T, srv *tls.Config, roots *x509.CertPool, cert *tls.Certificate) (server, client *x509.Certificate, err error) {
	t.Helper()
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	cc := &tls.Config{RootCAs: roots, ServerName: "localhost"}
	if cert != nil {
		cc.Certificates = []tls.Certificate{*cert}
	}
	sc := tls.Server(a, srv)
	errc := make(chan error, 1)
	go func() { errc <- sc.Handshake(); a.Close() }()
	cl := tls.Client(b, cc)
	cerr := cl.Handshake()
	if cerr == nil {
		// TLS 1.3: the server's verdict on the client certificate arrives after the client's handshake.
		_, cerr = cl.Read(make([]byte, 1))
		if cerr != nil && cerr.Error() == "EOF" || cerr != nil && cerr.Error() == "io: read/write on closed pipe" {
			cerr = nil
		}
	}
	serr := <-errc
	if serr != nil {
		return nil, nil, serr
	}
	if cerr != nil {
		return nil, nil, cerr
	}
	if p := sc.ConnectionState().PeerCertificates; len(p) > 0 {
		client = p[0]
	}
	return cl.ConnectionState().PeerCertificates[0], client, nil
}

func TestServerMTLS(t *testing.T) {
	dir := t.TempDir()
	ca, other := certstest.NewCA(t, "ca"), certstest.NewCA(t, "other")
	certFile, keyFile := ca.Localhost(t).Write(t, dir, "server")
	reg := prometheus.NewRegistry()
	m := certs.NewMetrics(reg)
	s, err := certs.NewServer(certs.Config{Name: "xds", CertFile: certFile, KeyFile: keyFile,
		ClientCAFile: ca.WriteCA(t, dir, "ca.pem"), Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	good := ca.Issue(t, certstest.Leaf{URIs: []string{"spiffe://example.org/envoy"}, DNS: []string{"envoy.example.org"}, Client: true}).TLS(t)
	stranger := other.Issue(t, certstest.Leaf{DNS: []string{"envoy.example.org"}, Client: true}).TLS(t)
	serverOnly := ca.Issue(t, certstest.Leaf{DNS: []string{"envoy.example.org"}, Server: true}).TLS(t)

	_, client, err := handshake(t, s.TLSConfig(), ca.Pool(), &good)
	if err != nil {
		t.Fatalf("good client certificate: %v", err)
	}
	if ids := certs.Identities(client); len(ids) != 2 || ids[0] != "spiffe://example.org/envoy" || ids[1] != "envoy.example.org" {
		t.Errorf("Identities = %v", ids)
	}
	for name, cert := range map[string]*tls.Certificate{"none": nil, "other CA": &stranger, "server usage only": &serverOnly} {
		if _, _, err := handshake(t, s.TLSConfig(), ca.Pool(), cert); err == nil {
			t.Errorf("client certificate %s: handshake succeeded", name)
		}
	}
	if got := testutil.ToFloat64(m.Rejected("xds")); got != 3 {
		t.Errorf("tls_client_cert_rejected_total = %v, want 3", got)
	}
}

func TestServerReloadsRotatedFiles(t *testing.T) {
	dir := t.TempDir()
	clk := &clock{t: time.Now()}
	ca := certstest.NewCA(t, "ca")
	first := ca.Localhost(t)
	certFile, keyFile := first.Write(t, dir, "server")
	m := certs.NewMetrics(nil)
	s, err := certs.NewServer(certs.Config{Name: "admin", CertFile: certFile, KeyFile: keyFile, Now: clk.now, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.TLSConfig()
	serialSeen := func() string {
		t.Helper()
		got, _, err := handshake(t, cfg, ca.Pool(), nil)
		if err != nil {
			t.Fatal(err)
		}
		return got.SerialNumber.String()
	}
	second := ca.Localhost(t)
	second.Write(t, dir, "server")
	if got := serialSeen(); got != first.Cert.SerialNumber.String() {
		t.Errorf("before the check interval: serial %s, want the first %s", got, first.Cert.SerialNumber)
	}
	clk.add(certs.DefaultCheckEvery)
	if got := serialSeen(); got != second.Cert.SerialNumber.String() {
		t.Errorf("after rotation: serial %s, want the second %s", got, second.Cert.SerialNumber)
	}

	// A half-done rotation (a key that does not match) keeps the last good pair.
	if err := os.WriteFile(keyFile, ca.Localhost(t).KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	clk.add(certs.DefaultCheckEvery)
	if got := serialSeen(); got != second.Cert.SerialNumber.String() {
		t.Errorf("after a bad key: serial %s, want the second %s still", got, second.Cert.SerialNumber)
	}
	if ok, bad := testutil.ToFloat64(m.Reloads("admin", "ok")), testutil.ToFloat64(m.Reloads("admin", "error")); ok != 1 || bad != 1 {
		t.Errorf("tls_reloads_total ok=%v error=%v, want 1 and 1", ok, bad)
	}
}

func TestServerReloadsClientCA(t *testing.T) {
	dir := t.TempDir()
	clk := &clock{t: time.Now()}
	oldCA, newCA := certstest.NewCA(t, "old"), certstest.NewCA(t, "new")
	certFile, keyFile := oldCA.Localhost(t).Write(t, dir, "server")
	caFile := oldCA.WriteCA(t, dir, "ca.pem")
	s, err := certs.NewServer(certs.Config{Name: "xds", CertFile: certFile, KeyFile: keyFile, ClientCAFile: caFile, Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.TLSConfig()
	client := newCA.Issue(t, certstest.Leaf{DNS: []string{"c"}, Client: true}).TLS(t)
	if _, _, err := handshake(t, cfg, oldCA.Pool(), &client); err == nil {
		t.Fatal("client of the new CA accepted before the CA file changed")
	}
	newCA.WriteCA(t, dir, "ca.pem")
	clk.add(2 * certs.DefaultCheckEvery)
	if _, _, err := handshake(t, cfg, oldCA.Pool(), &client); err != nil {
		t.Fatalf("client of the new CA after the CA file changed: %v", err)
	}
}

func TestNewServerErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := certs.NewServer(certs.Config{Name: "xds", CertFile: filepath.Join(dir, "missing.crt"), KeyFile: filepath.Join(dir, "missing.key")}); err == nil {
		t.Error("missing files: no error")
	}
	if _, err := certs.NewServer(certs.Config{Name: "xds", ClientCAFile: "x"}); err == nil {
		t.Error("no cert_file: no error")
	}
}
