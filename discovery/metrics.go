package discovery

import (
	"time"

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

	// Per Consul datacenter (label datacenter: its name, or
	// LocalDatacenterLabel for the agent's own when none is configured).
	DCStale      *prometheus.GaugeVec   // 1 while the datacenter serves its last known endpoints
	DCStaleSince *prometheus.GaugeVec   // unix seconds it became stale; 0 while it is read
	DCErrors     *prometheus.CounterVec // failed reads of the datacenter
	DCLastUpdate *prometheus.GaugeVec   // unix seconds of its last successful read
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
	m.datacenterMetrics()
	if reg != nil {
		reg.MustRegister(m.Skipped, m.Errors, m.Stale, m.LastUpdate, m.Snapshots, m.Reloads, m.BlockingReqs, m.Held, m.Holds,
			m.HeldServices, m.ServiceHolds, m.DCStale, m.DCStaleSince, m.DCErrors, m.DCLastUpdate)
	}
	return m
}

// datacenterMetrics creates the per-datacenter collectors of m.
func (m *Metrics) datacenterMetrics() {
	dc := []string{"datacenter"}
	m.DCStale = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "xds_discovery_consul_datacenter_stale",
		Help: "1 while the Consul datacenter cannot be read and its last known endpoints are served, by datacenter.",
	}, dc)
	m.DCStaleSince = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "xds_discovery_consul_datacenter_stale_since_timestamp_seconds",
		Help: "Unix time the Consul datacenter became stale; 0 while it is read.",
	}, dc)
	m.DCErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "xds_discovery_consul_datacenter_errors_total",
		Help: "Failed reads (blocking queries) of the Consul datacenter, by datacenter.",
	}, dc)
	m.DCLastUpdate = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "xds_discovery_consul_datacenter_last_success_timestamp_seconds",
		Help: "Unix time of the last successful read of the Consul datacenter.",
	}, dc)
}

// dcStale sets the stale state of datacenter dc: stale since since, or
// read when since is zero.
func (m *Metrics) dcStale(dc string, since time.Time) {
	if m == nil {
		return
	}
	stale, unix := 0.0, 0.0
	if !since.IsZero() {
		stale, unix = 1, float64(since.UnixNano())/1e9
	}
	m.DCStale.WithLabelValues(dc).Set(stale)
	m.DCStaleSince.WithLabelValues(dc).Set(unix)
	m.DCErrors.WithLabelValues(dc)
}

func (m *Metrics) dcFailed(dc string) {
	if m == nil {
		return
	}
	m.DCErrors.WithLabelValues(dc).Inc()
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
