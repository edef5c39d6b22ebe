package ha

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/xds-server/xds-server/internal/metricreg"
)

// Metrics are every HA metric, registered once and shared by the HA
// parts (drains here, the weights summaries and leader elsewhere).
type Metrics struct {
	// Writes counts Consul KV writes (a transaction counts once) by
	// kind: drain_put, drain_delete, drain_expire, drain_restore (a transaction), and the weights
	// part's own kinds.
	Writes *prometheus.CounterVec
	// Errors counts failed Consul operations by op: drain_put,
	// drain_delete, drain_expire, drain_restore, watch_drains, decode_drain, and the
	// weights part's own ops.
	Errors *prometheus.CounterVec
	// Leader is 1 while this replica is the weights leader, else 0.
	Leader prometheus.Gauge
	// SummaryAge is the age in seconds of the last load summary seen per
	// replica; a replica that is gone must be deleted from it.
	SummaryAge *prometheus.GaugeVec
}

// NewMetrics returns the HA metrics, registered with reg (nil: not
// registered).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		Writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "xds_ha_consul_writes_total",
			Help: "Consul KV writes (a transaction counts once) of the HA state, by kind.",
		}, []string{"kind"}),
		Errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "xds_ha_errors_total",
			Help: "Failed Consul operations of the HA state, by operation.",
		}, []string{"op"}),
		Leader: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "xds_ha_leader",
			Help: "1 while this replica is the weights leader, else 0.",
		}),
		SummaryAge: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "xds_ha_summary_age_seconds",
			Help: "Age of the last load summary seen from each replica, in seconds.",
		}, []string{"replica"}),
	}
	if err := metricreg.Register(reg, m.Writes, m.Errors, m.Leader, m.SummaryAge); err != nil {
		return nil, fmt.Errorf("ha: metrics: %w", err)
	}
	return m, nil
}
