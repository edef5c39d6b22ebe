package config

import (
	"testing"

	"github.com/xds-server/xds-server/envoy"
)

// TestRateLimitEnvoyTLS: the generated RLS cluster speaks TLS exactly when
// the rate-limit listener serves it, with a client certificate when the
// listener asks for one.
func TestRateLimitEnvoyTLS(t *testing.T) {
	for name, tc := range map[string]struct {
		tls  TLSConfig
		want *envoy.RateLimitTLS
	}{
		"plaintext": {TLSConfig{}, nil},
		"TLS":       {TLSConfig{CertFile: "/s.crt", KeyFile: "/s.key"}, &envoy.RateLimitTLS{}},
		"mTLS":      {TLSConfig{CertFile: "/s.crt", KeyFile: "/s.key", ClientCAFile: "/ca.pem"}, &envoy.RateLimitTLS{ClientCertificate: true}},
	} {
		t.Run(name, func(t *testing.T) {
			var c Config
			c.RateLimit.TLS = tc.tls
			got := c.ServerConfig().RateLimitTLS
			if (got == nil) != (tc.want == nil) || got != nil && *got != *tc.want {
				t.Errorf("RateLimitTLS %+v, want %+v", got, tc.want)
			}
		})
	}
}
