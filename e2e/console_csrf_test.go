package e2e

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/xds-server/xds-server/e2e/harness"
)

// crossSiteCannotDrain opens, in the console test's browser, a page of
// another origin (another port of 127.0.0.1) whose script posts a drain
// of echo-1 to the admin address as a cross-site request forgery would
// (fetch, mode no-cors, a text/plain body: no preflight). The real binary
// refuses it (403, admin_cross_origin_refused_total) and echo-1 stays
// undrained.
func crossSiteCannotDrain(t *testing.T, b *browser, srv *harness.Server) {
	page := `<!doctype html><title>elsewhere</title><script>
fetch(` + jsString(srv.AdminURL("/v1/drain")) + `, {method: "POST", mode: "no-cors",
  body: JSON.stringify({service: "echo", endpoint: "echo-1"})}).finally(() => { window.forged = true; });
</script>`
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte(page))
	}))
	defer other.Close()
	b.expectNetworkError("/v1/drain") // the refusal, a 403
	b.do(t, chromedp.Navigate(other.URL))
	b.poll(t, `window.forged === true`, 10*time.Second)
	if m := httpGet(t, srv.AdminURL("/metrics")); !strings.Contains(m, "admin_cross_origin_refused_total 1\n") {
		t.Error("/metrics: admin_cross_origin_refused_total is not 1 after the forged drain")
	}
	if d := httpGet(t, srv.AdminURL("/ui/api/drains")); strings.Contains(d, `"echo-1"`) {
		t.Errorf("a page of another origin drained echo-1: %s", d)
	}
}
