package certs_test

import (
	"bytes"
	"crypto/x509"
	"errors"
	"log/slog"
	"math/big"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/xds-server/xds-server/certs"
	"github.com/xds-server/xds-server/certs/certstest"
)

func TestCheckValidity(t *testing.T) {
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	leaf := func(from, to time.Duration) *x509.Certificate {
		return &x509.Certificate{SerialNumber: big.NewInt(7), NotBefore: now.Add(from), NotAfter: now.Add(to)}
	}
	for name, tc := range map[string]struct {
		leaf *x509.Certificate
		want error
		text string
	}{
		"valid":               {leaf(-time.Hour, time.Hour), nil, ""},
		"expired":             {leaf(-48*time.Hour, -90*time.Minute), certs.ErrExpired, "not after 2026-06-01T10:30:00Z (1h30m0s ago); serial 7"},
		"not yet valid":       {leaf(3*time.Hour, 48*time.Hour), certs.ErrNotYetValid, "not before 2026-06-01T15:00:00Z (in 3h0m0s)"},
		"expires this second": {leaf(-time.Hour, 0), nil, ""},
	} {
		t.Run(name, func(t *testing.T) {
			err := certs.CheckValidity(tc.leaf, now)
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("CheckValidity = %v, want %v", err, tc.want)
			}
			if err != nil && !strings.Contains(err.Error(), tc.text) {
				t.Errorf("CheckValidity = %q, want it to contain %q", err, tc.text)
			}
		})
	}
}

func TestWarnWithin(t *testing.T) {
	now := time.Now()
	year := &x509.Certificate{NotBefore: now, NotAfter: now.Add(365 * 24 * time.Hour)}
	hour := &x509.Certificate{NotBefore: now, NotAfter: now.Add(time.Hour)}
	if got := certs.WarnWithin(year, certs.DefaultExpiryWarning); got != certs.DefaultExpiryWarning {
		t.Errorf("a year's certificate: warn within %v, want %v", got, certs.DefaultExpiryWarning)
	}
	if got := certs.WarnWithin(hour, certs.DefaultExpiryWarning); got != 20*time.Minute {
		t.Errorf("an hour's certificate: warn within %v, want a third of its life, 20m", got)
	}
}

// syncBuffer is a log sink safe for the handshakes' goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// Regression (issue 24, item 8): an expired certificate replaced a valid
// pair on reload, and every client then failed the handshake. Now a pair
// expired or not valid yet is a failed reload: the previous pair stays in
// use, the failure is counted and logged with the reason; a pair close to
// expiry loads with a warning (once a day), and the seconds to expiry are
// a metric.
func TestServerRefusesExpiredReload(t *testing.T) {
	dir := t.TempDir()
	clk := &clock{t: time.Now()}
	ca := certstest.NewCA(t, "ca")
	first := ca.Localhost(t)
	certFile, keyFile := first.Write(t, dir, "server")
	m := certs.NewMetrics(nil)
	var logs syncBuffer
	s, err := certs.NewServer(certs.Config{Name: "ratelimit", CertFile: certFile, KeyFile: keyFile, Now: clk.now, Metrics: m,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.TLSConfig()
	served := func() string {
		t.Helper()
		clk.add(certs.DefaultCheckEvery)
		got, _, err := handshake(t, cfg, ca.Pool(), nil)
		if err != nil {
			t.Fatalf("handshake: %v", err)
		}
		return got.SerialNumber.String()
	}
	now := clk.now()
	for i, tc := range []struct {
		name     string
		from, to time.Time
		log      string
	}{
		{"expired", now.Add(-48 * time.Hour), now.Add(-time.Hour), "certificate has expired: not after"},
		{"not yet valid", now.Add(time.Hour), now.Add(48 * time.Hour), "certificate is not valid yet: not before"},
	} {
		ca.LocalhostValid(t, tc.from, tc.to).Write(t, dir, "server")
		if got := served(); got != first.Cert.SerialNumber.String() {
			t.Errorf("%s pair: served serial %s, want the previous %s", tc.name, got, first.Cert.SerialNumber)
		}
		if bad := testutil.ToFloat64(m.Reloads("ratelimit", "error")); bad != float64(i+1) {
			t.Errorf("%s pair: tls_reloads_total{result=error} = %v, want %d", tc.name, bad, i+1)
		}
		if !strings.Contains(logs.String(), tc.log) || !strings.Contains(logs.String(), "keeping the previous ones") {
			t.Errorf("%s pair: logs do not say why it was refused (%q):\n%s", tc.name, tc.log, logs.String())
		}
	}

	// Close to expiry: loaded, with one warning a day.
	soon := ca.LocalhostValid(t, now.Add(-30*24*time.Hour), now.Add(2*24*time.Hour))
	soon.Write(t, dir, "server")
	if got := served(); got != soon.Cert.SerialNumber.String() {
		t.Fatalf("a pair expiring in 2 days: served %s, want it (%s)", got, soon.Cert.SerialNumber)
	}
	if left, ok := m.ExpirySeconds("ratelimit"); !ok || left > 2*86400 || left < 2*86400-600 {
		t.Errorf("tls_certificate_expiry_seconds = %v (%v), want about 2 days", left, ok)
	}
	served()
	if n := strings.Count(logs.String(), "TLS certificate expires soon"); n != 1 {
		t.Errorf("%d expiry warnings, want 1 (once a day):\n%s", n, logs.String())
	}
	clk.add(25 * time.Hour)
	served()
	if n := strings.Count(logs.String(), "TLS certificate expires soon"); n != 2 {
		t.Errorf("%d expiry warnings a day later, want 2", n)
	}
	clk.add(25 * time.Hour) // now past its expiry on the server's clock
	served()
	if !strings.Contains(logs.String(), "TLS certificate has expired") {
		t.Errorf("no error once the certificate in use expired:\n%s", logs.String())
	}
}

func TestNewServerRefusesExpired(t *testing.T) {
	dir := t.TempDir()
	ca := certstest.NewCA(t, "ca")
	certFile, keyFile := ca.LocalhostValid(t, time.Now().Add(-48*time.Hour), time.Now().Add(-time.Minute)).Write(t, dir, "server")
	_, err := certs.NewServer(certs.Config{Name: "xds", CertFile: certFile, KeyFile: keyFile})
	if !errors.Is(err, certs.ErrExpired) {
		t.Errorf("NewServer with an expired pair: %v, want ErrExpired", err)
	}
	if _, err := certs.CheckPair(certFile, keyFile, time.Now(), 0); !errors.Is(err, certs.ErrExpired) {
		t.Errorf("CheckPair of an expired pair: %v, want ErrExpired", err)
	}
	certFile, keyFile = ca.LocalhostValid(t, time.Now().Add(-48*time.Hour), time.Now().Add(time.Hour)).Write(t, dir, "soon")
	if left, err := certs.CheckPair(certFile, keyFile, time.Now(), 24*time.Hour); err != nil || left <= 0 || left > time.Hour {
		t.Errorf("CheckPair of a pair expiring in an hour = %v, %v; want about an hour", left, err)
	}
}
