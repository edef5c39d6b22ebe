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
	Held         *prometheus.GaugeVec   // by scope: catalog, 1 while a whole update is held; service, services whose removals are held (Guard)
	Holds        *prometheus.CounterVec // holds begun, by scope (catalog, service) (Guard)
}

// Scopes of a mass-removal hold, the label of xds_discovery_held and
// xds_discovery_holds_total.
const (
	ScopeCatalog = "catalog" // the whole update: more than the fraction of all instances removed
	ScopeService = "service" // one service's removals
)

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
		Held: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "xds_discovery_held",
			Help: "Mass removals held (discovery.mass_removal_guard, discovery.mass_removal_hold): scope=catalog is 1 while a whole update is held, scope=service the number of services whose removals are held.",
		}, []string{"scope"}),
		Holds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "xds_discovery_holds_total",
			Help: "Mass removals held, by scope: catalog (a whole update), service (one service's removals).",
		}, []string{"scope"}),
	}
	for _, scope := range []string{ScopeCatalog, ScopeService} {
		m.Held.WithLabelValues(scope)
		m.Holds.WithLabelValues(scope)
	}
	if reg != nil {
		reg.MustRegister(m.Skipped, m.Errors, m.Stale, m.LastUpdate, m.Snapshots, m.Reloads, m.BlockingReqs, m.Held, m.Holds)
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
