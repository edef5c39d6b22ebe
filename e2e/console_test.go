package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/hashicorp/consul/api"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/xds-server/xds-server/e2e/harness"
)

// consoleRateLimits is the rate-limit config of the console test.
const consoleRateLimits = `
domain: api
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 5}
`

// TestConsoleBrowser drives the web console in a real headless Chromium
// (chromedp) against the real binary, a real Consul and a real grpc-go
// xDS client: the fleet page lists every service and a rejected Consul
// config entry, the service page draws one bar per endpoint, shows echo's
// resolver subsets (from Consul's config entries) and a Consul maintenance
// drain within 2 s, its drain button drains (the grpc-go client
// acknowledges an EDS with the endpoint DRAINING), the drains page shows
// the API's errors verbatim and undrains, the rate-limit page shows a domain's decisions. Each page
// is screenshotted (consoleShots says where); any console error or
// uncaught exception fails the test.
func TestConsoleBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	chromium := chromiumPath(t)
	consul := harness.Consul(t)
	echo := startEcho(t, 3)
	for i, cpu := range []float64{0.2, 0.4, 0.8} { // ORCA: weights 4:2:1
		echo[i].SetLoad(cpu, 100)
	}
	registerEcho(t, consul, echo, "")
	greeter := harness.StartBackend(t, "greeter-1")
	if err := consul.Client().Agent().ServiceRegister(&api.AgentServiceRegistration{
		ID: greeter.ID, Name: "greeter", Address: greeter.Host, Port: greeter.Port,
		Check: &api.AgentServiceCheck{CheckID: "ttl-" + greeter.ID, TTL: "10m", Status: api.HealthPassing},
	}); err != nil {
		t.Fatal(err)
	}
	// Traffic policy: echo's resolver (two subsets by zone) for the service
	// page, and a resolver of greeter that the server rejects (a filter on
	// Node.Meta) for the fleet page's problems.
	setEntry(t, consul.Client().ConfigEntries(), &api.ServiceResolverConfigEntry{Kind: api.ServiceResolver, Name: "echo",
		Subsets: map[string]api.ServiceResolverSubset{"z0": {Filter: `Service.Meta.zone == "zone-0"`}, "z1": {Filter: `Service.Meta.zone == "zone-1"`}}})
	setEntry(t, consul.Client().ConfigEntries(), &api.ServiceResolverConfigEntry{Kind: api.ServiceResolver, Name: "greeter",
		Subsets: map[string]api.ServiceResolverSubset{"r1": {Filter: "Node.Meta.rack == r1"}}})
	rules := filepath.Join(t.TempDir(), "ratelimit.yaml")
	if err := os.WriteFile(rules, []byte(consoleRateLimits), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "xds-server.yaml")
	if err := os.WriteFile(cfg, []byte(`services:
  echo: { weights: { enabled: true, sources: [orca] } }
  greeter: { locality: { failover: [zone] } }
weights: { blackout_period: 0s, smoothing: 1, update_period: 50ms, min_push_interval: 50ms }
`), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, consul, "--config", cfg, "--ratelimit.config", rules, "--console.history.interval", "1s")
	const node = "console-grpc-1"
	call := unaryCall(dialXDS(t, srv.XDSAddr, node))
	awaitAll(t, call, []string{"echo-1", "echo-2", "echo-3"}, 30*time.Second)

	b := newBrowser(t, chromium)
	shots := consoleShots(t)

	t.Run("fleet", func(t *testing.T) {
		b.do(t, chromedp.Navigate(srv.AdminURL("/"))) // redirects to /ui/
		b.poll(t, `document.querySelectorAll('#services tbody tr').length === 2 && document.getElementById('status').textContent.startsWith('live')`, 10*time.Second)
		text := b.text(t, "#services")
		for _, s := range []string{"echo", "greeter"} {
			if !strings.Contains(text, s) {
				t.Errorf("fleet page lacks service %s: %q", s, text)
			}
		}
		// The one datacenter read (the agent's own: "local"), ok.
		b.poll(t, `((document.querySelector('#datacenters tbody tr') || {}).textContent || '').startsWith('localok')`, 10*time.Second)
		b.poll(t, `document.getElementById('problems').textContent.includes('config entry service-resolver greeter rejected (bad_filter)')`, 10*time.Second)
		b.shot(t, shots, "fleet") // quality 100: PNG
	})

	t.Run("service", func(t *testing.T) {
		b.do(t, chromedp.Navigate(srv.AdminURL("/ui/services/echo")))
		b.poll(t, `document.querySelectorAll('#bars rect.weight').length === 3`, 10*time.Second)
		if text := b.text(t, "#endpoints"); strings.Count(text, harness.ConsulDatacenter) != 3 {
			t.Errorf("service page: want each endpoint's datacenter %s: %q", harness.ConsulDatacenter, text)
		}
		// Weight against utilization: echo-1 (cpu 0.2) has the tallest
		// weight bar and the shortest utilization bar, echo-3 the reverse.
		b.poll(t, `(() => {
			const h = (id, c) => +document.querySelector('#bars g[data-endpoint="' + id + '"] rect.' + c).getAttribute('height');
			return h('echo-1', 'weight') > h('echo-2', 'weight') && h('echo-2', 'weight') > h('echo-3', 'weight') &&
				h('echo-1', 'util') < h('echo-2', 'util') && h('echo-2', 'util') < h('echo-3', 'util');
		})()`, 20*time.Second)
		b.poll(t, `document.querySelectorAll('#policy-subsets tbody tr').length === 2`, 10*time.Second)
		if text := b.text(t, "#policy-subsets"); !strings.Contains(text, `Service.Meta.zone == "zone-1"`) {
			t.Errorf("service page: the policy's subsets lack z1's filter: %q", text)
		}
		if n := b.count(t, "#heat rect"); n != 3 {
			t.Errorf("heat strip has %d cells, want 3", n)
		}
		// One node's subset: choose the grpc-go client.
		b.poll(t, `document.querySelector('#node option[value=""] ~ option') !== null`, 10*time.Second)
		b.do(t, chromedp.Evaluate[chromedp.Void](`(() => { const s = document.getElementById('node');
			s.value = `+jsString(node)+`; s.dispatchEvent(new Event('change', {bubbles: true})); })()`))
		b.poll(t, `document.querySelector('#node-subset') !== null`, 5*time.Second)
		if text := b.text(t, "#node-subset"); !strings.Contains(text, "echo-1") || !strings.Contains(text, "echo-3") {
			t.Errorf("node %s's subset: %q, want every echo endpoint (no subsetting)", node, text)
		}
		b.shot(t, shots, "service")
	})

	t.Run("consul maintenance shows within 2s", func(t *testing.T) {
		bin, err := harness.ConsulBinary()
		if err != nil {
			t.Fatal(err)
		}
		maint := func(flag string) {
			out, err := exec.Command(bin, "maint", flag, "-service", "echo-2", "-http-addr", consul.Addr()).CombinedOutput()
			if err != nil {
				t.Fatalf("consul maint %s: %v: %s", flag, err, out)
			}
		}
		maint("-enable")
		start := time.Now()
		b.poll(t, `document.querySelector('#bars g[data-endpoint="echo-2"] rect.weight.draining') !== null`, 2*time.Second)
		t.Logf("the service page showed echo-2 draining %v after consul maint -enable", time.Since(start).Round(time.Millisecond))
		if !strings.Contains(b.text(t, "#endpoints"), "consul_maintenance") {
			t.Error("the endpoint table does not say why echo-2 drains")
		}
		b.shot(t, shots, "service-maintenance")
		maint("-disable")
		b.poll(t, `document.querySelector('#bars rect.weight.draining') === null`, 10*time.Second)
	})

	t.Run("drain button", func(t *testing.T) {
		b.do(t, chromedp.Click(chromedp.CSS(`button.drain[data-endpoint="echo-3"]`)))
		start := time.Now()
		awaitNodeDraining(t, srv, node, echo[2].Addr(), 10*time.Second)
		t.Logf("grpc-go node %s acknowledged echo-3 DRAINING %v after the click", node, time.Since(start).Round(time.Millisecond))
		b.poll(t, `document.querySelector('button.undrain[data-endpoint="echo-3"]') !== null`, 5*time.Second)
		b.shot(t, shots, "service-drained")
	})

	t.Run("a page of another site cannot drain", func(t *testing.T) { crossSiteCannotDrain(t, b, srv) })

	t.Run("drains page", func(t *testing.T) {
		b.do(t, chromedp.Navigate(srv.AdminURL("/ui/drains")))
		// The page renders its skeleton, then its data (and re-renders every
		// second): wait for the drain to be listed.
		b.poll(t, `((document.querySelector('#admin-drains') || {}).textContent || '').includes('echo-3')`, 10*time.Second)
		// A bad drain: the page shows the API's own error, verbatim.
		want := drainError(t, srv, `{"service":"echo","endpoint":"no-such-endpoint"}`)
		b.expectNetworkError("/v1/drain")
		b.do(t, chromedp.SendKeys(chromedp.CSS(`#drain-form input[name=service]`), "echo"),
			chromedp.SendKeys(chromedp.CSS(`#drain-form input[name=endpoint]`), "no-such-endpoint"),
			chromedp.Click(chromedp.CSS(`#drain-form button`)))
		b.poll(t, `(document.querySelector('#drain-result.error') || {}).textContent === `+jsString("404: "+want), 5*time.Second)
		b.shot(t, shots, "drains")
		b.do(t, chromedp.Click(chromedp.CSS(`button.undrain[data-endpoint="echo-3"]`)))
		b.poll(t, `document.querySelector('#admin-drains') === null`, 5*time.Second)
		b.poll(t, `document.getElementById('draining') === null`, 5*time.Second)
	})

	t.Run("rate limits", func(t *testing.T) {
		for range 7 {
			postRateLimit(t, srv, `{"domain":"api","descriptors":[{"entries":[{"key":"user","value":"alice"}]}]}`)
		}
		b.do(t, chromedp.Navigate(srv.AdminURL("/ui/ratelimit")))
		b.poll(t, `document.querySelector('.domain') !== null && document.querySelector('.domain').textContent.includes('api_user_alice_')`, 10*time.Second)
		text := b.text(t, ".domain")
		for _, w := range []string{"api.user", "5/minute", "7 decided, 2 over", "CRITICAL"} {
			if !strings.Contains(text, w) {
				t.Errorf("rate-limit page lacks %q: %q", w, text)
			}
		}
		b.shot(t, shots, "ratelimit")
	})

	t.Run("history", func(t *testing.T) {
		b.do(t, chromedp.Navigate(srv.AdminURL("/ui/services/echo")))
		// Sampled every second: a line (not a dot) per endpoint's
		// utilization, and the service's spread.
		b.poll(t, `document.querySelectorAll('#history-table svg.spark.util path[d*="L"]').length === 3 &&
			document.querySelector('#history svg.spark.spread path[d*="L"]') !== null`, 15*time.Second)
		b.shot(t, shots, "service-history")
	})

	t.Run("a node's priority levels", func(t *testing.T) {
		b.do(t, chromedp.Navigate(srv.AdminURL("/ui/services/greeter")))
		b.poll(t, `document.querySelector('#node option[value=""] ~ option') !== null`, 10*time.Second)
		b.do(t, chromedp.Evaluate[chromedp.Void](`(() => { const s = document.getElementById('node');
			s.value = `+jsString(node)+`; s.dispatchEvent(new Event('change', {bubbles: true})); })()`))
		b.poll(t, `document.querySelector('#node-levels tbody tr') !== null`, 5*time.Second)
		if text := b.text(t, "#nodeview"); !strings.Contains(text, "zone zone-0") || !strings.Contains(text, harness.ConsulDatacenter) {
			t.Errorf("node %s's levels of greeter: %q, want its place (zone zone-0) and greeter's locality (region %s)", node, text, harness.ConsulDatacenter)
		}
		b.shot(t, shots, "service-levels")
	})

	t.Run("without JavaScript", func(t *testing.T) {
		body := httpGet(t, srv.AdminURL("/ui/"))
		for _, w := range []string{`<a href="/ui/services/echo">echo</a></td><td>3</td>`, `<a href="/ui/services/greeter">greeter</a></td><td>1</td>`} {
			if !strings.Contains(body, w) {
				t.Errorf("GET /ui/ without JavaScript lacks %q", w)
			}
		}
	})
	b.checkConsole(t)
}

// TestConsoleStatic is `make run`: the binary on the static example file
// (examples/endpoints.yaml, the default), its console in Chromium.
func TestConsoleStatic(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	chromium := chromiumPath(t)
	srv := harness.StartServer(t)
	srv.WaitReady(t)
	b := newBrowser(t, chromium)
	shots := consoleShots(t)
	b.do(t, chromedp.Navigate(srv.AdminURL("/")))
	b.probeConsole(t)
	b.poll(t, `document.querySelectorAll('#services tbody tr').length === 2 && document.getElementById('status').textContent.startsWith('live')`, 10*time.Second)
	rows := b.text(t, "#services")
	for _, w := range []string{"echo", "greeter"} {
		if !strings.Contains(rows, w) {
			t.Errorf("fleet page of the static example lacks %s: %q", w, rows)
		}
	}
	if n := b.count(t, `#services rect.draining`); n != 1 {
		t.Errorf("%d draining health bars, want 1 (greeter-2 is draining in the example)", n)
	}
	if text := b.text(t, "#problems"); !strings.Contains(text, "greeter: 0 of 2 endpoints unhealthy, 1 draining") {
		t.Errorf("the fleet page's problems do not name greeter's draining endpoint: %q", text)
	}
	b.shot(t, shots, "static-fleet")
	// Live, but at most one request per second from an open page: over a
	// 3 s window, 2 to 4 calls of the JSON API.
	const series = `console_requests_total{kind="api"}`
	before := metricValue(t, srv, "", series)
	<-time.After(3 * time.Second) // a rate: there is no event to wait for
	if n := metricValue(t, srv, "", series) - before; n < 2 || n > 4 {
		t.Errorf("the fleet page made %v API requests in 3 s, want 2 to 4 (live, at most 1/s)", n)
	}
	b.do(t, chromedp.Navigate(srv.AdminURL("/ui/services/greeter")))
	b.poll(t, `document.querySelectorAll('#bars rect.weight').length === 2 && document.querySelectorAll('#bars rect.weight.draining').length === 1`, 10*time.Second)
	b.shot(t, shots, "static-service")
	b.checkConsole(t)
}

// TestConsoleToken: with admin.token_file the pages carry no data and the
// JSON API answers 401; the page asks for the token once, keeps it in the
// tab's sessionStorage and then shows the fleet (and a drain works).
func TestConsoleToken(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	chromium := chromiumPath(t)
	tokenFile := filepath.Join(t.TempDir(), "token")
	const token = "console-admin-token"
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := harness.StartServer(t, "--admin.token_file", tokenFile)
	srv.WaitReady(t)
	if body := httpGet(t, srv.AdminURL("/ui/")); strings.Contains(body, "greeter") || !strings.Contains(body, "needs a bearer token") {
		t.Errorf("GET /ui/ without a token shows data or no notice:\n%s", body)
	}
	resp, err := http.Get(srv.AdminURL("/ui/api/fleet"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /ui/api/fleet without a token: %d, want 401", resp.StatusCode)
	}
	b := newBrowser(t, chromium)
	shots := consoleShots(t)
	b.do(t, chromedp.Navigate(srv.AdminURL("/ui/")))
	b.poll(t, `!document.getElementById('token-form').hidden`, 10*time.Second)
	b.shot(t, shots, "token-asked")
	b.do(t, chromedp.SendKeys(chromedp.CSS(`#token`), token), chromedp.Click(chromedp.CSS(`#token-form button`)))
	b.poll(t, `document.querySelectorAll('#services tbody tr').length === 2`, 10*time.Second)
	if text := b.text(t, "body"); strings.Contains(text, token) {
		t.Error("the page shows the token")
	}
	// Another page of the same tab: the token is kept.
	b.do(t, chromedp.Navigate(srv.AdminURL("/ui/services/echo")))
	b.poll(t, `document.querySelectorAll('#bars rect.weight').length === 3`, 10*time.Second)
	b.do(t, chromedp.Click(chromedp.CSS(`button.drain[data-endpoint="echo-1"]`)))
	b.poll(t, `document.querySelector('#bars g[data-endpoint="echo-1"] rect.weight.draining') !== null`, 10*time.Second)
	b.shot(t, shots, "token-service")
	b.checkConsole(t)
}

// drainError is the error the drain API answers to a POST of body.
func drainError(t *testing.T, srv *harness.Server, body string) string {
	t.Helper()
	resp, err := http.Post(srv.AdminURL("/v1/drain"), "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e struct {
		Error string `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil || resp.StatusCode != http.StatusNotFound || e.Error == "" {
		t.Fatalf("POST /v1/drain %s: %d %v %q", body, resp.StatusCode, err, e.Error)
	}
	return e.Error
}

func postRateLimit(t *testing.T, srv *harness.Server, body string) {
	t.Helper()
	resp, err := http.Post(srv.AdminURL("/v1/ratelimit"), "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}

func httpGet(t *testing.T, u string) string {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", u, resp.StatusCode, b)
	}
	return string(b)
}

// awaitNodeDraining waits until node has acknowledged an EDS of echo in
// which addr is DRAINING.
func awaitNodeDraining(t *testing.T, srv *harness.Server, node, addr string, limit time.Duration) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(limit)
	for {
		version, cla := sentEchoEDS(t, srv, node)
		if cla != nil && endpointHealth(cla)[addr] == corev3.HealthStatus_DRAINING && ackedEDSOf(t, srv, node) == version {
			return
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("node %s did not acknowledge an EDS with %s DRAINING within %v", node, addr, limit)
		}
	}
}

func sentEchoEDS(t *testing.T, srv *harness.Server, node string) (string, *endpointv3.ClusterLoadAssignment) {
	var cfg struct {
		Resources map[string]struct {
			Version   string            `json:"version"`
			Resources []json.RawMessage `json:"resources"`
		} `json:"resources"`
	}
	getJSON(t, srv.AdminURL("/debug/config?node="+url.QueryEscape(node)), &cfg)
	eds := cfg.Resources["endpoint"]
	for _, raw := range eds.Resources {
		var cla endpointv3.ClusterLoadAssignment
		if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(raw, &cla); err == nil && cla.GetClusterName() == "echo" {
			return eds.Version, &cla
		}
	}
	return eds.Version, nil
}

func ackedEDSOf(t *testing.T, srv *harness.Server, node string) string {
	var nodes struct {
		Nodes []struct {
			ID    string            `json:"id"`
			Acked map[string]string `json:"acked_versions"`
		} `json:"nodes"`
	}
	getJSON(t, srv.AdminURL("/debug/nodes"), &nodes)
	for _, n := range nodes.Nodes {
		if n.ID == node {
			return n.Acked[edsTypeURL]
		}
	}
	return ""
}
