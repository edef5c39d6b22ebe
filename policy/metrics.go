package policy

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/xds-server/xds-server/internal/metricreg"
)

// Metrics are the policy collectors. A nil *Metrics records nothing.
type Metrics struct {
	Rejections *prometheus.CounterVec // entry versions rejected, by kind and reason
	Rejected   *prometheus.GaugeVec   // entries whose current version is rejected, by kind
	Entries    *prometheus.GaugeVec   // entries in use (each its last good version), by kind
	Reads      *prometheus.CounterVec // changed lists read and applied, by kind
	Failures   *prometheus.CounterVec // failed blocking queries, by kind
}

// NewMetrics creates the policy collectors and registers them with reg
// (nil reg: not registered).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	k := []string{"kind"}
	m := &Metrics{
		Rejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "xds_policy_rejections_total",
			Help: "Consul config entry versions rejected (the last good version kept), by kind and reason.",
		}, []string{"kind", "reason"}),
		Rejected: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "xds_policy_rejected_entries",
			Help: "Consul config entries whose current version is rejected, by kind.",
		}, k),
		Entries: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "xds_policy_entries",
			Help: "Consul config entries in use (each its last good version), by kind.",
		}, k),
		Reads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "xds_policy_consul_reads_total",
			Help: "Changed lists of Consul config entries read and applied, by kind.",
		}, k),
		Failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "xds_policy_consul_failures_total",
			Help: "Failed blocking queries on Consul config entries, by kind.",
		}, k),
	}
	for _, kind := range Kinds {
		m.Rejected.WithLabelValues(kind)
		m.Entries.WithLabelValues(kind)
		m.Reads.WithLabelValues(kind)
		m.Failures.WithLabelValues(kind)
	}
	if err := metricreg.Register(reg, m.Rejections, m.Rejected, m.Entries, m.Reads, m.Failures); err != nil {
		return nil, err
	}
	return m, nil
}

// applied records one applied list of kind.
func (m *Metrics) applied(kind string, s *Set, up Update) {
	if m == nil {
		return
	}
	m.Reads.WithLabelValues(kind).Inc()
	for _, r := range up.Rejected {
		m.Rejections.WithLabelValues(kind, r.Reason).Inc()
	}
	m.Entries.WithLabelValues(kind).Set(float64(s.Counts()[kind]))
	n := 0
	for _, r := range s.Rejections() {
		if r.Kind == kind {
			n++
		}
	}
	m.Rejected.WithLabelValues(kind).Set(float64(n))
}

func (m *Metrics) failed(kind string) {
	if m == nil {
		return
	}
	m.Failures.WithLabelValues(kind).Inc()
}
