package main

import (
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// hostAllow is the set of Host names the admin port answers, against DNS
// rebinding: a page of evil.test whose name is rebound to 127.0.0.1 is
// same-origin with the admin port, so the cross-origin guard lets its
// requests through; only the Host header still names evil.test.
//
// Allowed: IP literals (a name that was never looked up cannot be
// rebound), localhost, the host of admin.address when it is a name, and
// admin.allowed_hosts (names, "*.example.org" for every name under
// example.org, or "*" for any Host). Names compare case-insensitively,
// without a trailing dot, whatever the port.
type hostAllow struct {
	names    map[string]bool
	suffixes []string // ".example.org" of "*.example.org"
	any      bool
}

// newHostAllow is the hostAllow of admin address addr and the
// admin.allowed_hosts list.
func newHostAllow(addr string, allowed []string) hostAllow {
	a := hostAllow{names: map[string]bool{"localhost": true}}
	if h, _, err := net.SplitHostPort(addr); err == nil && h != "" {
		a.names[canonicalHost(h)] = true
	}
	for _, h := range allowed {
		h = canonicalHost(strings.TrimSpace(h))
		switch {
		case h == "*":
			a.any = true
		case strings.HasPrefix(h, "*."):
			a.suffixes = append(a.suffixes, h[1:])
		case h != "":
			a.names[h] = true
		}
	}
	return a
}

// allows reports whether the admin port answers a request whose Host
// header is hostport. A request without a host name (HTTP/1.0 without
// Host, or ":port") comes from no browser and passes.
func (a hostAllow) allows(hostport string) bool {
	if hostport == "" || a.any {
		return true
	}
	h := hostport
	if host, _, err := net.SplitHostPort(hostport); err == nil {
		h = host
	}
	h = canonicalHost(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"))
	if _, err := netip.ParseAddr(h); err == nil || h == "" {
		return true
	}
	if a.names[h] {
		return true
	}
	for _, s := range a.suffixes {
		if strings.HasSuffix(h, s) {
			return true
		}
	}
	return false
}

// canonicalHost is h lower-cased, without a trailing dot.
func canonicalHost(h string) string { return strings.TrimSuffix(strings.ToLower(h), ".") }

// hostFreePaths answer whatever the Host: they tell only that the process
// runs and is ready, and load balancers and Consul checks probe them by
// any name.
var hostFreePaths = map[string]bool{"/healthz": true, "/readyz": true}

// refuseMisdirected wraps the admin handler: a request whose Host allow
// refuses gets 421 Misdirected Request and is counted in refused, before
// the cross-origin guard and the token (so a rebound page neither
// changes nor reads anything: /v1/*, /ui/*, /debug/*, /metrics). At most
// one line per logEvery is logged, with the Host clipped.
func refuseMisdirected(next http.Handler, allow hostAllow, refused prometheus.Counter, log *slog.Logger) http.Handler {
	var mu sync.Mutex
	var last time.Time
	suppressed := 0
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hostFreePaths[r.URL.Path] || allow.allows(r.Host) {
			next.ServeHTTP(w, r)
			return
		}
		refused.Inc()
		mu.Lock()
		if now := time.Now(); now.Sub(last) >= hostLogEvery {
			log.Warn("admin request refused: its Host is not localhost, an IP address, the admin.address host nor in admin.allowed_hosts (DNS rebinding?)",
				"component", "admin", "host", adminClip(r.Host, 64), "path", adminClip(r.URL.Path, 64), "suppressed", suppressed)
			last, suppressed = now, 0
		} else {
			suppressed++
		}
		mu.Unlock()
		w.Header().Set("Connection", "close")
		http.Error(w, "misdirected request: this admin port answers only the Host names localhost, IP addresses, "+
			"the admin.address host and admin.allowed_hosts", http.StatusMisdirectedRequest)
	})
}

// hostLogEvery spaces the log lines of refused Host names.
const hostLogEvery = 10 * time.Second

// adminClip is s cut to at most n bytes, marked when cut.
func adminClip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// newHostRefused registers admin_host_refused_total.
func newHostRefused(reg prometheus.Registerer) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "admin_host_refused_total",
		Help: "Admin requests refused (421) because their Host is not localhost, an IP address, the admin.address host nor in admin.allowed_hosts (DNS rebinding).",
	})
	reg.MustRegister(c)
	return c
}
