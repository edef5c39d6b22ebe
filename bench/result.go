package bench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
)

// Run is the record of one system benchmark run (one JSON line of the
// results file).
type Run struct {
	Mode           string `json:"mode"` // "sotw" or "delta"
	Nodes          int    `json:"nodes"`
	Services       int    `json:"services"`
	Endpoints      int    `json:"endpoints"` // per service
	StreamsPerConn int    `json:"streams_per_conn"`
	SubsetSize     int    `json:"subset_size,omitempty"`  // subset_size of every service; 0: every node sees every endpoint
	Openers        int    `json:"openers,omitempty"`      // streams opened at once when connecting (Nodes: a connect storm)
	ServerFlags    string `json:"server_flags,omitempty"` // flags the server had beyond the defaults

	// Refused is what the server refused over the run: nodes
	// (xds_nodes_refused_total) and xDS connections (its listener's cap).
	Refused float64 `json:"refused"`
	// LoadGenCPU is the CPU the load generator (this benchmark's process:
	// the nodes, Consul calls excluded) used over the run, in seconds, and
	// LoadGenConnectCPU its part from the first dial until every node synced.
	LoadGenCPU        float64 `json:"loadgen_cpu_seconds"`
	LoadGenConnectCPU float64 `json:"loadgen_connect_cpu_seconds"`
	// ServerConnectCPU is the server's CPU over the same time
	// (process_cpu_seconds_total): with the load generator's, the least
	// time the connect storm can take on the machine's cores.
	ServerConnectCPU float64 `json:"server_connect_cpu_seconds,omitempty"`
	RunSeconds       float64 `json:"run_seconds"` // wall time of the run from the first dial
	// ChangeSampled is, per change, the nodes the change reached (all of
	// them without subsets; with subsets, those that had the endpoint).
	ChangeSampled []int `json:"change_sampled,omitempty"`

	ConnectSeconds float64 `json:"connect_seconds"` // first stream opened -> every node has every type and every endpoint
	// Server memory in bytes with the catalog loaded and no node connected
	// (before), and with every node connected and synced (after).
	RSSBefore  float64 `json:"rss_before"`
	RSSAfter   float64 `json:"rss_after"`
	HeapBefore float64 `json:"heap_inuse_before"`
	HeapAfter  float64 `json:"heap_inuse_after"`
	// GoalBefore and GoalAfter are the Go heap goals (next GC) at the same
	// moments: about twice the heap that was live at the last GC.
	GoalBefore float64 `json:"heap_goal_before"`
	GoalAfter  float64 `json:"heap_goal_after"`
	// RSSEnd is the RSS at the end of the run (after every change and full
	// push, plus a settle); RSSPeak the most the process was ever resident
	// (VmHWM), connect burst and pushes included.
	RSSEnd     float64 `json:"rss_end"`
	RSSPeak    float64 `json:"rss_peak"`
	Goroutines float64 `json:"goroutines_after"`

	// Latencies are the propagation samples in seconds, one per node and
	// single-endpoint change: TTL flip call -> EDS response showing it.
	Latencies []float64 `json:"latencies"`
	Changes   int       `json:"changes"`
	// ChangeEDS is, per change, the EDS responses received per node.
	ChangeEDS []float64 `json:"change_eds_per_node"`
	Pushes    []Push    `json:"pushes"`
	// DrainLatencies are the drain propagation samples in seconds, one per
	// node and drain: Consul maintenance or admin drain call -> EDS
	// response showing the endpoint DRAINING.
	DrainLatencies []float64 `json:"drain_latencies,omitempty"`
	Drains         int       `json:"drains,omitempty"`

	// Change phase (every single-endpoint change, gaps included), read by
	// the cost model: the server's CPU in seconds, the bytes of every
	// response the nodes received, and the server's Consul blocking
	// queries (xds_discovery_consul_queries_total).
	ChangeCPUSeconds  float64 `json:"change_cpu_seconds,omitempty"`
	ChangeBytes       float64 `json:"change_bytes,omitempty"`
	ChangeConsulReads float64 `json:"change_consul_reads,omitempty"`
	// ConsulWrites are the server's Consul KV writes over the run
	// (xds_ha_consul_writes_total; 0 without ha.enabled).
	ConsulWrites float64 `json:"consul_writes"`
	// Stages and DrainStages are, per change (drain), where its time went:
	// seconds per stage (StagesOf; keys in Stages), from the server's
	// reconcile pass that took it.
	Stages      []map[string]float64 `json:"stages,omitempty"`
	DrainStages []map[string]float64 `json:"drain_stages,omitempty"`
	// ChangeGCs are, per change, the garbage collections that ended
	// while it spread (from the flip until every node had it): the
	// server's (go_gc_duration_seconds_count) and the load generator's
	// own (runtime/metrics), which can stall either side.
	ChangeServerGCs  []float64 `json:"change_server_gcs,omitempty"`
	ChangeLoadGenGCs []float64 `json:"change_loadgen_gcs,omitempty"`
	// QuietGCs are the server's collections between pushes over the
	// change phase (xds_gc_between_pushes_total, runtime.gc_between_pushes).
	QuietGCs float64 `json:"quiet_gcs,omitempty"`
	// SyncReleases are the server's memory releases (xds_memory_releases_total,
	// runtime.release_free_memory) by the reading of RSSAfter, Releases
	// those by the end of the run: more at the end came during the
	// measured changes, pushes or drains.
	SyncReleases float64 `json:"sync_releases,omitempty"`
	Releases     float64 `json:"releases,omitempty"`
}

// Push is one full push: one endpoint of every service flipped at once.
type Push struct {
	CPUSeconds  float64 `json:"cpu_seconds"`         // server CPU (user+system) from the first flip to every node updated, plus a settle
	WallSeconds float64 `json:"wall_seconds"`        // first flip -> last node updated
	P99Seconds  float64 `json:"p99_seconds"`         // of the node arrival latencies
	EDSPerNode  float64 `json:"eds_per_node"`        // EDS responses per node in that time
	Reconciles  float64 `json:"reconciles"`          // server reconcile passes in that time
	EDSPushes   float64 `json:"server_pushes"`       // EDS responses the server counted in that time
	LoadGenCPU  float64 `json:"loadgen_cpu_seconds"` // the load generator's CPU in that time
	Sampled     int     `json:"sampled"`             // nodes the push reached

	// Bytes of every response the nodes received in that time, and the
	// server's Consul blocking queries in that time (the cost model).
	Bytes       float64 `json:"bytes,omitempty"`
	ConsulReads float64 `json:"consul_reads,omitempty"`
}

// AppendRun appends r as one JSON line to the file at path.
func AppendRun(path string, r Run) error { return appendJSON(path, r) }

// appendJSON appends v as one JSON line to the file at path.
func appendJSON(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("bench: %w", err)
	}
	return f.Close()
}

// ReadRuns reads a results file written by AppendRun.
func ReadRuns(path string) ([]Run, error) { return readJSONLines[Run](path) }

// readJSONLines reads a file of one JSON value of type T per line.
func readJSONLines[T any](path string) ([]T, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	defer f.Close()
	var out []T
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 256<<20)
	for sc.Scan() {
		var r T
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("bench: %s: %w", path, err)
		}
		out = append(out, r)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("bench: %s: %w", path, err)
	}
	return out, nil
}

// Percentile is the nearest-rank p-th percentile of xs, p in (0, 100];
// NaN for no samples.
func Percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	return s[min(max(rank, 1), len(s))-1]
}

// Median is the middle value of xs (the mean of the two middle ones for an
// even count); NaN for no samples.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}
