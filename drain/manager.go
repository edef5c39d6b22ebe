package drain

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/xds-server/xds-server/discovery"
	"github.com/xds-server/xds-server/internal/metricreg"
)

// ErrUnknownTarget is wrapped by Manager.Set for a service, endpoint or
// node that discovery does not know.
var ErrUnknownTarget = errors.New("drain: unknown target")

// ErrInvalid is wrapped by Manager.Set and Delete for a malformed
// target or TTL.
var ErrInvalid = errors.New("drain: invalid request")

// MaxTTL bounds an admin drain's TTL.
const MaxTTL = 30 * 24 * time.Hour

// Config configures Manager.
type Config struct {
	Policy Policy
	// Emit receives every snapshot with the drains applied; required. It
	// is called with Manager's lock held, so it must not call back.
	Emit       func(discovery.Snapshot)
	Now        func() time.Time      // nil: time.Now
	Registerer prometheus.Registerer // nil: no metrics
	// Store, if set, keeps the admin drains (shared by replicas): Set and
	// Delete only write to it (ErrUnavailable when it cannot: nothing
	// changed), and Watch applies its content, here as on every replica
	// (the Store's Put and Delete return once that content includes the
	// write, so a GET right after a POST shows it). Nothing is emitted
	// before its first content arrives, so a restart never serves without
	// the drains in force. nil: admin drains live in this Manager only.
	Store Store
	// Logger gets one line per admin drain or undrain request; nil means
	// slog.Default(). The attribute component=drain is added.
	Logger *slog.Logger
}

// Manager is the imperative shell around an Overlay: it takes discovery
// snapshots (Observe), admin drains (Set, Delete) and ORCA lame-duck
// reports (SetORCA), applies them, hands the result to Emit, and applies
// again when a drain window or TTL ends. Safe for concurrent use.
type Manager struct {
	cfg      Config
	draining *prometheus.GaugeVec
	refused  *prometheus.CounterVec // shared departures refused, by reason
	log      *slog.Logger

	mu     sync.Mutex
	d      *Overlay
	raw    discovery.Snapshot // latest discovery snapshot
	out    discovery.Snapshot // latest emitted
	have   bool
	timer  *time.Timer
	closed bool
	loaded bool       // the Store's content has arrived (always true without a Store)
	dep    Departures // the Store, if it shares departures; nil: local windows only
}

// New returns a Manager; nothing is emitted before the first Observe.
func New(cfg Config) (*Manager, error) {
	if cfg.Emit == nil {
		return nil, fmt.Errorf("%w: no emit function", ErrInvalid)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Manager{cfg: cfg, d: NewOverlay(cfg.Policy), loaded: cfg.Store == nil,
		draining: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "xds_draining_endpoints",
			Help: "Endpoints served as DRAINING, by service and drain source (an endpoint drained by two sources counts under both).",
		}, []string{"service", "source"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "xds_drain_departures_refused_total",
			Help: "Shared departures (Consul KV drains/departed/) not served, by reason: no_window, beyond_window, unknown_service, not_seen.",
		}, []string{"reason"})}
	s.log = cmp.Or(cfg.Logger, slog.Default()).With("component", "drain")
	s.dep, _ = cfg.Store.(Departures)
	if err := metricreg.Register(cfg.Registerer, s.draining, s.refused); err != nil {
		return nil, fmt.Errorf("drain: metrics: %w", err)
	}
	return s, nil
}

// Observe takes a discovery snapshot.
func (s *Manager) Observe(raw discovery.Snapshot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.raw, s.have = raw, true
	s.applyLocked()
}

// SetORCA records an endpoint's ORCA lame-duck state and applies a change
// at once, emitting before it returns. It subscribes to the weights
// pipeline's lame-duck transitions (weights.Pipeline.SubscribeLameDuck),
// which delivers them on the pipeline's goroutine, never on an ORCA
// stream's: Emit may then wait for ORCA streams to stop.
func (s *Manager) SetORCA(service, endpoint string, lameDuck bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.d.SetORCA(service, endpoint, lameDuck) {
		s.applyLocked()
	}
}

// Set adds (or renews) an admin drain of t for ttl (0: until deleted) and
// applies it; the target must exist in the latest snapshot.
func (s *Manager) Set(t Target, ttl time.Duration) (Admin, error) {
	if err := t.validate(); err != nil {
		return Admin{}, err
	}
	if ttl < 0 || ttl > MaxTTL {
		return Admin{}, fmt.Errorf("%w: ttl %v not in [0, %v]", ErrInvalid, ttl, MaxTTL)
	}
	s.mu.Lock()
	if err := s.known(t); err != nil {
		s.mu.Unlock()
		return Admin{}, err
	}
	now := s.cfg.Now()
	s.mu.Unlock()
	a := Admin{Target: t, Since: now}
	if ttl > 0 {
		a.Until = now.Add(ttl)
	}
	if s.cfg.Store != nil {
		return a, s.store(&a, Target{}) // applied from the store's content, as on every replica
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.d.SetAdmin(a)
	s.applyLocked()
	return a, nil
}

// Delete removes an admin drain and reports whether there was one;
// deleting an absent drain is not an error (idempotent).
func (s *Manager) Delete(t Target) (bool, error) {
	if err := t.validate(); err != nil {
		return false, err
	}
	if s.cfg.Store != nil {
		s.mu.Lock()
		had := s.d.hasAdmin(t, s.cfg.Now())
		s.mu.Unlock()
		return had, s.store(nil, t) // applied from the store's content, as on every replica
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ok := s.d.DeleteAdmin(t)
	if ok {
		s.applyLocked()
	}
	return ok, nil
}

// Draining is an endpoint served as DRAINING, and why.
type Draining struct {
	Service  string   `json:"service"`
	Endpoint string   `json:"endpoint"`
	Node     string   `json:"node,omitempty"`
	Sources  []string `json:"sources"`
}

// State is what GET /v1/drain shows.
type State struct {
	Admin    []Admin    `json:"drains"`   // admin drains in force
	Draining []Draining `json:"draining"` // every draining endpoint, with its sources
}

// State returns the admin drains and the draining endpoints.
func (s *Manager) State() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := State{Admin: s.d.Admin(s.cfg.Now()), Draining: []Draining{}}
	for _, svc := range s.out.Services {
		for _, ep := range svc.Endpoints {
			if ep.Drain != "" {
				st.Draining = append(st.Draining, Draining{Service: svc.Name, Endpoint: ep.ID,
					Node: ep.Node, Sources: strings.Split(ep.Drain, ",")})
			}
		}
	}
	return st
}

// Close stops the timer; nothing is emitted afterwards.
func (s *Manager) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.timer != nil {
		s.timer.Stop()
	}
}

// applyLocked applies the drains to the latest snapshot, emits the result
// and arms the timer for the next deadline. s.mu must be held.
func (s *Manager) applyLocked() {
	if s.closed || !s.have || !s.loaded {
		return
	}
	now := s.cfg.Now()
	out, next := s.d.Apply(s.raw, now)
	if gone, back := s.d.Recorded(); s.dep != nil && len(gone)+len(back) > 0 {
		s.dep.Record(gone, back)
	}
	s.noteRefused(s.d.Refusals())
	s.out = out
	s.record(out)
	s.cfg.Emit(out)
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	if !next.IsZero() {
		s.timer = time.AfterFunc(max(next.Sub(now), 0), s.tick)
	}
}

func (s *Manager) tick() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.applyLocked()
}

func (s *Manager) record(out discovery.Snapshot) {
	s.draining.Reset()
	for _, svc := range out.Services {
		counts := map[string]int{}
		for _, ep := range svc.Endpoints {
			if ep.Drain == "" {
				continue
			}
			for _, src := range strings.Split(ep.Drain, ",") {
				counts[src]++
			}
		}
		for _, src := range Sources {
			s.draining.WithLabelValues(svc.Name, src).Set(float64(counts[src]))
		}
	}
}

// validate checks the target's shape: a node alone, or a service with an
// optional endpoint.
func (t Target) validate() error {
	switch {
	case t.Node != "" && (t.Service != "" || t.Endpoint != ""):
		return fmt.Errorf("%w: give either node, or service (and optionally endpoint), not both", ErrInvalid)
	case t.Node == "" && t.Service == "":
		return fmt.Errorf("%w: service (or node) is required", ErrInvalid)
	}
	return nil
}

// known checks that t names something in the latest snapshot (departed
// endpoints count). s.mu must be held.
func (s *Manager) known(t Target) error {
	if t.Node != "" {
		for _, svc := range s.out.Services {
			for _, ep := range svc.Endpoints {
				if ep.Node == t.Node {
					return nil
				}
			}
		}
		return fmt.Errorf("%w: no endpoint on node %q", ErrUnknownTarget, t.Node)
	}
	svc, ok := s.out.Service(t.Service)
	if !ok {
		return fmt.Errorf("%w: service %q", ErrUnknownTarget, t.Service)
	}
	if t.Endpoint != "" {
		for _, ep := range svc.Endpoints {
			if ep.ID == t.Endpoint {
				return nil
			}
		}
		return fmt.Errorf("%w: endpoint %q of service %q", ErrUnknownTarget, t.Endpoint, t.Service)
	}
	return nil
}
