package discovery

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the discovery collectors. A nil *Metrics records nothing.
type Metrics struct {
	Skipped      *prometheus.CounterVec // bad entries skipped, by source and reason
	Errors       *prometheus.CounterVec // errors talking to the source, by source
	Stale        *prometheus.GaugeVec   // 1 while the source serves its last known data after errors
	LastUpdate   *prometheus.GaugeVec   // unix seconds of the last successful update, by source
	Snapshots    *prometheus.CounterVec // snapshots emitted, by source
	Reloads      *prometheus.CounterVec // static file reloads, by result (ok|error)
	BlockingReqs *prometheus.CounterVec // Consul blocking queries, by kind (catalog|health)
	Held         prometheus.Gauge       // 1 while a whole update is held (Guard)
	Holds        prometheus.Counter     // whole-update holds begun (Guard)
	HeldServices prometheus.Gauge       // services whose removals are held (Guard)
	ServiceHolds prometheus.Counter     // service holds begun, one per service (Guard)
}

// NewMetrics creates the discovery collectors and registers them with reg
// (nil reg: not registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Skipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "xds_discovery_skipped_entries_total",
			Help: "Bad service or endpoint entries skipped during normalization, by source and reason.",
		}, []string{"source", "reason"}),
		Errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "xds_discovery_errors_total",
			Help: "Errors reading from the discovery source, by source.",
		}, []string{"source"}),
		Stale: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "xds_discovery_stale",
			Help: "1 while the source keeps serving its last known endpoints because it cannot be read.",
		}, []string{"source"}),
		LastUpdate: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "xds_discovery_last_success_timestamp_seconds",
			Help: "Unix time of the last successful read from the source.",
		}, []string{"source"}),
		Snapshots: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "xds_discovery_snapshots_total",
			Help: "Complete snapshots emitted by the source.",
		}, []string{"source"}),
		Reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "xds_discovery_static_reloads_total",
			Help: "Static endpoints file reloads, by result (ok or error).",
		}, []string{"result"}),
		BlockingReqs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "xds_discovery_consul_queries_total",
			Help: "Consul blocking queries issued, by kind (catalog or health).",
		}, []string{"kind"}),
		Held: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "xds_discovery_held",
			Help: "1 while a whole discovery update is held because it removes more than discovery.mass_removal_guard of all instances (discovery.mass_removal_hold).",
		}),
		Holds: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "xds_discovery_holds_total",
			Help: "Whole discovery updates held by the mass-removal guard.",
		}),
		HeldServices: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "xds_discovery_held_services",
			Help: "Services whose removals are held because they lose more than discovery.mass_removal_guard of their instances (the rest of each update is applied).",
		}),
		ServiceHolds: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "xds_discovery_service_holds_total",
			Help: "Holds of one service's removals begun by the mass-removal guard.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.Skipped, m.Errors, m.Stale, m.LastUpdate, m.Snapshots, m.Reloads, m.BlockingReqs, m.Held, m.Holds,
			m.HeldServices, m.ServiceHolds)
	}
	return m
}

func (m *Metrics) skipped(source string, ps []Problem) {
	if m == nil {
		return
	}
	for _, p := range ps {
		m.Skipped.WithLabelValues(source, p.Reason).Inc()
	}
}

func (m *Metrics) failed(source string) {
	if m == nil {
		return
	}
	m.Errors.WithLabelValues(source).Inc()
	m.Stale.WithLabelValues(source).Set(1)
}

func (m *Metrics) succeeded(source string, unix float64) {
	if m == nil {
		return
	}
	m.Stale.WithLabelValues(source).Set(0)
	m.LastUpdate.WithLabelValues(source).Set(unix)
}

func (m *Metrics) emitted(source string) {
	if m == nil {
		return
	}
	m.Snapshots.WithLabelValues(source).Inc()
}
