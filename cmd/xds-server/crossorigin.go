package main

import (
	"net/http"
	"path"

	"github.com/prometheus/client_golang/prometheus"
)

// refuseCrossOrigin wraps the admin handler: a request with a non-safe
// method (POST, PUT, PATCH, DELETE: /v1/drain, /v1/load, /v1/ratelimit,
// /json) that a browser marks as cross-origin (Sec-Fetch-Site other than
// same-origin or none, or an Origin whose host is not the request's Host)
// is refused with 403 and counted in refused, so a page on another site
// cannot drain the fleet through an operator's browser. So is a read of a
// costly profile (costlyProfiles), which a page could otherwise start with
// an <img> or a link. Other GET, HEAD and OPTIONS requests pass (they
// change nothing), and so do clients that send neither header (curl,
// scripts, go tool pprof): net/http.CrossOriginProtection decides.
func refuseCrossOrigin(next http.Handler, refused prometheus.Counter) http.Handler {
	p := http.NewCrossOriginProtection()
	deny := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		refused.Inc()
		http.Error(w, "forbidden: cross-origin request refused (the admin API takes state changes and profiles from its own console or from non-browser clients only)", http.StatusForbidden)
	})
	p.SetDenyHandler(deny)
	guarded := p.Handler(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if costlyProfiles[path.Clean(r.URL.Path)] && p.Check(asUnsafe(r)) != nil {
			deny.ServeHTTP(w, r)
			return
		}
		guarded.ServeHTTP(w, r)
	})
}

// costlyProfiles are the /debug/pprof reads that cost the server CPU for
// their duration (seconds=, 30 s by default for the CPU profile): a
// browser's cross-origin GET of one is refused like a state change.
var costlyProfiles = map[string]bool{
	"/debug/pprof/profile": true,
	"/debug/pprof/trace":   true,
}

// asUnsafe is a shallow copy of r with the method POST, so that
// CrossOriginProtection.Check, which passes every safe method, judges its
// headers as it would a state change's.
func asUnsafe(r *http.Request) *http.Request {
	c := r.WithContext(r.Context())
	c.Method = http.MethodPost
	return c
}

// newCrossOriginRefused registers admin_cross_origin_refused_total.
func newCrossOriginRefused(reg prometheus.Registerer) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "admin_cross_origin_refused_total",
		Help: "Admin requests refused (403) because a browser sent them from another origin: non-safe methods, and reads of the CPU profile or the trace.",
	})
	reg.MustRegister(c)
	return c
}
