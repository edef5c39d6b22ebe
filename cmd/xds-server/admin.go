package main

import (
	"net"
	"net/http"
	"net/http/pprof"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/xds-server/xds-server/xds"
)

// adminHandler serves /healthz, /readyz, /metrics, the xDS debug pages and
// Go's profiles (/debug/pprof/, but not cmdline), plus what more adds (the weights' push
// API and debug page).
func adminHandler(srv *xds.Server, reg *prometheus.Registry, more ...func(*http.ServeMux)) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !srv.Ready() {
			http.Error(w, "not ready: waiting for the first discovery snapshot", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ready\n"))
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.Handle("GET /debug/", srv.Handler())
	mux.HandleFunc("GET /debug/pprof/", pprof.Index) // heap, goroutine, allocs, block, mutex, ...
	// /debug/pprof/cmdline is not served: the command line may carry secrets.
	mux.HandleFunc("GET /debug/pprof/cmdline", http.NotFound)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	for _, add := range more {
		add(mux)
	}
	return mux
}

// consoleURL is the web console's address on admin listener addr:
// http(s)://host:port/ui/, with localhost for an unspecified host
// (0.0.0.0, ::), which is reachable from the machine itself.
func consoleURL(addr net.Addr, tls bool) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		host, port = addr.String(), ""
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "localhost"
	}
	scheme := "http"
	if tls {
		scheme = "https"
	}
	if port == "" {
		return scheme + "://" + host + "/ui/"
	}
	return scheme + "://" + net.JoinHostPort(host, port) + "/ui/"
}
