package bench

// HARun is the record of one HA benchmark run (one JSON line of its
// results file): Replicas xds-server processes with ha.enabled share one
// Consul, Nodes nodes connected to each.
type HARun struct {
	Replicas  int `json:"replicas"`
	Nodes     int `json:"nodes"` // per replica
	Services  int `json:"services"`
	Endpoints int `json:"endpoints"` // per service
	// StreamsPerConn is how many nodes share one gRPC connection of the
	// load generator (1, or 0 in older runs: a connection per node).
	StreamsPerConn int `json:"streams_per_conn,omitempty"`

	// LoadInterval is how often (seconds) each replica got POST /v1/load
	// reports of its share of the endpoints (0: none, weights off);
	// LoadPosts how many posts the HA replicas got in all.
	LoadInterval float64 `json:"load_interval,omitempty"`
	LoadPosts    int     `json:"load_posts,omitempty"`

	ConnectSeconds float64 `json:"connect_seconds"` // first stream opened -> every node of every replica synced

	// DrainLatencies are the drain propagation samples in seconds, one per
	// node of every replica and drain: POST /v1/drain through replica A ->
	// EDS response showing the endpoint DRAINING. UndrainLatencies are the
	// same for DELETE /v1/drain through the last replica -> the endpoint
	// back to HEALTHY. ReplicaDrainP99 is the p99 of each replica's nodes
	// over the run's drains, in replica order.
	DrainLatencies   []float64 `json:"drain_latencies"`
	UndrainLatencies []float64 `json:"undrain_latencies"`
	ReplicaDrainP99  []float64 `json:"replica_drain_p99"`
	Drains           int       `json:"drains"`

	// ChangeLatencies are the Consul change samples in seconds, one per
	// node of every replica and change: a TTL check flipped in Consul ->
	// EDS response with the endpoint's new health. ReplicaChangeP99 is
	// the p99 of each replica's nodes over the run's changes.
	ChangeLatencies  []float64 `json:"change_latencies,omitempty"`
	ReplicaChangeP99 []float64 `json:"replica_change_p99,omitempty"`
	Changes          int       `json:"changes,omitempty"`

	// CPU over WriteSeconds, in CPU-seconds: each replica's
	// process_cpu_seconds_total, and the load generator's own (getrusage,
	// holding every replica's streams); LoadGenConnectCPU is the latter's
	// over the connect of every fleet.
	ReplicaCPU []float64 `json:"replica_cpu,omitempty"`
	// ChangeSeconds is the wall time of the change phase (the changes and
	// their gaps); ChangeCPU each replica's CPU-seconds over it and
	// LoadGenChangeCPU the load generator's: whether the cores were full.
	ChangeSeconds     float64   `json:"change_seconds,omitempty"`
	ChangeCPU         []float64 `json:"change_cpu,omitempty"`
	LoadGenChangeCPU  float64   `json:"loadgen_change_cpu,omitempty"`
	LoadGenCPU        float64   `json:"loadgen_cpu,omitempty"`
	LoadGenConnectCPU float64   `json:"loadgen_connect_cpu,omitempty"`

	// Writes are, per replica, the increase of xds_ha_consul_writes_total
	// by kind over WriteSeconds: from every replica ready (no node
	// connected) to the end of the drains and the idle hold after them.
	Writes       []map[string]float64 `json:"writes"`
	WriteSeconds float64              `json:"write_seconds"`

	// Memory: RSS in bytes of each HA replica with the catalog loaded and
	// no node connected (before) and at the end of the run, at least
	// 15s after its nodes synced (after); the same of one replica without
	// HA with the same number of nodes, after the same drains and hold (Base).
	RSSBefore     []float64 `json:"rss_before"`
	RSSAfter      []float64 `json:"rss_after"`
	BaseRSSBefore float64   `json:"base_rss_before"`
	BaseRSSAfter  float64   `json:"base_rss_after"`
	// HeapAfter and BaseHeapAfter are the Go heap in use right after a
	// forced GC (GET /debug/pprof/heap?gc=1), at the same moments as
	// RSSAfter and BaseRSSAfter: the live memory, without the garbage of
	// the connect burst that makes RSS vary between runs.
	HeapAfter []float64 `json:"heap_after_gc"`
	// RSSSynced is each HA replica's RSS right after every node of every
	// replica synced (and a settle of 2 s): the reading RSSPerNode uses.
	RSSSynced     []float64 `json:"rss_synced,omitempty"`
	BaseHeapAfter float64   `json:"base_heap_after_gc"`

	// DrainFirst is, per drain and replica (drain-major), the latency of
	// the first of that replica's nodes to have the endpoint DRAINING:
	// about when the replica learnt the drain from Consul, before its
	// fan-out to its nodes.
	DrainFirst []float64 `json:"drain_first"`
}

// ExtraHeap is, per replica, its live heap with its nodes synced minus
// that of the replica without HA.
func (r HARun) ExtraHeap() []float64 {
	out := make([]float64, len(r.HeapAfter))
	for i, v := range r.HeapAfter {
		out[i] = v - r.BaseHeapAfter
	}
	return out
}

// WritesPerSecond is each replica's Consul write rate over the run.
func (r HARun) WritesPerSecond() []float64 {
	out := make([]float64, len(r.Writes))
	for i, w := range r.Writes {
		for _, v := range w {
			out[i] += v
		}
		if r.WriteSeconds > 0 {
			out[i] /= r.WriteSeconds
		}
	}
	return out
}

// TotalWritesPerSecond is the Consul write rate of the whole set: the
// sum over replicas.
func (r HARun) TotalWritesPerSecond() float64 {
	var sum float64
	for _, v := range r.WritesPerSecond() {
		sum += v
	}
	return sum
}

// RSSPerNode is, per replica, its RSS right after its nodes synced minus
// before they connected, over its nodes (bytes per node), as
// BenchmarkConsulFleet measures one replica.
func (r HARun) RSSPerNode() []float64 {
	out := make([]float64, min(len(r.RSSSynced), len(r.RSSBefore)))
	for i := range out {
		out[i] = (r.RSSSynced[i] - r.RSSBefore[i]) / float64(max(r.Nodes, 1))
	}
	return out
}

// ExtraRSS is, per replica, its RSS with its nodes synced minus that of
// the replica without HA: the memory HA costs.
func (r HARun) ExtraRSS() []float64 {
	out := make([]float64, len(r.RSSAfter))
	for i, v := range r.RSSAfter {
		out[i] = v - r.BaseRSSAfter
	}
	return out
}

// AppendHARun appends r as one JSON line to the file at path.
func AppendHARun(path string, r HARun) error { return appendJSON(path, r) }

// ReadHARuns reads a results file written by AppendHARun.
func ReadHARuns(path string) ([]HARun, error) { return readJSONLines[HARun](path) }
