package main

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
)

// refuseCrossOrigin wraps the admin handler: a request with a non-safe
// method (POST, PUT, PATCH, DELETE: /v1/drain, /v1/load, /v1/ratelimit,
// /json) that a browser marks as cross-origin (Sec-Fetch-Site other than
// same-origin or none, or an Origin whose host is not the request's Host)
// is refused with 403 and counted in refused, so a page on another site
// cannot drain the fleet through an operator's browser. GET, HEAD and
// OPTIONS pass (they change nothing), and so do clients that send neither
// header (curl, scripts): net/http.CrossOriginProtection decides.
func refuseCrossOrigin(next http.Handler, refused prometheus.Counter) http.Handler {
	p := http.NewCrossOriginProtection()
	p.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		refused.Inc()
		http.Error(w, "forbidden: cross-origin request refused (the admin API takes state changes from its own console or from non-browser clients only)", http.StatusForbidden)
	}))
	return p.Handler(next)
}

// newCrossOriginRefused registers admin_cross_origin_refused_total.
func newCrossOriginRefused(reg prometheus.Registerer) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "admin_cross_origin_refused_total",
		Help: "Admin requests with a non-safe method refused (403) because a browser sent them from another origin.",
	})
	reg.MustRegister(c)
	return c
}
