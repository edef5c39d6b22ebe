package ha

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/xds-server/xds-server/weights"
)

// MaxWeightsValueBytes is Consul's default limit on a KV value (kv_max_value_size):
// a summary or table larger than this is not written (an error).
const MaxWeightsValueBytes = 512 << 10

// WeightsConfig configures Weights.
type WeightsConfig struct {
	Client  *api.Client // required
	Prefix  string      // ha.consul.prefix, e.g. "xds-server/"; keys live under <Prefix>weights/
	Replica string      // this replica's id; required
	// PublishInterval (ha.publish_interval) is the least time between two
	// writes of this replica; 0 means 5s.
	PublishInterval time.Duration
	// LockDelay (ha.leader_lock_delay) is the leader session's Consul
	// lock-delay; 0 means 15s.
	LockDelay time.Duration
	// SessionTTL is the leader session's TTL (Consul: 10s to 24h); 0
	// means 10s. A replica killed without a goodbye loses the lead when
	// Consul invalidates its session (TTL to 2 x TTL), then LockDelay.
	SessionTTL time.Duration
	// SummaryTTL is how old (by its build time) another replica's
	// summary may get before the leader deletes it (a replica killed
	// without a goodbye); 0 means 10m. Its loads expired long before
	// (weights' expiration period, 3m by default).
	SummaryTTL time.Duration
	// SessionChecks, optional, are Consul health check ids (besides the
	// agent's serfHealth) whose going critical invalidates this replica's
	// leader session: with an HTTP or gRPC check on this replica, a kill
	// -9 loses the lead within the check interval (then LockDelay), not
	// the session TTL.
	SessionChecks []string
	// CountWrite and CountError, optional, count Consul writes by kind
	// ("weights": one transaction with the summary and/or the table) and
	// failures by op ("publish", "watch", "lock", "session", ...): the
	// owner of xds_ha_consul_writes_total and xds_ha_errors_total.
	CountWrite func(kind string)
	CountError func(op string)
	Now        func() time.Time      // nil: time.Now
	Logger     *slog.Logger          // nil: slog.Default()
	Registerer prometheus.Registerer // nil: no metrics
	// Leader and SummaryAge, when set, are xds_ha_leader and
	// xds_ha_summary_age_seconds already registered (ha.Metrics): they
	// are used instead of new ones, and Registerer is not used for them.
	Leader     prometheus.Gauge
	SummaryAge *prometheus.GaugeVec
}

// Weights shares the weight pipeline's state across replicas through
// Consul KV: it is the pipeline's weights.SummaryExchange (this replica's
// summary, written at most every PublishInterval; every replica's, watched
// with a blocking query) and weights.TableExchange (the weights leader, a
// Consul session lock with LockDelay; the table the leader writes, fenced
// by that session in the same transaction as its summary).
//
// KV layout under <Prefix>weights/: summaries/<replica> (gzip'd JSON
// weights.Summary), table (gzip'd JSON weights.SharedTable), leader (the
// lock; value: the leader's replica id).
type Weights struct {
	cfg  WeightsConfig
	log  *slog.Logger
	kv   *api.KV
	keys Layout // under cfg.Prefix

	mu        sync.Mutex
	pending   *weights.Summary           // latest handed over, not yet written
	pendTable *weights.SharedTable       // latest table handed over by the leader
	written   []byte                     // services of the summary last written (JSON), to skip repeats
	wroteIdx  uint64                     // its ModifyIndex
	lastPub   time.Time                  // when this replica last wrote its summary
	lastBytes int                        // its size, gzip'd
	sums      map[string]weights.Summary // replica -> latest summary seen
	listIdx   uint64                     // index of the listing last applied
	table     weights.SharedTable        // the table last seen (kept when the key goes)
	tableIdx  uint64                     // its ModifyIndex
	tableSeq  uint64                     // counts the tables seen (Consul's indexes start over when it loses its state)
	tableIn   bool                       // the last listing held a readable table
	session   string                     // leader session, when leading
	leading   bool
	leaderID  string               // replica id in the leader key; "" if none
	logged    map[string]time.Time // op -> last error logged

	leaderGauge prometheus.Gauge
	ages        *prometheus.GaugeVec
}

// NewWeights validates cfg and registers the metrics xds_ha_leader and
// xds_ha_summary_age_seconds; start it with Run, and hand PipelineHA to
// the weights pipeline. It is the one constructor of the HA weights.
func NewWeights(cfg WeightsConfig) (*Weights, error) {
	var errs []error
	if cfg.Client == nil {
		errs = append(errs, errors.New("no Consul client"))
	}
	if cfg.Replica == "" || strings.Contains(cfg.Replica, "/") {
		errs = append(errs, fmt.Errorf("replica id %q is empty or has a /", cfg.Replica))
	}
	if cfg.PublishInterval < 0 || cfg.LockDelay < 0 || cfg.SessionTTL < 0 || cfg.SummaryTTL < 0 {
		errs = append(errs, errors.New("negative interval"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("ha: weights: %w", err)
	}
	cfg.PublishInterval = cmp.Or(cfg.PublishInterval, 5*time.Second)
	cfg.LockDelay = cmp.Or(cfg.LockDelay, 15*time.Second)
	cfg.SummaryTTL = cmp.Or(cfg.SummaryTTL, 10*time.Minute)
	cfg.SessionTTL = max(cmp.Or(cfg.SessionTTL, 10*time.Second), 10*time.Second)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	w := &Weights{cfg: cfg, log: cmp.Or(cfg.Logger, slog.Default()).With("component", "ha-weights", "replica", cfg.Replica),
		kv: cfg.Client.KV(), keys: Layout{Prefix: cfg.Prefix}, sums: map[string]weights.Summary{}, logged: map[string]time.Time{},
		leaderGauge: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "xds_ha_leader", Help: "1 while this replica is the weights leader (it solves and writes the global weight table), else 0.",
		}),
		ages: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "xds_ha_summary_age_seconds", Help: "Age of the latest weight summary seen from each replica (this one included).",
		}, []string{"replica"}),
	}
	if cfg.Leader != nil && cfg.SummaryAge != nil {
		w.leaderGauge, w.ages = cfg.Leader, cfg.SummaryAge
	} else if cfg.Registerer != nil {
		for _, c := range []prometheus.Collector{w.leaderGauge, w.ages} {
			if err := cfg.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("ha: weights: metrics: %w", err)
			}
		}
	}
	return w, nil
}

// Run publishes, watches and campaigns for the lead until ctx is done;
// then it gives the lead up (no lock delay for a clean release) and
// deletes its summary (the others keep what they merged of it until it
// expires, as when reports stop).
func (w *Weights) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, f := range []func(context.Context){w.publishLoop, w.watchLoop, w.leadLoop} {
		wg.Add(1)
		go func() { defer wg.Done(); f(ctx) }()
	}
	wg.Wait()
	dctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := w.kv.Delete(w.keys.Summary(w.cfg.Replica), (&api.WriteOptions{}).WithContext(dctx)); err != nil {
		w.countError("delete_summary", err)
	}
}

// PipelineHA is the weights pipeline's side of w (PipelineConfig.HA):
// w is both its summary exchange and its table exchange.
func (w *Weights) PipelineHA() *weights.HAConfig {
	return &weights.HAConfig{Replica: w.cfg.Replica, Summaries: w, Tables: w}
}

// PublishSummary keeps s to be written at the next publish tick.
func (w *Weights) PublishSummary(s weights.Summary) {
	w.mu.Lock()
	w.pending = &s
	w.mu.Unlock()
}

// Summaries returns every replica's latest summary, by replica id.
func (w *Weights) Summaries() []weights.Summary {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]weights.Summary, 0, len(w.sums))
	for _, s := range w.sums {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Replica < out[j].Replica })
	return out
}

// Leader reports whether this replica holds the weights lead.
func (w *Weights) Leader() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.leading
}

// WriteTable keeps t to be written (fenced by the lead) at the next tick.
func (w *Weights) WriteTable(t weights.SharedTable) {
	w.mu.Lock()
	w.pendTable = &t
	w.mu.Unlock()
}

// Table returns the table in KV as last seen and a sequence that changes
// with it; false when KV holds none (before the first table, or after
// Consul lost its state: the replicas keep serving the last one, and the
// leader writes its own).
func (w *Weights) Table() (weights.SharedTable, uint64, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.table, w.tableSeq, w.tableIn
}

// WeightsStatus is what /debug/ha shows of the weights.
type WeightsStatus struct {
	Replica       string             `json:"replica"`
	Leader        string             `json:"leader"` // replica id; "" if none
	IsLeader      bool               `json:"is_leader"`
	LastPublished time.Time          `json:"last_summary_published,omitzero"`
	LastBytes     int                `json:"last_summary_bytes"`
	SummaryAge    map[string]float64 `json:"summary_age_seconds"` // replica -> seconds
	TableAt       time.Time          `json:"table_computed_at,omitzero"`
}

// Status returns the weights' part of /debug/ha.
func (w *Weights) Status() WeightsStatus {
	now := w.cfg.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	st := WeightsStatus{Replica: w.cfg.Replica, Leader: w.leaderID, IsLeader: w.leading,
		LastPublished: w.lastPub, LastBytes: w.lastBytes, SummaryAge: map[string]float64{}}
	for r, s := range w.sums {
		st.SummaryAge[r] = now.Sub(time.UnixMilli(s.At)).Seconds()
	}
	if w.tableSeq != 0 {
		st.TableAt = time.UnixMilli(w.table.At).UTC()
	}
	return st
}

// DebugSummaries is the weights' part of /debug/ha: this replica's last
// write and, per replica, when the summary seen was built.
func (w *Weights) DebugSummaries() Summaries {
	st := w.Status()
	out := Summaries{Published: st.LastPublished, PublishedBytes: st.LastBytes}
	for _, r := range slices.Sorted(maps.Keys(st.SummaryAge)) {
		age := time.Duration(st.SummaryAge[r] * float64(time.Second))
		out.Merged = append(out.Merged, ReplicaSummary{Replica: r, Updated: time.Now().Add(-age)})
	}
	return out
}

func (w *Weights) countWrite(kind string) {
	if w.cfg.CountWrite != nil {
		w.cfg.CountWrite(kind)
	}
}

// countError counts a failure and logs it, at most once per op per
// errorLogEvery (an outage fails every loop each round).
func (w *Weights) countError(op string, err error) {
	if w.cfg.CountError != nil {
		w.cfg.CountError(op)
	}
	now := w.cfg.Now()
	w.mu.Lock()
	quiet := now.Sub(w.logged[op]) < errorLogEvery
	if !quiet {
		w.logged[op] = now
	}
	w.mu.Unlock()
	if !quiet {
		w.log.Warn("ha: weights: Consul "+op+" failed (logged at most every 30s)", "error", err)
	}
}

const errorLogEvery = 30 * time.Second
