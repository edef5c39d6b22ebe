package main

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/xds-server/xds-server/certs"
	"github.com/xds-server/xds-server/config"
)

// security builds the listeners' TLS material, sharing one set of metrics.
type security struct {
	metrics *certs.Metrics
	log     *slog.Logger
}

func newSecurity(reg prometheus.Registerer, log *slog.Logger) security {
	return security{metrics: certs.NewMetrics(reg), log: log}
}

// serverTLS is the tls.Config of listener name; nil without TLS.
func (s security) serverTLS(name string, t config.TLSConfig) (*tls.Config, error) {
	if !t.Enabled() {
		return nil, nil
	}
	c := t.Server(name)
	c.Logger, c.Metrics = s.log, s.metrics
	srv, err := certs.NewServer(c)
	if err != nil {
		return nil, err
	}
	return srv.TLSConfig(), nil
}

// identityInterceptor refuses, with check's error, calls whose client
// certificate's identities (URI or DNS SANs) check refuses.
func identityInterceptor(check func(ids []string) error) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		ids, _ := certs.GRPCPeer(ctx)
		if err := check(ids); err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
}

// openAdminPaths are served without the bearer token.
var openAdminPaths = map[string]bool{"/healthz": true, "/readyz": true, "/metrics": true}

// openAdminPath reports whether path is served without the bearer token:
// openAdminPaths, and the console's pages and assets (served without
// data when a token is required; its JSON under /ui/api/ needs the token).
func openAdminPath(path string) bool {
	return openAdminPaths[path] || path == "/" ||
		(strings.HasPrefix(path, "/ui/") && !strings.HasPrefix(path, "/ui/api/"))
}

// requireToken wraps the admin handler: with a token file, every path but
// /healthz, /readyz and /metrics needs "Authorization: Bearer <token>"
// (401 otherwise). The token is compared in constant time (of its
// SHA-256, so its length does not leak either) and read again when the
// file changes.
func requireToken(next http.Handler, token *certs.File, unauthorized prometheus.Counter) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if openAdminPath(r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		scheme, given, ok := strings.Cut(r.Header.Get("Authorization"), " ")
		ok = ok && strings.EqualFold(scheme, "Bearer") // the scheme is case-insensitive (RFC 9110)
		given = strings.TrimSpace(given)
		want := sha256.Sum256(token.Bytes())
		got := sha256.Sum256([]byte(strings.TrimSpace(given)))
		if !ok || subtle.ConstantTimeCompare(want[:], got[:]) != 1 {
			unauthorized.Inc()
			w.Header().Set("WWW-Authenticate", `Bearer realm="xds-server admin"`)
			http.Error(w, "unauthorized: this path needs Authorization: Bearer <admin token>", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// newAdminServer is the admin HTTP server: HTTPS with admin.tls, the
// bearer token of admin.token_file, cross-origin browser requests that
// would change state refused (refuseCrossOrigin), foreign Host names
// refused (refuseMisdirected).
func newAdminServer(c config.AdminConfig, sec security, h http.Handler, reg prometheus.Registerer) (*http.Server, error) {
	if c.TokenFile != "" {
		token, err := certs.NewFile(c.TokenFile, 0, nil)
		if err != nil {
			return nil, fmt.Errorf("admin: token file: %w", err)
		}
		unauthorized := prometheus.NewCounter(prometheus.CounterOpts{
			Name: "admin_unauthorized_total", Help: "Admin requests refused (401) for a missing or wrong bearer token.",
		})
		reg.MustRegister(unauthorized)
		h = requireToken(h, token, unauthorized)
	}
	h = refuseCrossOrigin(h, newCrossOriginRefused(reg))                                            // before the token: a forged request is refused whatever it carries
	h = refuseMisdirected(h, newHostAllow(c.Address, c.AllowedHosts), newHostRefused(reg), sec.log) // DNS rebinding: before all
	tc, err := sec.serverTLS("admin", c.TLS)
	if err != nil {
		return nil, err
	}
	return &http.Server{Handler: h, TLSConfig: tc, ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout: c.ReadTimeout, WriteTimeout: c.WriteTimeout, IdleTimeout: c.IdleTimeout}, nil
}

// serveAdmin serves HTTPS when the server has a TLS config, else HTTP.
func serveAdmin(s *http.Server, lis net.Listener) error {
	if s.TLSConfig != nil {
		return s.ServeTLS(lis, "", "") // the certificate comes from TLSConfig.GetCertificate
	}
	return s.Serve(lis)
}
