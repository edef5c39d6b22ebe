package drain

import (
	"net/http"
	"time"
)

// who names the client of an admin request for the log: its address and,
// with a client certificate, the certificate's subject. Never a token.
func who(r *http.Request) []any {
	attrs := []any{"remote", r.RemoteAddr}
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		c := r.TLS.PeerCertificates[0]
		id := c.Subject.CommonName
		if len(c.URIs) > 0 {
			id = c.URIs[0].String()
		} else if len(c.DNSNames) > 0 {
			id = c.DNSNames[0]
		}
		attrs = append(attrs, "client", id)
	}
	return attrs
}

// logDrain writes the one line of an admin drain request that changed something.
func (s *Manager) logDrain(r *http.Request, a Admin) {
	until := "deleted"
	if !a.Until.IsZero() {
		until = a.Until.UTC().Format(time.RFC3339)
	}
	attrs := append(targetAttrs(a.Target), "until", until)
	s.log.Info("admin drain", append(attrs, who(r)...)...)
}

// logUndrain writes the one line of an admin undrain request.
func (s *Manager) logUndrain(r *http.Request, t Target, deleted bool) {
	attrs := append(targetAttrs(t), "deleted", deleted)
	s.log.Info("admin undrain", append(attrs, who(r)...)...)
}

func targetAttrs(t Target) []any {
	var attrs []any
	if t.Service != "" {
		attrs = append(attrs, "service", t.Service)
	}
	if t.Endpoint != "" {
		attrs = append(attrs, "endpoint", t.Endpoint)
	}
	if t.Node != "" {
		attrs = append(attrs, "node", t.Node)
	}
	return attrs
}
