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
	// attempts counts read-modify-write attempts by result: written,
	// unchanged (nothing to write), conflict (another replica wrote
	// first: read again), failed (an error; the round ends).
	attempts *prometheus.CounterVec
	// valueBytes is the size of each table value written (the
	// transaction carries it twice, base64-encoded: see Consul).
	valueBytes prometheus.Histogram
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
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "xds_subset_index_attempts_total",
			Help: "Read-modify-write attempts on client index tables in Consul KV, by result: written, unchanged, conflict (another replica wrote first), failed.",
		}, []string{"result"}),
		valueBytes: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "xds_subset_index_value_bytes",
			Help:    "Size of each client index table value written to Consul KV (gzipped; a write's transaction carries it twice, base64-encoded: past about 190 KiB it exceeds Consul's default 512 KiB txn_max_req_len).",
			Buckets: []float64{4 << 10, 16 << 10, 32 << 10, 64 << 10, 96 << 10, 128 << 10, 160 << 10, 192 << 10, 256 << 10, 384 << 10, 512 << 10},
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
	if m.attempts, err = metricreg.Reuse(reg, m.attempts); err != nil {
		return m, fmt.Errorf("nodeindex: consul: metrics: %w", err)
	}
	if m.valueBytes, err = metricreg.Reuse(reg, m.valueBytes); err != nil {
		return m, fmt.Errorf("nodeindex: consul: metrics: %w", err)
	}
	return m, nil
}
