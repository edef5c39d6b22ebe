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

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/xds-server/xds-server/config"
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
			want := fmt.Sprintf("# HELP admin_cross_origin_refused_total Admin requests with a non-safe method refused (403) because a browser sent them from another origin.\n"+
				"# TYPE admin_cross_origin_refused_total counter\nadmin_cross_origin_refused_total %d\n", refused)
			if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "admin_cross_origin_refused_total"); err != nil {
				t.Error(err)
			}
		})
	}
}
