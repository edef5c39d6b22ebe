package ratelimit

import (
	"context"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/xds-server/xds-server/internal/metricreg"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// UnknownDomainHeader names the domain of a request no rule of the
// configuration knows: a response header on HTTP, a gRPC response header
// (metadata) over RLS. The answer itself stays OK, as Envoy expects.
const UnknownDomainHeader = "x-ratelimit-unknown-domain"

// MaxUnknownDomainLabels bounds the domain label of
// ratelimit_unknown_domain_total: the first 100 distinct unknown domains
// get their own series, later ones count as "other".
const MaxUnknownDomainLabels = 100

// HasDomain reports whether c has rules for domain.
func (c *Config) HasDomain(domain string) bool {
	_, ok := c.domains[domain]
	return ok
}

// unknownDomains counts requests for unknown domains with a bounded label set.
type unknownDomains struct {
	total *prometheus.CounterVec
	mu    sync.Mutex
	seen  map[string]bool // at most MaxUnknownDomainLabels
}

func newUnknownDomains(reg prometheus.Registerer) (*unknownDomains, error) {
	u := &unknownDomains{seen: map[string]bool{}, total: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ratelimit_unknown_domain_total",
		Help: "Requests for a domain no rule knows (answered OK), by domain: the first 100 distinct domains, then \"other\".",
	}, []string{"domain"})}
	if err := metricreg.Register(reg, u.total); err != nil {
		return nil, err
	}
	return u, nil
}

// label returns the metric label of domain, remembering it while there is room.
func (u *unknownDomains) label(domain string) string {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.seen[domain] {
		return domain
	}
	if len(u.seen) >= MaxUnknownDomainLabels {
		return "other"
	}
	u.seen[domain] = true
	return domain
}

// checkDomain counts a request for an unknown domain and, on a gRPC call,
// names it in a response header. It reports whether the domain is unknown.
func (s *Service) checkDomain(ctx context.Context, domain string) bool {
	if s.Config().HasDomain(domain) {
		return false
	}
	s.unknown.total.WithLabelValues(s.unknown.label(domain)).Inc()
	if grpc.ServerTransportStreamFromContext(ctx) != nil {
		_ = grpc.SetHeader(ctx, metadata.Pairs(UnknownDomainHeader, domain))
	}
	return true
}
