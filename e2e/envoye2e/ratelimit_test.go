package envoye2e

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	"github.com/hashicorp/consul/api"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/xds-server/xds-server/e2e/harness"
	"github.com/xds-server/xds-server/envoy"
)

// rlServerConfig: listener rl asks the RLS (domain rl) with every kind of
// action; rl-deny fails closed when the RLS cannot be reached, rl fails
// open; shed routes to a service whose only endpoint refuses connections,
// behind admission control.
const rlServerConfig = `
services:
  web: {}
  dead: { connect_timeout: 1s }
ratelimit:
  config: %s
  headers: true
listeners:
  - name: rl
    address: 127.0.0.1:0
    routes: [ { prefix: /, service: web } ]
    ratelimit:
      domain: rl
      timeout: 5s                # generous: the machine is shared
      failure_mode_deny: false
      actions:
        - [ { remote_address: {} } ]
        - [ { request_headers: { header_name: x-user-id, descriptor_key: user } } ]
        - [ { generic_key: { value: gk } }, { request_headers: { header_name: x-tenant, descriptor_key: tenant, skip_if_absent: true } } ]
        - [ { header_value_match: { descriptor_key: method, descriptor_value: get, headers: [ { name: ":method", exact: GET } ] } } ]
        - [ { header_value_match: { descriptor_key: probe, descriptor_value: "no", expect_match: false, headers: [ { name: x-probe, present: true } ] } } ]
  - name: rl-deny
    address: 127.0.0.2:0         # listeners' addresses differ (loopback has them all)
    routes: [ { prefix: /, service: web } ]
    ratelimit:
      domain: rl
      timeout: 5s
      failure_mode_deny: true
      actions: [ [ { generic_key: { value: deny, descriptor_key: listener } } ] ]
  - name: shed
    address: 127.0.0.3:0
    routes: [ { prefix: /, service: dead } ]
    admission_control: { k: 2, aggression: 1.0, sampling_window: 30s, rps_threshold: 1, max_rejection_probability: 0.8 }
`

// rlDomain is domain rl: every rule counts its descriptors in its own
// ratelimit_total_hits_total series, detailed_metric putting the values
// Envoy sent into the rule label; user "limited" may make 3 requests a day.
const rlDomain = `domain: rl
descriptors:
  - { key: remote_address, detailed_metric: true, rate_limit: { unit: day, requests_per_unit: 1000000 } }
  - { key: user, detailed_metric: true, rate_limit: { unit: day, requests_per_unit: 1000000 } }
  - { key: user, value: limited, rate_limit: { unit: day, requests_per_unit: 3 } }
  - key: generic_key
    value: gk
    detailed_metric: true
    rate_limit: { unit: day, requests_per_unit: 1000000 }
    descriptors:
      - { key: tenant, detailed_metric: true, rate_limit: { unit: day, requests_per_unit: 1000000 } }
  - { key: method, value: get, detailed_metric: true, rate_limit: { unit: day, requests_per_unit: 1000000 } }
  - { key: probe, value: "no", detailed_metric: true, rate_limit: { unit: day, requests_per_unit: 1000000 } }
  - { key: listener, value: deny, detailed_metric: true, rate_limit: { unit: day, requests_per_unit: 1000000 } }
`

// rlEnv is one test's Consul, backend, xds-server and Envoy.
type rlEnv struct {
	srv *harness.Server
	e   *harness.Envoy
	// base URLs of Envoy's listeners rl, rl-deny and shed
	rl, deny, shed string
}

// rlStart runs web (the example backend), dead (an endpoint nothing
// listens on), xds-server with rlServerConfig and an Envoy that has
// accepted it all.
func rlStart(t *testing.T) *rlEnv {
	t.Helper()
	consul := harness.Consul(t)
	// First: RegisterFile reloads the agent, which forgets the backend's
	// own registration.
	consul.RegisterFile(t, api.AgentServiceRegistration{Name: "dead", ID: "dead-1", Address: "127.0.0.1", Port: harness.FreePort(t)})
	harness.StartExampleBackend(t, "-consul", consul.Addr(), "-service", "web", "-id", "web-1", "-register-port", "http",
		"-grpc-addr", "127.0.0.1:0", "-http-addr", "127.0.0.1:0", "-check-interval", "1s", "-drain-delay", "0s")
	dir := t.TempDir()
	rlDir := filepath.Join(dir, "ratelimit")
	rlWrite(t, filepath.Join(rlDir, "rl.yaml"), rlDomain)
	cfg := filepath.Join(dir, "xds-server.yaml")
	rlWrite(t, cfg, fmt.Sprintf(rlServerConfig, rlDir))
	srv := startServerWith(t, consul, harness.ServerOptions{PortArgs: func(addr string) []string {
		return []string{"--ratelimit.address", addr, "--ratelimit.advertise_address", addr}
	}}, "--config", cfg)
	e := harness.StartEnvoy(t, harness.EnvoyOptions{NodeID: "rl-1", XDSAddr: srv.XDSAddr})
	env := &rlEnv{srv: srv, e: e}
	for name, u := range map[string]*string{"rl": &env.rl, "rl-deny": &env.deny, "shed": &env.shed} {
		*u = "http://" + e.AwaitListener(t, name, 60*time.Second)
	}
	e.AwaitHosts(t, "web", 60*time.Second, func(h []harness.EnvoyHost) bool { return len(h) == 1 })
	e.AwaitHosts(t, "xds-server-ratelimit", 60*time.Second, func(h []harness.EnvoyHost) bool { return len(h) == 1 })
	// web's Consul check passes within a second or two: until then Envoy
	// has no healthy host.
	rlAwaitStatus(t, env.rl+"/", http.StatusOK, 60*time.Second)
	e.AssertAccepted(t)
	return env
}

func rlWrite(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

// rlAnswer is what Envoy answered.
type rlAnswer struct {
	status int
	header http.Header
	body   string
}

func (a rlAnswer) String() string {
	return fmt.Sprintf("%d %q (x-envoy-ratelimited %q, RateLimit-Limit %q, -Remaining %q, -Reset %q)", a.status, a.body,
		a.header.Get("x-envoy-ratelimited"), a.header.Get("RateLimit-Limit"), a.header.Get("RateLimit-Remaining"),
		a.header.Get("RateLimit-Reset"))
}

// rlDo sends one request through Envoy; headers are name, value pairs.
func rlDo(t *testing.T, method, url string, headers ...string) rlAnswer {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	client := &http.Client{Timeout: 20 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return rlAnswer{status: resp.StatusCode, header: resp.Header, body: strings.TrimSpace(string(b))}
}

// rlAwaitStatus polls url until it answers status (Envoy and the backend
// are other processes: there is no event to wait for).
func rlAwaitStatus(t *testing.T, url string, status int, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		a := rlDo(t, http.MethodGet, url)
		if a.status == status {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: %v, want %d within %v", url, a, status, limit)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// rlHits are the RLS's ratelimit_total_hits_total of domain rl by rule
// label, and its ratelimit_requests_total summed over results.
func rlHits(t *testing.T, srv *harness.Server) (map[string]float64, float64) {
	t.Helper()
	resp, err := srv.Admin.Get(srv.AdminURL("/metrics"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	hits, requests := map[string]float64{}, 0.0
	for line := range strings.Lines(string(b)) {
		series, v, ok := strings.Cut(strings.TrimSpace(line), " ")
		f, err := strconv.ParseFloat(v, 64)
		if !ok || err != nil {
			continue
		}
		if rule, ok := strings.CutPrefix(series, `ratelimit_total_hits_total{domain="rl",rule="`); ok {
			hits[strings.TrimSuffix(rule, `"}`)] = f
		}
		if strings.HasPrefix(series, "ratelimit_requests_total{") {
			requests += f
		}
	}
	return hits, requests
}

// rlHitsOf sends one request through Envoy and returns the rules of
// domain rl whose hits it moved, sorted, after checking that Envoy made
// exactly one RLS call for it.
func rlHitsOf(t *testing.T, env *rlEnv, method, url string, headers ...string) []string {
	t.Helper()
	before, reqsBefore := rlHits(t, env.srv)
	if a := rlDo(t, method, url, headers...); a.status != http.StatusOK {
		t.Fatalf("%s %s %v: %v, want 200", method, url, headers, a)
	}
	after, reqsAfter := rlHits(t, env.srv)
	if reqsAfter != reqsBefore+1 {
		t.Errorf("%s %s %v: %v RLS calls, want 1", method, url, headers, reqsAfter-reqsBefore)
	}
	var moved []string
	for _, rule := range slices.Sorted(maps.Keys(after)) {
		if d := after[rule] - before[rule]; d != 0 {
			moved = append(moved, fmt.Sprintf("%s+%v", rule, d))
		}
	}
	return moved
}

// TestEnvoyRateLimit: Envoy's ratelimit filter, configured from
// listeners[].ratelimit, asks xds-server's RLS with exactly the
// descriptors each action kind should produce (proven by the rules of
// domain rl whose hits each request moves, values included); over a limit
// Envoy answers 429 with x-envoy-ratelimited, and the RLS's RateLimit-*
// headers reach the client on 200s and 429s; admission control sheds
// requests to a backend that refuses connections; with the RLS down,
// failure_mode_deny answers 500 and its absence lets requests through.
func TestEnvoyRateLimit(t *testing.T) {
	skipShort(t)
	env := rlStart(t)
	t.Run("descriptors", func(t *testing.T) { rlDescriptors(t, env) })
	t.Run("over the limit", func(t *testing.T) { rlOverLimit(t, env) })
	t.Run("admission control", func(t *testing.T) { rlAdmission(t, env) })
	env.e.AssertAccepted(t)
	t.Run("RLS down", func(t *testing.T) { rlDown(t, env) }) // last: it kills xds-server
}

// rlDescriptors: one request of each shape, and the rules it hit: what
// envoy.Descriptors (the product's model of Envoy, which other tests rely
// on) computes from the rate_limits Envoy holds.
func rlDescriptors(t *testing.T, env *rlEnv) {
	actions := rlServedActions(t, env.e)
	for _, tc := range []struct {
		name, method string
		headers      []string
		want         []string
	}{
		{"GET with user and tenant", http.MethodGet, []string{"x-user-id", "alice", "x-tenant", "t1"}, []string{
			"generic_key_gk.tenant_t1+1", "method_get+1", "probe_no+1", "remote_address_127.0.0.1+1", "user_alice+1"}},
		// request_headers: a missing x-user-id drops the user descriptor;
		// with skip_if_absent a missing x-tenant drops only its entry.
		// header_value_match: HEAD is not GET.
		{"HEAD without headers", http.MethodHead, nil, []string{
			"generic_key_gk+1", "probe_no+1", "remote_address_127.0.0.1+1"}},
		// expect_match false: a present x-probe drops the probe descriptor.
		{"x-probe present", http.MethodGet, []string{"x-probe", "1", "x-user-id", "bob"}, []string{
			"generic_key_gk+1", "method_get+1", "remote_address_127.0.0.1+1", "user_bob+1"}},
	} {
		got := rlHitsOf(t, env, tc.method, env.rl+"/", tc.headers...)
		req := envoy.Request{Method: tc.method, Path: "/", Authority: strings.TrimPrefix(env.rl, "http://"),
			RemoteAddress: "127.0.0.1", Headers: map[string]string{}}
		for i := 0; i+1 < len(tc.headers); i += 2 {
			req.Headers[tc.headers[i]] = tc.headers[i+1]
		}
		if model := rlStatKeys(envoy.Descriptors(actions, req)); !slices.Equal(model, tc.want) {
			t.Errorf("%s: envoy.Descriptors of the served rate_limits says %v, Envoy sent %v", tc.name, model, tc.want)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: rules hit %v, want %v\nEnvoy said:\n%s", tc.name, got, tc.want, strings.Join(env.e.Complaints(), "\n"))
		} else {
			t.Logf("%s: %v", tc.name, got)
		}
	}
}

// rlOverLimit: user "limited" may make 3 requests a day.
func rlOverLimit(t *testing.T, env *rlEnv) {
	for i, remaining := range []string{"2", "1", "0"} {
		a := rlDo(t, http.MethodGet, env.rl+"/", "x-user-id", "limited")
		if a.status != http.StatusOK || a.header.Get("RateLimit-Limit") != "3, 3;w=86400" || a.header.Get("RateLimit-Remaining") != remaining {
			t.Fatalf("request %d of user limited: %v; want 200 with RateLimit-Limit \"3, 3;w=86400\" and RateLimit-Remaining %s", i+1, a, remaining)
		}
		if reset, err := strconv.Atoi(a.header.Get("RateLimit-Reset")); err != nil || reset <= 0 || reset > 86400 {
			t.Errorf("request %d: RateLimit-Reset %q, want seconds in (0, 86400]", i+1, a.header.Get("RateLimit-Reset"))
		}
	}
	before := env.e.Stat(t, "cluster.web.ratelimit.over_limit")
	a := rlDo(t, http.MethodGet, env.rl+"/", "x-user-id", "limited")
	if a.status != http.StatusTooManyRequests || a.header.Get("x-envoy-ratelimited") != "true" || a.header.Get("RateLimit-Remaining") != "0" {
		t.Fatalf("request 4 of user limited: %v; want 429 with x-envoy-ratelimited true and RateLimit-Remaining 0", a)
	}
	if after := env.e.Stat(t, "cluster.web.ratelimit.over_limit"); after != before+1 {
		t.Errorf("cluster.web.ratelimit.over_limit %d -> %d, want one more", before, after)
	}
	// Another user is not limited.
	if a := rlDo(t, http.MethodGet, env.rl+"/", "x-user-id", "carol"); a.status != http.StatusOK {
		t.Errorf("user carol: %v, want 200", a)
	}
}

// rlAdmission: every request to dead fails (503, connection refused), so
// admission control rejects a growing share of them (at most 80%).
func rlAdmission(t *testing.T, env *rlEnv) {
	const n = 100
	statuses := map[int]int{}
	for range n {
		statuses[rlDo(t, http.MethodGet, env.shed+"/").status]++
	}
	rejected := env.e.Stat(t, "http.shed.admission_control.rq_rejected")
	refused := env.e.Stat(t, "cluster.dead.upstream_cx_connect_fail")
	t.Logf("%d requests to dead: statuses %v; admission_control.rq_rejected %d, connections refused %d", n, statuses, rejected, refused)
	if statuses[http.StatusServiceUnavailable] != n {
		t.Errorf("statuses %v, want %d x 503", statuses, n)
	}
	// The rejection probability reaches 0.8 after a few failures: about
	// 80 rejections; few is a failure of the filter, not bad luck.
	if rejected < n/4 || rejected+refused < n {
		t.Errorf("admission control rejected %d of %d requests (%d connections refused), want most", rejected, n, refused)
	}
}

// rlDown: xds-server (and so its RLS) is killed; Envoy keeps its config.
func rlDown(t *testing.T, env *rlEnv) {
	if a := rlDo(t, http.MethodGet, env.deny+"/"); a.status != http.StatusOK {
		t.Fatalf("rl-deny with the RLS up: %v, want 200", a)
	}
	before, _ := env.e.Stats()
	env.srv.Kill(t)
	if a := rlDo(t, http.MethodGet, env.deny+"/"); a.status != http.StatusInternalServerError || a.header.Get("x-envoy-ratelimited") != "" {
		t.Errorf("failure_mode_deny with the RLS down: %v, want 500 without x-envoy-ratelimited", a)
	}
	if a := rlDo(t, http.MethodGet, env.rl+"/", "x-user-id", "limited"); a.status != http.StatusOK {
		t.Errorf("failure_mode_deny false with the RLS down: %v, want 200 (even for user limited)", a)
	}
	after, _ := env.e.Stats()
	for _, s := range []string{"cluster.web.ratelimit.error", "cluster.web.ratelimit.failure_mode_allowed"} {
		t.Logf("%s: %d -> %d", s, before[s], after[s])
	}
	if after["cluster.web.ratelimit.error"] < before["cluster.web.ratelimit.error"]+2 ||
		after["cluster.web.ratelimit.failure_mode_allowed"] != before["cluster.web.ratelimit.failure_mode_allowed"]+1 {
		t.Errorf("Envoy did not count two RLS errors, one allowed by the failure mode")
	}
}

// rlServedActions are the rate-limit actions of route configuration rl as
// Envoy holds it (/config_dump).
func rlServedActions(t *testing.T, e *harness.Envoy) [][]envoy.RateLimitAction {
	t.Helper()
	var dump struct {
		Configs []struct {
			RouteConfig json.RawMessage `json:"route_config"`
		} `json:"configs"`
	}
	if err := json.Unmarshal(e.Admin(t, "/config_dump?resource=dynamic_route_configs"), &dump); err != nil {
		t.Fatal(err)
	}
	for _, c := range dump.Configs {
		var a anypb.Any
		var rc routev3.RouteConfiguration
		if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(c.RouteConfig, &a); err != nil {
			t.Fatal(err)
		}
		if err := a.UnmarshalTo(&rc); err != nil {
			t.Fatal(err)
		}
		if rc.GetName() != "rl" {
			continue
		}
		actions, err := envoy.RateLimitActions(rc.GetVirtualHosts()[0].GetRateLimits())
		if err != nil {
			t.Fatal(err)
		}
		return actions
	}
	t.Fatalf("Envoy holds no route configuration rl")
	return nil
}

// rlStatKeys are the rule labels detailed_metric gives descriptors
// ("k1_v1.k2_v2"), each with "+1", sorted.
func rlStatKeys(ds []*rlcommon.RateLimitDescriptor) []string {
	var out []string
	for _, d := range ds {
		var es []string
		for _, e := range d.GetEntries() {
			es = append(es, e.GetKey()+"_"+e.GetValue())
		}
		out = append(out, strings.Join(es, ".")+"+1")
	}
	slices.Sort(out)
	return out
}
