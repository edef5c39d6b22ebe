package weights

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/xds-server/xds-server/internal/httpjson"
	"github.com/xds-server/xds-server/internal/metricreg"
)

// RunnerConfig configures the Runner: the track stage's tracker and the
// publish stage's outputs.
type RunnerConfig struct {
	Tracker *Tracker    // required
	Publish func(Table) // required: hands a table to the xDS server
	// PublishNodes, optional, plans and hands on per-node weights from the
	// table; it reports whether some node's weights changed (so a push).
	// It is called at every Offer once MinPushInterval has passed since
	// the last publication, whether or not the global weights changed.
	PublishNodes func(Table) bool
	// NodeDebug, optional, answers /debug/weights?service=S&node=ID with
	// what the node was sent and why; false if nothing is known.
	NodeDebug func(service, node string) (any, bool)
	// UpdatePeriod is how often weights are recomputed; 0 means 1s.
	UpdatePeriod time.Duration
	// MinChange is the relative change of some endpoint's share of its
	// service that warrants a push, in (0, 1); 0 means DefaultMinChange.
	MinChange float64
	// MinPushInterval is the shortest time between two publications (so
	// between two weight-driven pushes to any node); 0 means 5s.
	MinPushInterval time.Duration
	Registerer      prometheus.Registerer // nil: no metrics
}

// Validate reports configuration errors.
func (c RunnerConfig) Validate() error {
	var errs []error
	if c.Tracker == nil {
		errs = append(errs, errors.New("weights: runner: no tracker"))
	}
	if c.Publish == nil {
		errs = append(errs, errors.New("weights: runner: no publish function"))
	}
	if c.UpdatePeriod < 0 || c.MinPushInterval < 0 {
		errs = append(errs, fmt.Errorf("weights: runner: negative period (update %v, min push interval %v)", c.UpdatePeriod, c.MinPushInterval))
	}
	if c.MinChange < 0 || c.MinChange >= 1 {
		errs = append(errs, fmt.Errorf("weights: runner: min change %v is not in [0, 1)", c.MinChange))
	}
	return errors.Join(errs...)
}

// Runner recomputes the weight table every UpdatePeriod and publishes it
// when it changed enough (Changed with MinChange, against the table last
// published), never twice within MinPushInterval. It is the imperative
// shell around the Tracker.
type Runner struct {
	cfg RunnerConfig

	mu        sync.Mutex
	latest    Table     // last computed
	published Table     // last published
	pubAt     time.Time // when; zero before the first publication

	updates, publishes, nodePublishes prometheus.Counter
	spread, age, predicted, guarded   *prometheus.GaugeVec
}

// NewRunner validates cfg and returns a Runner; start it with Run.
func NewRunner(cfg RunnerConfig) (*Runner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.UpdatePeriod = cmp.Or(cfg.UpdatePeriod, time.Second)
	cfg.MinPushInterval = cmp.Or(cfg.MinPushInterval, 5*time.Second)
	cfg.MinChange = cmp.Or(cfg.MinChange, DefaultMinChange)
	r := &Runner{cfg: cfg,
		updates: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "xds_weights_updates_total", Help: "Weight tables computed from utilization reports.",
		}),
		publishes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "xds_weights_publishes_total", Help: "Weight tables handed to the xDS server because weights changed enough (weight-driven pushes).",
		}),
		nodePublishes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "xds_weights_node_publishes_total", Help: "Per-node weight sets handed to the xDS server because some node's weights changed enough (weight-driven pushes).",
		}),
		spread: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "xds_weights_spread", Help: "Max over min EDS weight of a service's endpoints, as last computed.",
		}, []string{"service"}),
		predicted: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "xds_weights_predicted_utilization_spread", Help: "Max over mean endpoint utilization that global balancing (weights.balance) predicts under the weights last computed; 0 when the service was not balanced.",
		}, []string{"service"}),
		guarded: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "xds_weights_guarded_endpoints", Help: "Endpoints of a service whose weight the overload guard holds back (guard below 1), as last computed.",
		}, []string{"service"}),
		age: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "xds_weights_report_age_max_seconds", Help: "Age of the oldest latest report among a service's reporting endpoints.",
		}, []string{"service"}),
	}
	if err := metricreg.Register(cfg.Registerer, r.updates, r.publishes, r.nodePublishes, r.spread, r.age, r.predicted, r.guarded); err != nil {
		return nil, fmt.Errorf("weights: runner: metrics: %w", err)
	}
	return r, nil
}

// Step runs the track and publish stages alone (no HA merge, no
// solving): Offer(now, Track(now)). The Pipeline runs its own stages.
func (r *Runner) Step(now time.Time) bool { return r.Offer(now, r.Track(now)) }

// Track is the track stage: the tracker's table at now (blackout, expiry,
// smoothing applied).
func (r *Runner) Track(now time.Time) Table { return r.cfg.Tracker.Update(now) }

// Offer is the publish stage: it records t as the table last computed
// (and in the metrics) and, at most once per MinPushInterval, publishes it
// if it changed enough (and the per-node weights through PublishNodes, if
// set); it reports whether it published anything.
func (r *Runner) Offer(now time.Time, t Table) bool {
	r.updates.Inc()
	r.record(t)
	r.mu.Lock()
	r.latest = t
	first := r.pubAt.IsZero()
	due := first || now.Sub(r.pubAt) >= r.cfg.MinPushInterval
	global := due && (first || Changed(r.published, t, r.cfg.MinChange))
	if global {
		r.published = t
	}
	r.mu.Unlock()
	if !due {
		return false
	}
	if global {
		r.publishes.Inc()
		r.cfg.Publish(t)
	}
	nodes := r.cfg.PublishNodes != nil && r.cfg.PublishNodes(t)
	if nodes {
		r.nodePublishes.Inc()
	}
	if global || nodes {
		r.mu.Lock()
		r.pubAt = now
		r.mu.Unlock()
	}
	return global || nodes
}

// Published returns the table last published (zero before the first).
func (r *Runner) Published() Table {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.published
}

// Table returns the table last computed.
func (r *Runner) Table() Table {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.latest
}

func (r *Runner) record(t Table) {
	for _, s := range t.Services {
		var lo, hi uint32
		var oldest time.Duration
		guarded := 0
		for i, row := range s.Rows {
			if row.Guard < 1 && row.Reason.Own() {
				guarded++
			}
			if i == 0 || row.Weight < lo {
				lo = row.Weight
			}
			hi = max(hi, row.Weight)
			if !row.LastReport.IsZero() {
				oldest = max(oldest, row.Age)
			}
		}
		if lo > 0 {
			r.spread.WithLabelValues(s.Name).Set(float64(hi) / float64(lo))
		}
		r.age.WithLabelValues(s.Name).Set(oldest.Seconds())
		r.predicted.WithLabelValues(s.Name).Set(s.PredictedSpread)
		r.guarded.WithLabelValues(s.Name).Set(float64(guarded))
	}
}

func (r *Runner) nodeDebug(service, node string) (any, bool) {
	if r.cfg.NodeDebug == nil {
		return nil, false
	}
	return r.cfg.NodeDebug(service, node)
}

// Map returns the table's EDS weights: service -> endpoint id -> weight.
func (t Table) Map() map[string]map[string]uint32 {
	out := make(map[string]map[string]uint32, len(t.Services))
	for _, s := range t.Services {
		m := make(map[string]uint32, len(s.Rows))
		for _, row := range s.Rows {
			m[row.Endpoint] = row.Weight
		}
		out[s.Name] = m
	}
	return out
}

// DebugHandler serves GET /debug/weights?service=S: per endpoint the
// latest report, its age, qps, eps, utilization, the computed weight and
// why, as last computed; with &node=ID, what that node was sent
// (NodeDebug).
func (r *Runner) DebugHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		name, node := req.URL.Query().Get("service"), req.URL.Query().Get("node")
		t := r.Table()
		var body any = t
		code := http.StatusOK
		switch {
		case node != "" && name == "":
			code, body = http.StatusBadRequest, map[string]string{"error": "node needs service: /debug/weights?service=S&node=ID"}
		case node != "":
			if b, ok := r.nodeDebug(name, node); ok {
				body = b
			} else {
				code, body = http.StatusNotFound, map[string]string{"error": "no per-node weights for node " + node + " in service " + name}
			}
		case name != "":
			if s, ok := t.Service(name); ok {
				body = ServiceAnswer{ServiceTable: s, State: StateComputed}
			} else {
				code, body = http.StatusNotFound, map[string]string{"error": "no weights for service " + name}
			}
		}
		httpjson.Write(w, code, body)
	})
}
