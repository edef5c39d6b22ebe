package main

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/xds-server/xds-server/config"
	"github.com/xds-server/xds-server/xds"
)

// TestAdminRefusesCrossOriginWrites: the admin server refuses (403) and
// counts a state-changing request a browser sends from another origin,
// and serves same-origin ones, reads, and clients without Origin or
// Sec-Fetch-Site (curl), with and without the bearer token.
func TestAdminRefusesCrossOriginWrites(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, token := range []string{"", tokenFile} {
		t.Run("token="+map[bool]string{true: "yes", false: "no"}[token != ""], func(t *testing.T) {
			reg := newRegistry()
			served := 0
			mux := http.NewServeMux()
			mux.HandleFunc("/v1/drain", func(w http.ResponseWriter, _ *http.Request) { served++ })
			admin, err := newAdminServer(config.AdminConfig{TokenFile: token}, newSecurity(reg, slog.New(slog.NewTextHandler(io.Discard, nil))), mux, reg)
			if err != nil {
				t.Fatal(err)
			}
			ts := httptest.NewServer(admin.Handler)
			defer ts.Close()
			refused := 0
			for name, tc := range map[string]struct {
				method  string
				headers map[string]string
				want    int
			}{
				"curl POST":                 {"POST", nil, http.StatusOK},
				"curl DELETE":               {"DELETE", nil, http.StatusOK},
				"console POST (fetch)":      {"POST", map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": ts.URL}, http.StatusOK},
				"same Origin, old browser":  {"POST", map[string]string{"Origin": ts.URL}, http.StatusOK},
				"typed in the address bar":  {"POST", map[string]string{"Sec-Fetch-Site": "none"}, http.StatusOK},
				"cross-site POST":           {"POST", map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"}, http.StatusForbidden},
				"same-site, other port":     {"DELETE", map[string]string{"Sec-Fetch-Site": "same-site", "Origin": "http://127.0.0.1:1"}, http.StatusForbidden},
				"foreign Origin, no fetch":  {"POST", map[string]string{"Origin": "https://evil.example"}, http.StatusForbidden},
				"cross-site GET is a read":  {"GET", map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"}, http.StatusOK},
				"cross-site with the token": {"POST", map[string]string{"Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
			} {
				req, err := http.NewRequest(tc.method, ts.URL+"/v1/drain", strings.NewReader("{}"))
				if err != nil {
					t.Fatal(err)
				}
				for k, v := range tc.headers {
					req.Header.Set(k, v)
				}
				if token != "" {
					req.Header.Set("Authorization", "Bearer s3cret")
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != tc.want {
					t.Errorf("%s: %d %q, want %d", name, resp.StatusCode, body, tc.want)
				}
				if tc.want == http.StatusForbidden {
					refused++
					if !strings.Contains(string(body), "cross-origin request refused") {
						t.Errorf("%s: body %q does not say why", name, body)
					}
				}
			}
			if served != 10-refused {
				t.Errorf("handler served %d requests, want %d", served, 10-refused)
			}
			checkRefused(t, reg, refused)
		})
	}
}

// checkRefused compares admin_cross_origin_refused_total with want.
func checkRefused(t *testing.T, reg prometheus.Gatherer, want int) {
	t.Helper()
	text := fmt.Sprintf("# HELP admin_cross_origin_refused_total Admin requests refused (403) because a browser sent them from another origin: non-safe methods, and reads of the CPU profile or the trace.\n"+
		"# TYPE admin_cross_origin_refused_total counter\nadmin_cross_origin_refused_total %d\n", want)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(text), "admin_cross_origin_refused_total"); err != nil {
		t.Error(err)
	}
}

// TestAdminRefusesCrossSiteProfiles: over real HTTP to the admin server
// (with its real handler), a browser's cross-site or same-site read of
// the CPU profile or the trace, which would cost the server CPU for
// seconds, is refused (403) and counted; go tool pprof and curl, which
// send neither Sec-Fetch-Site nor Origin, and the console's same-origin
// reads get the profile (200), and cheap profiles pass cross-site.
func TestAdminRefusesCrossSiteProfiles(t *testing.T) {
	reg := newRegistry()
	srv, err := xds.New(xds.Config{Registerer: reg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	admin, err := newAdminServer(config.AdminConfig{}, newSecurity(reg, slog.New(slog.NewTextHandler(io.Discard, nil))), adminHandler(srv, reg), reg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(admin.Handler)
	defer ts.Close()
	crossSite := map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"}
	refused := 0
	for _, tc := range []struct {
		name, method, path string
		headers            map[string]string
		want               int
	}{
		{"cross-site CPU profile", "GET", "/debug/pprof/profile?seconds=1", crossSite, http.StatusForbidden},
		{"cross-site trace", "GET", "/debug/pprof/trace?seconds=1", crossSite, http.StatusForbidden},
		{"same-site CPU profile (img, no Origin)", "GET", "/debug/pprof/profile?seconds=1", map[string]string{"Sec-Fetch-Site": "same-site"}, http.StatusForbidden},
		{"foreign Origin, old browser", "GET", "/debug/pprof/trace?seconds=1", map[string]string{"Origin": "https://evil.example"}, http.StatusForbidden},
		{"cross-site HEAD", "HEAD", "/debug/pprof/profile?seconds=1", crossSite, http.StatusForbidden},
		{"uncleaned path", "GET", "/debug/pprof/profile/?seconds=1", crossSite, http.StatusForbidden},
		{"go tool pprof / curl", "GET", "/debug/pprof/profile?seconds=1", nil, http.StatusOK},
		{"curl trace", "GET", "/debug/pprof/trace?seconds=1", nil, http.StatusOK},
		{"console, same origin", "GET", "/debug/pprof/profile?seconds=1", map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": ts.URL}, http.StatusOK},
		{"cross-site heap (cheap)", "GET", "/debug/pprof/heap", crossSite, http.StatusOK},
	} {
		req, err := http.NewRequest(tc.method, ts.URL+tc.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range tc.headers {
			req.Header.Set(k, v)
		}
		start := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		took := time.Since(start)
		if resp.StatusCode != tc.want {
			t.Errorf("%s: %d %.200q, want %d", tc.name, resp.StatusCode, body, tc.want)
			continue
		}
		if tc.want == http.StatusForbidden {
			refused++
			if took > 500*time.Millisecond {
				t.Errorf("%s: refused after %v: the profile ran", tc.name, took)
			}
			continue
		}
		if len(body) == 0 {
			t.Errorf("%s: empty profile", tc.name)
		}
	}
	checkRefused(t, reg, refused)
}
