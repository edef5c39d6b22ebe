package discovery

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// ErrUnknownTarget is wrapped by Drains.Set for a service, endpoint or
// node that discovery does not know.
var ErrUnknownTarget = errors.New("discovery: unknown drain target")

// ErrInvalidDrain is wrapped by Drains.Set and Delete for a malformed
// target or TTL.
var ErrInvalidDrain = errors.New("discovery: invalid drain")

// MaxDrainTTL bounds an admin drain's TTL.
const MaxDrainTTL = 30 * 24 * time.Hour

// DrainsConfig configures Drains.
type DrainsConfig struct {
	Drain DrainConfig
	// Emit receives every snapshot with the drains applied; required. It
	// is called with Drains' lock held, so it must not call back.
	Emit       func(Snapshot)
	Now        func() time.Time      // nil: time.Now
	Registerer prometheus.Registerer // nil: no metrics
}

// Drains is the imperative shell around a Drainer: it takes discovery
// snapshots (Observe), admin drains (Set, Delete) and ORCA lame-duck
// reports (SetORCA), applies them, hands the result to Emit, and applies
// again when a drain window or TTL ends. Safe for concurrent use.
type Drains struct {
	cfg      DrainsConfig
	draining *prometheus.GaugeVec

	mu     sync.Mutex
	d      *Drainer
	raw    Snapshot // latest discovery snapshot
	out    Snapshot // latest emitted
	have   bool
	timer  *time.Timer
	closed bool

	orcaMu  sync.Mutex
	pending map[[2]string]bool // ORCA lame-duck states not applied yet
	kick    chan struct{}      // buffered(1): pending has news
}

// NewDrains returns Drains; nothing is emitted before the first Observe.
func NewDrains(cfg DrainsConfig) (*Drains, error) {
	if cfg.Emit == nil {
		return nil, fmt.Errorf("%w: no emit function", ErrInvalidDrain)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Drains{cfg: cfg, d: NewDrainer(cfg.Drain), pending: map[[2]string]bool{}, kick: make(chan struct{}, 1),
		draining: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "xds_draining_endpoints",
			Help: "Endpoints served as DRAINING, by service and drain source (an endpoint drained by two sources counts under both).",
		}, []string{"service", "source"})}
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(s.draining); err != nil {
			return nil, fmt.Errorf("discovery: drain metrics: %w", err)
		}
	}
	return s, nil
}

// Observe takes a discovery snapshot.
func (s *Drains) Observe(raw Snapshot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.raw, s.have = raw, true
	s.applyLocked()
}

// SetORCA records an endpoint's ORCA lame-duck state; Run applies a
// change at once. It never waits for Emit (ORCA streams call it, and Emit
// may wait for ORCA streams to stop).
func (s *Drains) SetORCA(service, endpoint string, lameDuck bool) {
	s.orcaMu.Lock()
	s.pending[[2]string{service, endpoint}] = lameDuck
	s.orcaMu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// Run applies ORCA lame-duck changes until ctx is done.
func (s *Drains) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.kick:
		}
		s.orcaMu.Lock()
		pending := s.pending
		s.pending = map[[2]string]bool{}
		s.orcaMu.Unlock()
		s.mu.Lock()
		changed := false
		for k, v := range pending {
			changed = s.d.SetORCA(k[0], k[1], v) || changed
		}
		if changed {
			s.applyLocked()
		}
		s.mu.Unlock()
	}
}

// Set adds (or renews) an admin drain of t for ttl (0: until deleted) and
// applies it; the target must exist in the latest snapshot.
func (s *Drains) Set(t DrainTarget, ttl time.Duration) (AdminDrain, error) {
	if err := t.validate(); err != nil {
		return AdminDrain{}, err
	}
	if ttl < 0 || ttl > MaxDrainTTL {
		return AdminDrain{}, fmt.Errorf("%w: ttl %v not in [0, %v]", ErrInvalidDrain, ttl, MaxDrainTTL)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.known(t); err != nil {
		return AdminDrain{}, err
	}
	now := s.cfg.Now()
	a := AdminDrain{DrainTarget: t, Since: now}
	if ttl > 0 {
		a.Until = now.Add(ttl)
	}
	s.d.SetAdmin(a)
	s.applyLocked()
	return a, nil
}

// Delete removes an admin drain and reports whether there was one;
// deleting an absent drain is not an error (idempotent).
func (s *Drains) Delete(t DrainTarget) (bool, error) {
	if err := t.validate(); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ok := s.d.DeleteAdmin(t)
	if ok {
		s.applyLocked()
	}
	return ok, nil
}

// DrainingEndpoint is an endpoint served as DRAINING, and why.
type DrainingEndpoint struct {
	Service  string   `json:"service"`
	Endpoint string   `json:"endpoint"`
	Node     string   `json:"node,omitempty"`
	Sources  []string `json:"sources"`
}

// DrainState is what GET /v1/drain shows.
type DrainState struct {
	Admin    []AdminDrain       `json:"drains"`   // admin drains in force
	Draining []DrainingEndpoint `json:"draining"` // every draining endpoint, with its sources
}

// State returns the admin drains and the draining endpoints.
func (s *Drains) State() DrainState {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := DrainState{Admin: s.d.Admin(s.cfg.Now()), Draining: []DrainingEndpoint{}}
	for _, svc := range s.out.Services {
		for _, ep := range svc.Endpoints {
			if ep.Drain != "" {
				st.Draining = append(st.Draining, DrainingEndpoint{Service: svc.Name, Endpoint: ep.ID,
					Node: ep.Node, Sources: strings.Split(ep.Drain, ",")})
			}
		}
	}
	return st
}

// Close stops the timer; nothing is emitted afterwards.
func (s *Drains) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.timer != nil {
		s.timer.Stop()
	}
}

// applyLocked applies the drains to the latest snapshot, emits the result
// and arms the timer for the next deadline. s.mu must be held.
func (s *Drains) applyLocked() {
	if s.closed || !s.have {
		return
	}
	now := s.cfg.Now()
	out, next := s.d.Apply(s.raw, now)
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

func (s *Drains) tick() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.applyLocked()
}

func (s *Drains) record(out Snapshot) {
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
		for _, src := range DrainSources {
			s.draining.WithLabelValues(svc.Name, src).Set(float64(counts[src]))
		}
	}
}

// validate checks the target's shape: a node alone, or a service with an
// optional endpoint.
func (t DrainTarget) validate() error {
	switch {
	case t.Node != "" && (t.Service != "" || t.Endpoint != ""):
		return fmt.Errorf("%w: give either node, or service (and optionally endpoint), not both", ErrInvalidDrain)
	case t.Node == "" && t.Service == "":
		return fmt.Errorf("%w: service (or node) is required", ErrInvalidDrain)
	}
	return nil
}

// known checks that t names something in the latest snapshot (departed
// endpoints count). s.mu must be held.
func (s *Drains) known(t DrainTarget) error {
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
