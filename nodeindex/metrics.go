package nodeindex

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/xds-server/xds-server/internal/metricreg"
)

// consulMetrics are Consul's collectors.
type consulMetrics struct {
	repairs *prometheus.CounterVec // corrupt tables written back, by how (repaired, rebuilt)
	lost    prometheus.Counter     // this replica's holds another node took in a repaired table
}

func newConsulMetrics(reg prometheus.Registerer) (consulMetrics, error) {
	m := consulMetrics{
		repairs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "xds_subset_index_tables_repaired_total",
			Help: "Corrupt client index tables in Consul KV written back by this replica, by how: repaired (bad slots dropped) or rebuilt (the value did not parse).",
		}, []string{"how"}),
		lost: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "xds_subset_index_holds_lost_total",
			Help: "Nodes of this replica whose client index another node has in the shared table (after a corrupt table was rebuilt).",
		}),
	}
	var err error
	// Another table of this process may have registered them: reuse those.
	if m.repairs, err = metricreg.Reuse(reg, m.repairs); err != nil {
		return m, fmt.Errorf("nodeindex: consul: metrics: %w", err)
	}
	if m.lost, err = metricreg.Reuse(reg, m.lost); err != nil {
		return m, fmt.Errorf("nodeindex: consul: metrics: %w", err)
	}
	return m, nil
}
