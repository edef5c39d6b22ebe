package certs

import (
	"crypto/x509"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics of the TLS listeners, labelled by listener.
type Metrics struct {
	reloads  *prometheus.CounterVec
	rejects  *prometheus.CounterVec
	notAfter *prometheus.GaugeVec
	expiry   *expiryCollector
}

// NewMetrics registers the metrics on reg (nil: not registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tls_reloads_total", Help: "TLS files reloaded after a change, by listener and result (ok, error: the previous files stay in use).",
		}, []string{"listener", "result"}),
		rejects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tls_client_cert_rejected_total", Help: "Handshakes refused for a missing client certificate or one that does not verify against the client CA, by listener.",
		}, []string{"listener"}),
		notAfter: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tls_certificate_not_after_timestamp_seconds", Help: "Expiry of the certificate a listener serves, in Unix seconds.",
		}, []string{"listener"}),
		expiry: &expiryCollector{now: time.Now, notAfter: map[string]time.Time{}},
	}
	if reg != nil {
		reg.MustRegister(m.reloads, m.rejects, m.notAfter, m.expiry)
	}
	return m
}

func (m *Metrics) reloaded(listener string, ok bool) {
	if m == nil {
		return
	}
	result := "ok"
	if !ok {
		result = "error"
	}
	m.reloads.WithLabelValues(listener, result).Inc()
}

func (m *Metrics) rejected(listener string) {
	if m != nil {
		m.rejects.WithLabelValues(listener).Inc()
	}
}

func (m *Metrics) loaded(listener string, leaf *x509.Certificate) {
	if m != nil && leaf != nil {
		m.notAfter.WithLabelValues(listener).Set(float64(leaf.NotAfter.Unix()))
		m.expiry.set(listener, leaf.NotAfter)
	}
}

// Reloads is the reload counter of listener and result (ok, error), for tests.
func (m *Metrics) Reloads(listener, result string) prometheus.Counter {
	return m.reloads.WithLabelValues(listener, result)
}

// Rejected is the rejected-handshake counter of listener, for tests.
func (m *Metrics) Rejected(listener string) prometheus.Counter {
	return m.rejects.WithLabelValues(listener)
}

var expiryDesc = prometheus.NewDesc("tls_certificate_expiry_seconds",
	"Seconds until the certificate a listener serves expires (negative once it has), by listener; see the *.tls.expiry_warning keys.",
	[]string{"listener"}, nil)

// expiryCollector reports each listener's seconds to expiry when scraped.
type expiryCollector struct {
	now      func() time.Time
	mu       sync.Mutex
	notAfter map[string]time.Time // by listener
}

func (c *expiryCollector) set(listener string, notAfter time.Time) {
	c.mu.Lock()
	c.notAfter[listener] = notAfter
	c.mu.Unlock()
}

// Describe implements prometheus.Collector.
func (c *expiryCollector) Describe(ch chan<- *prometheus.Desc) { ch <- expiryDesc }

// Collect implements prometheus.Collector.
func (c *expiryCollector) Collect(ch chan<- prometheus.Metric) {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	for l, na := range c.notAfter {
		ch <- prometheus.MustNewConstMetric(expiryDesc, prometheus.GaugeValue, na.Sub(now).Seconds(), l)
	}
}

// ExpirySeconds is the seconds to expiry of listener's certificate as
// scraped now, for tests (ok false before one is loaded).
func (m *Metrics) ExpirySeconds(listener string) (float64, bool) {
	m.expiry.mu.Lock()
	defer m.expiry.mu.Unlock()
	na, ok := m.expiry.notAfter[listener]
	return na.Sub(m.expiry.now()).Seconds(), ok
}
