package weights

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"
)

// ErrUnknownEndpoint is returned by Observe for a report of a service or
// endpoint the tracker was not told about with SetEndpoints.
var ErrUnknownEndpoint = errors.New("weights: unknown endpoint")

// ErrInvalidEndpoints is wrapped by the errors of SetEndpoints.
var ErrInvalidEndpoints = errors.New("weights: invalid endpoints")

// Endpoint is what the tracker needs to know of a discovered endpoint.
type Endpoint struct {
	ID string // unique within the service
	// Static is the weight from discovery (Consul Weights.Passing or
	// Warning), used when no endpoint of the service has its own weight;
	// 0 means unset (1).
	Static uint32
}

// Tracker keeps the latest reports of every endpoint and computes the
// weight table. It is safe for concurrent use; it starts no goroutine,
// does no I/O and reads no clock: every method that needs the time takes
// it as now.
type Tracker struct {
	cfg      Config
	mu       sync.Mutex
	services map[string]*service
}

type service struct {
	ids       []string // sorted endpoint IDs
	endpoints map[string]*endpoint
}

// endpoint is the tracker's state of one endpoint.
type endpoint struct {
	static     uint32            // >= 1
	backend    Report            // latest backend report (Node == ""); At zero if none
	nodes      map[string]Report // latest client report per node
	lastReport time.Time         // latest report of any kind; zero if none
	validSince time.Time         // start of the current streak of usable measurements; zero if none
	lastValid  time.Time         // latest usable measurement; zero if none ever
	dirty      bool              // a report arrived since the last Update
	smoothed   float64           // EWMA of the formula weight; 0 = not started
	capacity   float64           // EWMA of qps/utilization; 0 = not started
	guard      float64           // overload guard multiplier in [1/MaxRatio, 1]
	zone       zone              // the guard's zone at its last move
	guardFrom  time.Time         // start of the guard's current period; zero before the first reading
	guardSum   float64           // sum of the utilizations read in the current period
	guardN     int               // readings in the current period
}

// NewTracker returns an empty tracker, or the error of cfg.Validate.
func NewTracker(cfg Config) (*Tracker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Tracker{cfg: cfg, services: map[string]*service{}}, nil
}

// SetEndpoints sets the endpoints of a service, as discovery sees them.
// Endpoints that remain keep their reports and state; removed ones lose
// them; an empty list removes the service. IDs must be non-empty and
// unique, at most MaxEndpoints.
func (t *Tracker) SetEndpoints(name string, eps []Endpoint) error {
	if err := validateEndpoints(name, eps); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(eps) == 0 {
		delete(t.services, name)
		return nil
	}
	old := t.services[name]
	s := &service{ids: make([]string, 0, len(eps)), endpoints: make(map[string]*endpoint, len(eps))}
	for _, ep := range eps {
		e := (*endpoint)(nil)
		if old != nil {
			e = old.endpoints[ep.ID]
		}
		if e == nil {
			e = &endpoint{nodes: map[string]Report{}, guard: 1}
		}
		e.static = max(ep.Static, 1)
		s.ids = append(s.ids, ep.ID)
		s.endpoints[ep.ID] = e
	}
	slices.Sort(s.ids)
	t.services[name] = s
	return nil
}

func validateEndpoints(name string, eps []Endpoint) error {
	var errs []error
	if name == "" {
		errs = append(errs, errors.New("service name is empty"))
	}
	if len(eps) > MaxEndpoints {
		errs = append(errs, fmt.Errorf("%d endpoints (at most %d)", len(eps), MaxEndpoints))
	}
	seen := make(map[string]bool, len(eps))
	for _, ep := range eps {
		switch {
		case ep.ID == "":
			errs = append(errs, errors.New("endpoint with an empty ID"))
		case seen[ep.ID]:
			errs = append(errs, fmt.Errorf("duplicate endpoint %q", ep.ID))
		}
		seen[ep.ID] = true
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w for service %q: %w", ErrInvalidEndpoints, name, errors.Join(errs...))
}

// Observe records a report received at now. Invalid reports return the
// error of Report.Validate, reports of unknown endpoints ErrUnknownEndpoint
// (both wrapped). A report from the future counts as measured at now; a
// report older than the expiration period, or older than the latest one
// from the same source (the backend, or the same node), is ignored.
func (t *Tracker) Observe(r Report, now time.Time) error {
	if err := r.Validate(); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.lookup(r.Service, r.Endpoint)
	if e == nil {
		return fmt.Errorf("%w: %q/%q", ErrUnknownEndpoint, r.Service, r.Endpoint)
	}
	if r.At.After(now) {
		r.At = now
	}
	if now.Sub(r.At) > t.cfg.ExpirationPeriod {
		return nil
	}
	r.Named = maps.Clone(r.Named) // Rows share it: never modified after this
	if r.Node == "" {
		if r.At.Before(e.backend.At) {
			return nil
		}
		e.backend = r
	} else {
		if r.At.Before(e.nodes[r.Node].At) {
			return nil
		}
		e.nodes[r.Node] = r
	}
	e.dirty = true
	if r.At.After(e.lastReport) {
		e.lastReport = r.At
	}
	if t.measure(e, now).ok {
		if e.validSince.IsZero() || r.At.Sub(e.lastValid) > t.cfg.ExpirationPeriod {
			e.restart(r.At)
		}
		if r.At.After(e.lastValid) {
			e.lastValid = r.At
		}
	}
	return nil
}

// restart begins a new streak of usable measurements at.
func (e *endpoint) restart(at time.Time) {
	e.validSince = at
	e.smoothed, e.capacity, e.guard, e.zone = 0, 0, 1, zoneNone
	e.guardFrom, e.guardSum, e.guardN = time.Time{}, 0, 0
}

func (t *Tracker) lookup(service, id string) *endpoint {
	if s := t.services[service]; s != nil {
		return s.endpoints[id]
	}
	return nil
}

// NodeRates returns the fresh client (LRS) request rates of a service at
// now: node -> endpoint -> requests/s. The per-node solver's input.
func (t *Tracker) NodeRates(service string, now time.Time) map[string]map[string]float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string]map[string]float64{}
	s := t.services[service]
	if s == nil {
		return out
	}
	for _, id := range s.ids {
		for node, r := range s.endpoints[id].nodes {
			if !t.fresh(r.At, now) {
				continue
			}
			m := out[node]
			if m == nil {
				m = map[string]float64{}
				out[node] = m
			}
			m[id] = r.QPS
		}
	}
	return out
}

// fresh reports whether a report measured at is still usable at now.
func (t *Tracker) fresh(at, now time.Time) bool {
	return !at.IsZero() && now.Sub(at) <= t.cfg.ExpirationPeriod
}

// measurement is an endpoint's merged fresh load at some now.
type measurement struct {
	qps, eps, util float64 // requests/s, errors/s, utilization (0 = unknown)
	nodes          int     // fresh client reports
	weight         float64 // the formula; 0 unless ok
	capacity       float64 // qps/util; 0 unless ok
	ok             bool    // weight is usable
}

// measure merges the fresh reports of e: utilization from the backend
// report, else the largest any node reports; qps and eps from the backend
// report when its qps > 0, else summed over the nodes' reports.
func (t *Tracker) measure(e *endpoint, now time.Time) measurement {
	var m measurement
	if t.fresh(e.backend.At, now) {
		m.util = e.backend.Utilization()
		if e.backend.QPS > 0 {
			m.qps, m.eps = e.backend.QPS, e.backend.EPS
		}
	}
	var nq, ne, nu float64
	for _, r := range e.nodes {
		if t.fresh(r.At, now) {
			m.nodes++
			nq, ne, nu = nq+r.QPS, ne+r.EPS, max(nu, r.Utilization())
		}
	}
	if m.qps == 0 {
		m.qps, m.eps = nq, ne
	}
	if m.util == 0 {
		m.util = nu
	}
	m.weight, m.ok = Weight(m.qps, m.eps, m.util, t.cfg.Penalty)
	if m.ok {
		m.capacity = m.qps / m.util
	}
	return m
}
