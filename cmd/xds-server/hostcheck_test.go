package main

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestHostAllow(t *testing.T) {
	a := newHostAllow("admin.internal:19000", []string{"ops.example.org", "*.corp.example", "Mixed.Case."})
	for host, want := range map[string]bool{
		"":                       true, // HTTP/1.0: no browser
		"127.0.0.1:19000":        true,
		"127.0.0.1":              true,
		"[::1]:19000":            true,
		"[::1]":                  true,
		"10.1.2.3:19000":         true, // an IP literal is never rebound
		"[fe80::1%25eth0]:19000": true,
		"localhost:19000":        true,
		"LOCALHOST.:19000":       true,
		"admin.internal:19000":   true, // admin.address's host
		"admin.internal:1":       true, // any port
		"ops.example.org":        true,
		"a.b.corp.example:19000": true,
		"corp.example:19000":     false, // "*.corp.example" is below it only
		"mixed.case:19000":       true,
		"evil.test:19000":        false,
		"evil.test":              false,
		"localhost.evil.test":    false,
		"127.0.0.1.nip.io:19000": false,
		"evil.localhost:19000":   false,
	} {
		if got := a.allows(host); got != want {
			t.Errorf("allows(%q) = %v, want %v", host, got, want)
		}
	}
	if !newHostAllow("127.0.0.1:0", []string{"*"}).allows("evil.test") {
		t.Error(`"*" does not allow every host`)
	}
	if newHostAllow(":19000", nil).allows("evil.test") {
		t.Error("an empty admin.address host allows every name")
	}
}

// TestRefuseMisdirected: a request naming a foreign host gets 421 and is
// counted and logged once per interval (host clipped), without reaching
// the handler; /healthz and /readyz answer any host.
func TestRefuseMisdirected(t *testing.T) {
	reached := 0
	next := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { reached++ })
	refused := prometheus.NewCounter(prometheus.CounterOpts{Name: "t"})
	var logs bytes.Buffer
	h := refuseMisdirected(next, newHostAllow("127.0.0.1:19000", nil), refused, slog.New(slog.NewTextHandler(&logs, nil)))
	long := strings.Repeat("x", 5000) + ".test"
	for _, tc := range []struct {
		method, path, host string
		want               int
	}{
		{"POST", "/v1/drain", "evil.test:19000", http.StatusMisdirectedRequest},
		{"GET", "/ui/api/fleet", "evil.test:19000", http.StatusMisdirectedRequest},
		{"GET", "/metrics", long, http.StatusMisdirectedRequest},
		{"GET", "/healthz", "evil.test:19000", http.StatusOK},
		{"GET", "/readyz", "evil.test:19000", http.StatusOK},
		{"POST", "/v1/drain", "127.0.0.1:19000", http.StatusOK},
	} {
		req := httptest.NewRequest(tc.method, tc.path, nil)
		req.Host = tc.host
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tc.want {
			t.Errorf("%s %s Host %.20s: %d, want %d", tc.method, tc.path, tc.host, rec.Code, tc.want)
		}
	}
	if reached != 3 {
		t.Errorf("the handler was reached %d times, want 3", reached)
	}
	if got := testutil.ToFloat64(refused); got != 3 {
		t.Errorf("refused = %v, want 3", got)
	}
	if n := strings.Count(logs.String(), "\n"); n != 1 || logs.Len() > 500 {
		t.Errorf("%d log lines, %d bytes, want 1 line of a clipped host:\n%s", n, logs.Len(), logs.String())
	}
}

// FuzzHostAllow feeds arbitrary Host headers: allows never panics, does
// not depend on case or on the port, and lets through no name outside
// localhost, admin.address's host and admin.allowed_hosts but IP literals.
func FuzzHostAllow(f *testing.F) {
	for _, s := range []string{"evil.test", "localhost", "127.0.0.1", "[::1]", "admin.internal.", "a.corp.example", "[", "::1", "1.2.3.4.nip.io", "%"} {
		f.Add(s)
	}
	a := newHostAllow("admin.internal:19000", []string{"*.corp.example"})
	f.Fuzz(func(t *testing.T, host string) {
		if strings.ContainsAny(host, ":[]") {
			_ = a.allows(host) // must not panic; the port rules below need a bare host
			return
		}
		got := a.allows(host)
		if a.allows(strings.ToUpper(host)) != got || a.allows(host+":19000") != got || a.allows(host+":1") != got {
			t.Fatalf("allows(%q) = %v depends on case or port", host, got)
		}
		h := canonicalHost(host)
		if got && h != "" && h != "localhost" && h != "admin.internal" && !strings.HasSuffix(h, ".corp.example") {
			if _, err := netip.ParseAddr(h); err != nil {
				t.Fatalf("allows(%q) = true for a name not allowed", host)
			}
		}
	})
}
