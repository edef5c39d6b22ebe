package xds

import (
	"fmt"

	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/xds-server/xds-server/internal/metricreg"
	"github.com/xds-server/xds-server/xdscache"
)

// metrics are the xDS collectors.
type metrics struct {
	nodes         prometheus.Gauge
	streams       *prometheus.GaugeVec
	pushes        *prometheus.CounterVec
	pushLatency   *prometheus.HistogramVec
	nacks         *prometheus.CounterVec
	reconciles    prometheus.Counter
	reconcileDur  prometheus.Histogram
	stages        *prometheus.HistogramVec // xds_change_stage_seconds, by stage (stages.go)
	snapshotSets  prometheus.Counter
	buildErrors   prometheus.Counter
	endpoints     *prometheus.GaugeVec
	expired       prometheus.Counter
	indexErrors   *prometheus.CounterVec
	weightUpdates prometheus.Counter
	unknownRoute  *prometheus.GaugeVec
	refused       *prometheus.CounterVec
	groups        prometheus.Gauge
	nacksIgnored  prometheus.Counter
	logSuppressed prometheus.Counter
	swept         prometheus.Counter
	slotsHealed   prometheus.Counter
	indicesHealed prometheus.Counter
	namesRefused  *prometheus.CounterVec
	evicted       prometheus.Counter
	localAssigns  *prometheus.GaugeVec
	localEPs      *prometheus.GaugeVec
	// policyUnserved: services (and listener split targets) whose traffic
	// policy is not served.
	policyUnserved prometheus.Gauge
}

// newMetrics makes the collectors and registers them with reg (nil:
// none), all or none.
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{}
	m.streamMetrics()
	m.reconcileMetrics()
	m.subsetMetrics()
	m.boundMetrics()
	m.localityMetrics()
	err := metricreg.Register(reg, m.nodes, m.streams, m.pushes, m.pushLatency, m.nacks, m.reconciles,
		m.reconcileDur, m.stages, m.snapshotSets, m.buildErrors, m.endpoints, m.expired, m.indexErrors, m.weightUpdates, m.unknownRoute,
		m.refused, m.groups, m.nacksIgnored, m.logSuppressed, m.swept, m.slotsHealed, m.indicesHealed,
		m.namesRefused, m.evicted, m.localAssigns, m.localEPs, m.policyUnserved)
	if err != nil {
		return nil, fmt.Errorf("xds: metrics: %w", err)
	}
	return m, nil
}

// streamMetrics makes the collectors of the nodes, their streams and what was sent to them.
func (m *metrics) streamMetrics() {
	m.nodes = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "xds_connected_nodes", Help: "Nodes with at least one open xDS stream.",
	})
	m.streams = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "xds_streams", Help: "Open xDS streams, by protocol (sotw or delta).",
	}, []string{"protocol"})
	m.pushes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "xds_pushes_total", Help: "Discovery responses sent, by resource type.",
	}, []string{"type"})
	m.pushLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "xds_push_latency_seconds",
		Help:    "Time from a discovery change reaching the server to the response carrying it being sent to a node, by resource type.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
	}, []string{"type"})
	m.nacks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "xds_nacks_total", Help: "Responses rejected by nodes (NACKs), by resource type.",
	}, []string{"type"})
	m.nacksIgnored = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "xds_nacks_ignored_total", Help: "NACKs not processed (nor logged): a repeat of one already processed, or naming a response that is not the latest of its type on the stream (stale or made-up nonce).",
	})
}

// reconcileMetrics makes the collectors of the reconcile loop and translation.
func (m *metrics) reconcileMetrics() {
	m.reconciles = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "xds_reconciles_total", Help: "Reconcile passes (rebuilds of node snapshots).",
	})
	m.reconcileDur = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "xds_reconcile_duration_seconds", Help: "Time spent in one reconcile pass.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10),
	})
	m.stages = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "xds_change_stage_seconds",
		Help:    "Time a change spends in each stage of its path, per reconcile pass, by stage: discovery (the source read it -> the reconcile loop has it), debounce (-> the pass starts), translate (-> translated, shared snapshots built), cache (-> every node's snapshot set), first_write and last_write (translated -> the first and the last response the pass made due handed to a stream).",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .075, .1, .15, .2, .3, .5, .75, 1, 2.5, 5, 10},
	}, []string{"stage"})
	m.snapshotSets = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "xds_snapshot_updates_total", Help: "Per-node cache snapshots replaced because their content changed.",
	})
	m.buildErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "xds_translation_errors_total", Help: "Services that failed translation or validation (their previous resources are kept).",
	})
	m.endpoints = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "xds_service_endpoints", Help: "Endpoints per service, by health.",
	}, []string{"service", "health"})
	m.weightUpdates = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "xds_weight_updates_total", Help: "Sets of EDS weights from utilization reports handed to the reconcile loop (each may cause pushes).",
	})
	m.unknownRoute = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "xds_route_unknown_service",
		Help: "Listener routes whose service has no instances in discovery (answered 503 until it has), by service; 0 once it has.",
	}, []string{"service"})
	m.policyUnserved = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "xds_policy_unserved",
		Help: "Services whose traffic policy cannot be served (they are served without it; the log says why), plus listener split targets whose subset is not defined.",
	})
}

// subsetMetrics makes the collectors of client indices, endpoint slots and groups.
func (m *metrics) subsetMetrics() {
	m.indexErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "xds_subset_index_errors_total", Help: "Client index table operations that failed, by op (acquire or release); a failed acquire falls back to this process's table.",
	}, []string{"op"})
	m.groups = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "xds_subset_groups", Help: "Subsetting groups of known nodes (bounded by subsetting.max_groups).",
	})
	m.swept = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "xds_subset_reservations_swept_total", Help: "Expired client index and endpoint slot reservations freed from this process's tables.",
	})
	m.slotsHealed = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "xds_subset_slots_healed_total", Help: "Endpoint slots taken from this process's table while the shared one failed, moved back to the shared table.",
	})
	m.indicesHealed = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "xds_subset_indices_healed_total", Help: "Client indices of connected nodes taken from this process's table while the shared one failed, moved back to the shared table.",
	})
}

// boundMetrics makes the collectors of the bounds on what nodes may ask for and be told.
func (m *metrics) boundMetrics() {
	m.expired = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "xds_nodes_expired_total", Help: "Nodes whose snapshots were dropped after the grace period.",
	})
	m.refused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "xds_nodes_refused_total",
		Help: "Streams refused at their first request, by reason: malformed (the request did not decode, e.g. invalid UTF-8: InvalidArgument), node_too_large (an id, cluster, locality or user agent over 1 KiB, metadata over 16 KiB: InvalidArgument), max_groups (subsetting.max_groups reached: ResourceExhausted) or max_known_nodes (xds.max_known_nodes reached and every known node connected: ResourceExhausted).",
	}, []string{"reason"})
	m.logSuppressed = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "xds_log_lines_suppressed_total", Help: "Log lines held back: at most one connect line (with its disconnect line), one NACK line and one refusal line per node per 10s, at most 10 lines a second of each kind over all nodes (bursts of 100), and one eviction line per 10s.",
	})
	m.namesRefused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "xds_resource_names_refused_total",
		Help: "Requests refused for the resource names they subscribe to (the stream ends), by reason: max_resource_names (more than xds.max_resource_names of one type on one stream: ResourceExhausted), max_unknown_resource_names (more than xds.max_unknown_resource_names not in the node's config, over its streams: ResourceExhausted) or name_too_large (an unknown name over 1 KiB: InvalidArgument).",
	}, []string{"reason"})
	m.evicted = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "xds_nodes_evicted_total", Help: "Disconnected nodes forgotten before xds.node_grace, the longest disconnected first, to make room for a new node past xds.max_known_nodes.",
	})
}

// knownType is typeName for the four types served and "other" for any
// other (client-chosen) type URL, so metric labels stay bounded.
func knownType(url string) string {
	switch url {
	case resource.ClusterType, resource.EndpointType, resource.ListenerType, resource.RouteType:
		return xdscache.TypeName(url)
	}
	return "other"
}

// localityMetrics makes the collectors of services with a locality policy.
func (m *metrics) localityMetrics() {
	m.localAssigns = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "xds_locality_assignments",
		Help: "Load assignments of a service with a locality policy served after the last reconcile pass: one per node place (datacenter, region, zone) and, for a subset service, client index.",
	}, []string{"service"})
	m.localEPs = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "xds_locality_endpoints",
		Help: "Endpoints at each priority level over the load assignments counted by xds_locality_assignments (divide by it for the mean per assignment), by service and priority.",
	}, []string{"service", "priority"})
}
