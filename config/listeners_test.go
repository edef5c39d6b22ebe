package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xds-server/xds-server/envoy"
)

// listenersBase is a valid config with a consul source filtered to web
// and api, to which the cases append a listeners: section.
const listenersBase = `
discovery:
  source: consul
  consul: { services: [web, api] }
`

const goodListeners = `
listeners:
  - name: ingress
    address: 0.0.0.0:10000
    nodes: ["edge-*"]
    routes:
      - { prefix: /api, service: api, timeout: 5s, retries: 2 }
      - { path: /healthz, service: web }
      - { prefix: /, headers: [{ name: x-canary, exact: "1" }], service: web }
      - { prefix: /, service: web }
    ratelimit:
      domain: edge
      timeout: 100ms
      actions:
        - [ { remote_address: {} } ]
        - [ { generic_key: { value: edge } }, { request_headers: { header_name: x-user-id, descriptor_key: user } } ]
        - [ { header_value_match: { descriptor_value: get, headers: [{ name: ":method", exact: GET }] } } ]
    admission_control: { k: 2, aggression: 1.0, sampling_window: 30s, rps_threshold: 1, max_rejection_probability: 0.8 }
`

// TestListenersConfig loads a complete listeners: section and checks its
// translation input.
func TestListenersConfig(t *testing.T) {
	cfg, err := loadArgs(t, "--config", writeConfig(t, listenersBase+goodListeners), "--ratelimit.address", ":18081")
	if err != nil {
		t.Fatal(err)
	}
	p := &problems{}
	ls := cfg.XDSListeners(p)
	if len(p.errs) > 0 {
		t.Error(p.errs)
	}
	if len(ls) != 1 {
		t.Fatalf("%d listeners", len(ls))
	}
	l := ls[0]
	if l.Name != "ingress" || l.Nodes[0] != "edge-*" || len(l.Routes) != 4 || l.Routes[0].Timeout != 5*time.Second ||
		l.Routes[0].Retries != 2 || l.Routes[2].Headers[0].Exact != "1" {
		t.Errorf("listener %+v", l)
	}
	if rl := l.RateLimit; rl == nil || rl.Domain != "edge" || rl.Timeout != 100*time.Millisecond || len(rl.Actions) != 3 ||
		!rl.Actions[0][0].RemoteAddress || rl.Actions[1][1].RequestHeaders.DescriptorKey != "user" ||
		rl.Actions[2][0].HeaderValueMatch.Headers[0].Name != ":method" {
		t.Errorf("ratelimit %+v", l.RateLimit)
	}
	if ac := l.AdmissionControl; ac == nil || ac.SuccessRateThreshold != 0.5 || ac.RPSThreshold != 1 || ac.SamplingWindow != 30*time.Second {
		t.Errorf("admission control %+v", l.AdmissionControl)
	}
	if _, err := envoy.BuildHTTPListener(l.HTTPListener); err != nil {
		t.Error(err)
	}
	if got := cfg.RateLimit.Advertised(); got != "127.0.0.1:18081" {
		t.Errorf("advertised RLS address %q", got)
	}
	if got := cfg.ServerConfig().RateLimitAddress; got != "127.0.0.1:18081" {
		t.Errorf("xds RateLimitAddress %q", got)
	}
}

func TestRateLimitAdvertised(t *testing.T) {
	for _, tc := range []struct{ addr, adv, want string }{
		{":18081", "", "127.0.0.1:18081"}, {"0.0.0.0:1", "", "127.0.0.1:1"}, {"[::]:1", "", "127.0.0.1:1"},
		{"10.0.0.1:1", "", "10.0.0.1:1"}, {":1", "rls.internal:2", "rls.internal:2"},
	} {
		r := RateLimitSection{RateLimitConfig: RateLimitConfig{Address: tc.addr}, AdvertiseAddress: tc.adv}
		if got := r.Advertised(); got != tc.want {
			t.Errorf("advertised(%q, %q) = %q, want %q", tc.addr, tc.adv, got, tc.want)
		}
	}
}

// TestListenersValidation checks that validate reports each problem with
// its key path and reason.
func TestListenersValidation(t *testing.T) {
	one := func(body string) string {
		return "\nlisteners:\n  - name: ingress\n    address: 0.0.0.0:10000\n" + body
	}
	route := "    routes: [{ prefix: /, service: web }]\n"
	for name, tc := range map[string]struct {
		base, listeners string
		want            []string
	}{
		"unknown service": {listenersBase, one("    routes: [{ prefix: /, service: web }, { prefix: /x, service: foo }]\n"),
			[]string{`listeners[0].routes[1].service: foo: is not a known service (known: api, web)`}},
		"static file services": {"\ndiscovery: { source: static, static: { file: STATIC } }\n", one("    routes: [{ prefix: /, service: nope }]\n"),
			[]string{`listeners[0].routes[0].service: nope: is not a known service (known: greeter)`}},
		"duplicate address": {listenersBase, one(route) + "  - { name: other, address: 0.0.0.0:10000, routes: [{ prefix: /, service: web }] }\n",
			[]string{`listeners[1].address: 0.0.0.0:10000: is also the address of listeners[0]`}},
		"duplicate name": {listenersBase, one(route) + "  - { name: ingress, address: 0.0.0.0:10001, routes: [{ prefix: /, service: web }] }\n",
			[]string{`listeners[1].name: ingress: is also the name of listeners[0]`}},
		"name of a service": {listenersBase, "\nlisteners: [{ name: web, address: 0.0.0.0:1, routes: [{ prefix: /, service: web }] }]\n",
			[]string{`listeners[0].name: web: is also a service name`}},
		"bad duration": {listenersBase, one("    routes: [{ prefix: /, service: web, timeout: 5 }]\n"),
			[]string{`listeners[0].routes[0].timeout: 5: a duration needs a unit (like 50ms, 5s or 1m)`}},
		"bad glob": {listenersBase, one(route + "    nodes: [\"edge-[\"]\n"), []string{`listeners[0].nodes[0]: `, "unterminated"}},
		"k and threshold": {listenersBase, one(route + "    admission_control: { k: 2, success_rate_threshold: 0.5 }\n"),
			[]string{"listeners[0].admission_control: set k or success_rate_threshold (= 1/k), not both"}},
		"k below 1": {listenersBase, one(route + "    admission_control: { k: 0.5 }\n"), []string{"listeners[0].admission_control.k: 0.5: is below 1"}},
		"empty actions": {listenersBase, one(route + "    ratelimit: { domain: edge, actions: [] }\n"),
			[]string{"listeners[0].ratelimit.actions: at least one"}},
		"empty descriptor": {listenersBase, one(route + "    ratelimit: { domain: edge, actions: [[]] }\n"),
			[]string{"listeners[0].ratelimit.actions[0]: a descriptor needs at least one action"}},
		"ratelimit without domain": {listenersBase, one(route + "    ratelimit: { actions: [[{ remote_address: {} }]] }\n"),
			[]string{"listeners[0].ratelimit.domain: is empty"}},
		"unknown key": {listenersBase, one("    routes: [{ prefx: /, service: web }]\n"),
			[]string{"listeners[0].routes[0].prefx: unknown key (did you mean prefix?) (allowed here: headers, path, per_try_timeout, prefix"}},
		"unknown action key": {listenersBase, one(route + "    ratelimit: { domain: d, actions: [[{ remote_adress: {} }]] }\n"),
			[]string{"listeners[0].ratelimit.actions[0][0].remote_adress: unknown key"}},
		"no route matcher": {listenersBase, one("    routes: [{ service: web }]\n"),
			[]string{"listeners[0].routes[0]: exactly one of prefix, path and safe_regex"}},
		"bad address": {listenersBase, "\nlisteners: [{ name: x, address: nowhere, routes: [{ prefix: /, service: web }] }]\n",
			[]string{`listeners[0].address: "nowhere" is not host:port`}},
		"routes not a list": {listenersBase, one("    routes: { prefix: / }\n"), []string{"listeners[0].routes: {...}: must be a list"}},
	} {
		t.Run(name, func(t *testing.T) {
			static := filepath.Join(t.TempDir(), "endpoints.yaml")
			if err := os.WriteFile(static, []byte("services:\n  - name: greeter\n    endpoints: [{ address: 10.0.0.1, port: 80 }]\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			body := strings.ReplaceAll(tc.base+tc.listeners, "STATIC", static)
			_, err := loadArgs(t, "--config", writeConfig(t, body))
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\nlacks %q", err, w)
				}
			}
		})
	}
}
