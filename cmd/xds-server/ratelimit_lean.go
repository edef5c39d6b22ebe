package main

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/xds-server/xds-server/certs"
	"github.com/xds-server/xds-server/config"
	"github.com/xds-server/xds-server/ratelimit"
)

// Keepalive of the lean server, as grpc-go's server defaults: a
// connection idle for leanPingAfter gets a PING, and is closed if the
// answer takes longer than leanPingTimeout.
const (
	leanPingAfter   = 2 * time.Hour
	leanPingTimeout = 20 * time.Second
	// leanStreamWindow is the receive window per call, bytes: a request
	// is a few hundred bytes, and a message larger than the window waits
	// for our WINDOW_UPDATEs, so memory per call stays bounded.
	leanStreamWindow = 1 << 20
)

// newLeanServer is ratelimit.server lean: Go's HTTP/2 server (h2c with
// prior knowledge, or TLS with ALPN h2) serving ShouldRateLimit only.
func newLeanServer(cfg config.RateLimitConfig, svc *ratelimit.Service, log *slog.Logger, reg prometheus.Registerer, sec security) (*http.Server, error) {
	tc, err := sec.serverTLS("ratelimit", cfg.TLS)
	if err != nil {
		return nil, err
	}
	lc := ratelimit.LeanConfig{Registerer: reg}
	if ids := cfg.Authorization.Identities; tc != nil && len(ids) > 0 {
		check := newIdentityCheck(ids, reg, log.With("component", "ratelimit"))
		lc.Authorize = func(_ context.Context, cs *tls.ConnectionState) error {
			var got []string
			if cs != nil {
				got = certs.Identities(certs.PeerCertificate(*cs))
			}
			return check(got)
		}
	}
	h, err := svc.LeanHandler(lc)
	if err != nil {
		return nil, err
	}
	var p http.Protocols
	if tc != nil {
		p.SetHTTP2(true)
		tc = tc.Clone()
		tc.NextProtos = []string{"h2"}
	} else {
		p.SetUnencryptedHTTP2(true)
	}
	return &http.Server{Handler: h, TLSConfig: tc, Protocols: &p, ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(log.With("component", "ratelimit").Handler(), slog.LevelDebug),
		HTTP2: &http.HTTP2Config{MaxConcurrentStreams: int(cfg.MaxStreams), MaxReceiveBufferPerStream: leanStreamWindow,
			MaxReceiveBufferPerConnection: 4 * leanStreamWindow, SendPingTimeout: leanPingAfter, PingTimeout: leanPingTimeout}}, nil
}

// newIdentityCheck returns the check of ratelimit.authorization.identities
// on a client certificate's identities: PermissionDenied, counted and
// logged, when none matches a glob.
func newIdentityCheck(globs []string, reg prometheus.Registerer, log *slog.Logger) func(ids []string) error {
	denied := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "ratelimit_authz_denied_total",
		Help: "Rate-limit calls refused because the client certificate matches no ratelimit.authorization.identities glob.",
	})
	reg.MustRegister(denied)
	return func(ids []string) error {
		for _, id := range ids {
			if certs.MatchAny(globs, id) {
				return nil
			}
		}
		denied.Inc()
		log.Warn("rate-limit call refused: no ratelimit.authorization.identities glob matches the client certificate", "identities", ids)
		return status.Errorf(codes.PermissionDenied, "ratelimit: identity %q is not in ratelimit.authorization.identities", strings.Join(ids, ", "))
	}
}
