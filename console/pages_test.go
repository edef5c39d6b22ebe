package console

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestPagesWithoutJavaScript: each page is a readable table on its own.
func TestPagesWithoutJavaScript(t *testing.T) {
	_, _, h := newTestConsole(t, nil)
	for path, want := range map[string][]string{
		"/ui/":              {`<a href="/ui/services/echo">echo</a></td><td>3</td><td>1</td><td>0</td><td>1</td><td>1</td>`, `<a href="/ui/services/greeter">greeter</a>`, "STALE"},
		"/ui/services/echo": {"<td>e2</td><td>10.0.0.2:80</td><td></td><td>draining</td><td>admin, consul_maintenance</td>", "<td>e1</td>"},
		"/ui/drains":        {"<td>echo</td><td>e2</td>", "until deleted"},
		"/ui/ratelimit":     {"no rate-limit domains configured"},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		body := rec.Body.String()
		if rec.Code != http.StatusOK || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html") {
			t.Errorf("GET %s: %d %s", path, rec.Code, rec.Header().Get("Content-Type"))
		}
		if !strings.Contains(rec.Header().Get("Content-Security-Policy"), "script-src 'self'") {
			t.Errorf("GET %s: no CSP", path)
		}
		for _, w := range want {
			if !strings.Contains(body, w) {
				t.Errorf("GET %s: page lacks %q:\n%s", path, w, body)
			}
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	if rec.Code != http.StatusFound || rec.Header().Get("Location") != "/ui/" {
		t.Errorf("GET /: %d to %q, want a redirect to /ui/", rec.Code, rec.Header().Get("Location"))
	}
	for _, asset := range []string{"/ui/static/app.js", "/ui/static/style.css"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, asset, nil))
		if rec.Code != http.StatusOK || rec.Body.Len() < 1000 {
			t.Errorf("GET %s: %d, %d bytes", asset, rec.Code, rec.Body.Len())
		}
	}
}

// TestPagesWithToken: with an admin token the pages carry no data (the
// script asks for the token and reads /ui/api/).
func TestPagesWithToken(t *testing.T) {
	_, _, h := newTestConsole(t, func(c *Config) { c.TokenRequired = true })
	for _, path := range []string{"/ui/", "/ui/services/echo", "/ui/drains", "/ui/ratelimit"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		body := rec.Body.String()
		if rec.Code != http.StatusOK || !strings.Contains(body, `data-token="required"`) || !strings.Contains(body, "needs a bearer token") {
			t.Errorf("GET %s: %d, no token notice", path, rec.Code)
		}
		for _, secret := range []string{"e2", "10.0.0", "greeter"} {
			if strings.Contains(body, secret) {
				t.Errorf("GET %s shows %q without the token", path, secret)
			}
		}
	}
}
