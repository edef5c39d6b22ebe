package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/xds-server/xds-server/certs"
)

func TestRequireToken(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(path, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	token, err := certs.NewFile(path, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	denied := prometheus.NewCounter(prometheus.CounterOpts{Name: "x"})
	h := requireToken(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}), token, denied)
	for name, tc := range map[string]struct {
		path, auth string
		want       int
	}{
		"health is open":          {"/healthz", "", 200},
		"readiness is open":       {"/readyz", "", 200},
		"metrics are open":        {"/metrics", "", 200},
		"debug without a token":   {"/debug/nodes", "", 401},
		"v1 with a wrong token":   {"/v1/drain", "Bearer nope", 401},
		"json without a token":    {"/json", "", 401},
		"basic auth is not it":    {"/debug/nodes", "Basic s3cret", 401},
		"debug with the token":    {"/debug/nodes", "Bearer s3cret", 200},
		"v1 with the token":       {"/v1/drain", "Bearer s3cret", 200},
		"token prefix is not it":  {"/v1/drain", "Bearer s3cre", 401},
		"console root is open":    {"/", "", 200},
		"console pages are open":  {"/ui/services/echo", "", 200},
		"console assets are open": {"/ui/static/app.js", "", 200},
		"console API needs it":    {"/ui/api/fleet", "", 401},
		"console API, escaped":    {"/ui/api%2Ffleet", "", 401},
		"console API with it":     {"/ui/api/fleet", "Bearer s3cret", 200},
	} {
		t.Run(name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(http.MethodGet, tc.path, nil)
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			h.ServeHTTP(rec, req)
			if rec.Code != tc.want {
				t.Errorf("%s: %d, want %d", tc.path, rec.Code, tc.want)
			}
		})
	}
	if got := testutil.ToFloat64(denied); got != 7 {
		t.Errorf("admin_unauthorized_total = %v, want 7", got)
	}
}
