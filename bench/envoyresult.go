package bench

// Modes of the real-Envoy benchmark (BenchmarkEnvoyFleet): Envoys on
// xds-server over state-of-the-world or delta ADS, or on Consul's own xDS
// (`consul connect envoy` sidecars, delta ADS: the only protocol Consul
// 1.14 serves).
const (
	EnvoyModeSotW   = "sotw"
	EnvoyModeDelta  = "delta"
	EnvoyModeConsul = "consul"
)

// EnvoyRun is the record of one real-Envoy benchmark run (one JSON line of
// its results file): Envoys Envoy processes (--concurrency 1) on one xDS
// server, the catalog in a real Consul.
type EnvoyRun struct {
	Mode      string `json:"mode"` // EnvoyModeSotW, EnvoyModeDelta or EnvoyModeConsul
	Envoys    int    `json:"envoys"`
	Services  int    `json:"services"`
	Endpoints int    `json:"endpoints"` // per service
	// Poll is how often each Envoy's admin API was read while a change
	// was on its way, in seconds: the resolution of the latencies.
	Poll float64 `json:"poll_seconds"`
	// Server is what served xDS: "xds-server" or "consul" (the agent,
	// which is also the catalog).
	Server string `json:"server"`
	// Started is when the run began (RFC 3339, UTC); RunSeconds its wall
	// time from the Consul start to the end of the changes.
	Started    string  `json:"started"`
	RunSeconds float64 `json:"run_seconds"`

	// EnvoySync is, per Envoy, its launch -> it shows every endpoint of
	// every service healthy; the Envoys are started one after the other,
	// each once the one before has synced. SyncSeconds is the first launch
	// -> the last Envoy synced.
	EnvoySync   []float64 `json:"envoy_sync_seconds"`
	SyncSeconds float64   `json:"sync_seconds"`

	// Rejected is what the Envoys counted against what the server sent
	// (update_rejected stats, clusters or listeners left warming, no
	// connection), each distinct line with how many Envoys reported it;
	// when it is not empty, or an Envoy did not sync, the run measured
	// nothing else (Latencies empty). Said are the distinct warning and
	// error lines of the Envoys' logs (see EnvoySaid), for the record.
	Rejected []string `json:"rejected,omitempty"`
	Said     []string `json:"said,omitempty"`

	// Latencies are the propagation samples in seconds, one per Envoy and
	// change: TTL flip call -> that Envoy's admin API shows the cluster's
	// new healthy host count.
	Latencies []float64 `json:"latencies"`
	Changes   int       `json:"changes"`
	// ChangeSpread is, per change, the last Envoy's latency minus the
	// first's, in seconds.
	ChangeSpread []float64 `json:"change_spread"`

	// Server memory in bytes (VmRSS) with the catalog loaded and no Envoy
	// connected (before) and with every Envoy synced (after, a settle
	// later). HeapBefore and HeapAfter are xds-server's Go heap in use
	// right after a forced GC at the same moments (0 for Consul).
	RSSBefore  float64 `json:"rss_before"`
	RSSAfter   float64 `json:"rss_after"`
	HeapBefore float64 `json:"heap_before,omitempty"`
	HeapAfter  float64 `json:"heap_after,omitempty"`
	// ServerCPU is the server's CPU (user + system, seconds) over the
	// changes, from the first flip to the last Envoy updated.
	ServerCPU float64 `json:"server_cpu_seconds"`
	// EnvoyRSS is each Envoy's VmRSS in bytes with every Envoy synced, and
	// EnvoyPSS its proportional share (Pss: the binary's shared pages split
	// between the Envoys).
	EnvoyRSS []float64 `json:"envoy_rss"`
	EnvoyPSS []float64 `json:"envoy_pss"`
}

// RSSPerEnvoy is the server's memory per connected Envoy: (RSS with every
// Envoy - RSS with none) / Envoys.
func (r EnvoyRun) RSSPerEnvoy() float64 {
	return (r.RSSAfter - r.RSSBefore) / float64(max(r.Envoys, 1))
}

// HeapPerEnvoy is the same of xds-server's live Go heap.
func (r EnvoyRun) HeapPerEnvoy() float64 {
	return (r.HeapAfter - r.HeapBefore) / float64(max(r.Envoys, 1))
}

// AppendEnvoyRun appends r as one JSON line to the file at path.
func AppendEnvoyRun(path string, r EnvoyRun) error { return appendJSON(path, r) }

// ReadEnvoyRuns reads a results file written by AppendEnvoyRun.
func ReadEnvoyRuns(path string) ([]EnvoyRun, error) { return readJSONLines[EnvoyRun](path) }
