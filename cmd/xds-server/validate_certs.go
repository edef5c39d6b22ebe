package main

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/xds-server/xds-server/certs"
	"github.com/xds-server/xds-server/config"
)

// checkCertificates loads each TLS listener's certificate and key as the
// server would: a pair that does not load, or whose certificate is
// expired or not valid yet at now, is an error (the server would refuse
// to start on it); one that expires within its expiry_warning is a
// warning. Files already reported (unreadable, say) are not read again.
func checkCertificates(cfg config.Config, errs config.Errors, now time.Time) config.Errors {
	var out config.Errors
	for _, l := range []struct {
		prefix string
		tls    config.TLSConfig
	}{{"xds.tls", cfg.XDS.TLS}, {"admin.tls", cfg.Admin.TLS}, {"ratelimit.tls", cfg.RateLimit.TLS}} {
		key := l.prefix + ".cert_file"
		if l.tls.CertFile == "" || l.tls.KeyFile == "" || slices.ContainsFunc(errs, func(e config.FieldError) bool {
			return strings.HasPrefix(e.Key, l.prefix+".")
		}) {
			continue
		}
		warn := l.tls.ExpiryWarning
		if warn == 0 {
			warn = certs.DefaultExpiryWarning
		}
		left, err := certs.CheckPair(l.tls.CertFile, l.tls.KeyFile, now, warn)
		switch {
		case err != nil:
			out = append(out, config.FieldError{Key: key, Value: l.tls.CertFile,
				Reason: strings.TrimPrefix(err.Error(), "certs: ")})
		case left > 0:
			out = append(out, config.FieldError{Key: key, Value: l.tls.CertFile, Warning: true,
				Reason: fmt.Sprintf("certificate expires in %v (within %s.expiry_warning): replace it soon", left.Round(time.Minute), l.prefix)})
		}
	}
	return out
}
