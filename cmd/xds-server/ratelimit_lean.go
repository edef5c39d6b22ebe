package main

import (
	"crypto/tls"
	"log/slog"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/xds-server/xds-server/certs"
	"github.com/xds-server/xds-server/config"
	"github.com/xds-server/xds-server/h2rpc"
	"github.com/xds-server/xds-server/ratelimit"
)

// newLeanServer is ratelimit.server lean: h2rpc's HTTP/2 server (h2c
// with prior knowledge, or TLS with ALPN h2) serving ShouldRateLimit
// only.
func newLeanServer(cfg config.RateLimitConfig, svc *ratelimit.Service, log *slog.Logger, reg prometheus.Registerer, sec security) (*h2rpc.Server, error) {
	tc, err := sec.serverTLS("ratelimit", cfg.TLS)
	if err != nil {
		return nil, err
	}
	hc := h2rpc.Config{Method: ratelimit.RLSPath, Handler: svc.Call, TLS: tc, MaxStreams: cfg.MaxStreams,
		Name: "ratelimit", Registerer: reg, Logger: log.With("component", "ratelimit")}
	if ids := cfg.Authorization.Identities; tc != nil && len(ids) > 0 {
		check := newIdentityCheck(ids, reg, log.With("component", "ratelimit"))
		hc.Authorize = func(cs *tls.ConnectionState) error {
			var got []string
			if cs != nil {
				got = certs.Identities(certs.PeerCertificate(*cs))
			}
			return check(got)
		}
	}
	return h2rpc.New(hc)
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
