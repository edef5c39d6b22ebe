package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/xds-server/xds-server/e2e/harness"
)

// certexpSerial is the serial of the certificate the xDS listener of srv
// serves to a new handshake, as a client trusting p's CA sees it.
func certexpSerial(t *testing.T, srv *harness.Server, p *pki) string {
	t.Helper()
	conn, err := tls.Dial("tcp", srv.XDSAddr, &tls.Config{RootCAs: p.ca.Pool(), NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatalf("handshake with the xDS listener: %v", err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

// TestCertExpiredReloadRefused (issue 24, item 8): a certificate pair
// that had expired replaced a valid one on reload, and every client then
// failed the handshake. Against the real binary: an expired pair, then one
// not valid yet, written over the files are failed reloads (new
// handshakes still get the previous certificate; tls_reloads_total counts
// them; the log says why); a pair that expires in two days loads, with a
// warning, and tls_certificate_expiry_seconds shows the time left.
func TestCertExpiredReloadRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	p := newPKI(t)
	srv := harness.StartServer(t, "--xds.tls.cert_file", p.serverCrt, "--xds.tls.key_file", p.serverK)
	first := certexpSerial(t, srv, p)
	now := time.Now()
	for i, tc := range []struct {
		name     string
		from, to time.Time
		log      string
	}{
		{"expired", now.Add(-48 * time.Hour), now.Add(-time.Hour), "certificate has expired: not after"},
		{"not yet valid", now.Add(time.Hour), now.Add(48 * time.Hour), "certificate is not valid yet: not before"},
	} {
		p.ca.LocalhostValid(t, tc.from, tc.to).Write(t, p.dir, "server")
		series := `tls_reloads_total{listener="xds",result="error"}`
		deadline := time.Now().Add(20 * time.Second)
		for metricValue(t, srv, "", series) < float64(i+1) {
			if got := certexpSerial(t, srv, p); got != first {
				t.Fatalf("%s pair: a new handshake got serial %s, want the previous %s", tc.name, got, first)
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s pair: %s stayed below %d", tc.name, series, i+1)
			}
			time.Sleep(100 * time.Millisecond)
		}
		if got := certexpSerial(t, srv, p); got != first {
			t.Errorf("%s pair: serial %s after the failed reload, want the previous %s", tc.name, got, first)
		}
		if !strings.Contains(srv.Logs(), tc.log) {
			t.Errorf("%s pair: the log does not say why (%q)", tc.name, tc.log)
		}
	}
	if n := metricValue(t, srv, "", `tls_reloads_total{listener="xds",result="ok"}`); n != 0 {
		t.Errorf("tls_reloads_total{result=ok} = %v after two refused pairs, want 0", n)
	}

	soon := p.ca.LocalhostValid(t, now.Add(-30*24*time.Hour), now.Add(2*24*time.Hour))
	soon.Write(t, p.dir, "server")
	want := soon.Cert.SerialNumber.String()
	deadline := time.Now().Add(20 * time.Second)
	for certexpSerial(t, srv, p) != want {
		if time.Now().After(deadline) {
			t.Fatalf("the pair expiring in 2 days was not loaded within 20 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	left := metricValue(t, srv, "", `tls_certificate_expiry_seconds{listener="xds"}`)
	if left > 2*86400 || left < 2*86400-600 {
		t.Errorf("tls_certificate_expiry_seconds{listener=xds} = %v, want about 2 days (172800)", left)
	}
	if !strings.Contains(srv.Logs(), "TLS certificate expires soon") {
		t.Error("no warning for a certificate expiring in 2 days (xds.tls.expiry_warning 336h)")
	}
	t.Logf("2 refused reloads, then a pair expiring in %.0f s loaded with a warning", left)
}

// TestCertExpiredRefusedAtStartAndByValidate: with an expired pair the
// binary does not start (exit non-zero, saying why), and validate says
// the pair is expired (exit 1).
func TestCertExpiredRefusedAtStartAndByValidate(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	p := newPKI(t)
	crt, key := p.ca.LocalhostValid(t, time.Now().Add(-48*time.Hour), time.Now().Add(-time.Hour)).Write(t, p.dir, "old")
	args := []string{"--ratelimit.tls.cert_file", crt, "--ratelimit.tls.key_file", key}
	code, _, stderr := runBinary(t, append([]string{"validate"}, args...)...)
	if code != 1 || !strings.Contains(stderr, "ratelimit.tls.cert_file: "+crt+": ") || !strings.Contains(stderr, "certificate has expired") {
		t.Errorf("validate: exit %d, stderr %q; want exit 1 naming the expired certificate", code, stderr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, harness.ServerBinary(t), append([]string{"--xds.address", "127.0.0.1:0",
		"--admin.address", "127.0.0.1:0", "--ratelimit.address", "127.0.0.1:0"}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("the server with an expired pair was still running after 60 s:\n%s", out.String())
	}
	if err == nil || !strings.Contains(out.String(), "certificate has expired") {
		t.Errorf("the server with an expired pair: %v; want a non-zero exit saying the certificate expired:\n%s", err, out.String())
	}
}
