package discovery

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/xds-server/xds-server/internal/logclip"
)

// GuardConfig configures Guard.
type GuardConfig struct {
	// Fraction: removals of more than this fraction of a service's
	// instances (at least 2) are held, and a snapshot that removes more
	// than this fraction of all instances is held whole; in (0, 1], 1
	// never holds.
	Fraction float64
	// Hold is how long such removals are held; >= 0, 0 never holds.
	Hold time.Duration
	// Window is how long an applied snapshot's instance counts stay the
	// measure of later removals (removals a few at a time add up within
	// it); >= 0, 0 measures each snapshot against the last applied one.
	Window time.Duration
	// Emit receives every snapshot applied; required. It is called with
	// Guard's lock held, from Observe's goroutine or the hold's timer
	// (never two at once), and must not call back into the Guard.
	Emit    func(Snapshot)
	Now     func() time.Time // nil: time.Now
	Logger  *slog.Logger     // nil: slog.Default(); component=discovery.guard is added
	Metrics *Metrics         // may be nil
}

// Validate reports every problem of c, joined.
func (c GuardConfig) Validate() error {
	var errs []error
	if !(c.Fraction > 0 && c.Fraction <= 1) {
		errs = append(errs, fmt.Errorf("discovery: guard: Fraction: %v not in (0, 1]", c.Fraction))
	}
	if c.Hold < 0 {
		errs = append(errs, fmt.Errorf("discovery: guard: Hold: %v is negative", c.Hold))
	}
	if c.Window < 0 {
		errs = append(errs, fmt.Errorf("discovery: guard: Window: %v is negative", c.Window))
	}
	if c.Emit == nil {
		errs = append(errs, errors.New("discovery: guard: Emit: no emit function"))
	}
	return errors.Join(errs...)
}

// Guard is the shell around a RemovalGuard: it sits between a Source and
// the consumer of its snapshots (Observe is the emit function given to
// Source.Run). A service that loses most of its instances has its
// removals held for the hold period while everything else is applied at
// once (xds_discovery_held_services counts such services); an
// update that removes most of all instances is held whole
// (xds_discovery_held is 1). Each hold that begins or
// ends is logged, naming the service. Safe for concurrent use.
type Guard struct {
	cfg GuardConfig
	log *slog.Logger

	mu      sync.Mutex
	core    *RemovalGuard
	timer   *time.Timer
	timerAt time.Time // when timer fires
	timerN  uint64    // counts timers set; a tick of an older one does nothing
	closed  bool
}

// NewGuard validates cfg and returns a Guard.
func NewGuard(cfg GuardConfig) (*Guard, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	g := &Guard{cfg: cfg, log: cmp.Or(cfg.Logger, slog.Default()).With("component", "discovery.guard"),
		core: NewRemovalGuard(cfg.Fraction, cfg.Hold, cfg.Window)}
	g.setHeld(false, 0)
	return g, nil
}

// Observe takes a snapshot from a source: it is emitted at once (with the
// removals of held services held back), or held whole.
func (g *Guard) Observe(s Snapshot) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return
	}
	g.act(g.core.Offer(s, g.cfg.Now()))
}

// Close stops the hold's timer; nothing is emitted afterwards.
func (g *Guard) Close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = true
	g.stopTimer()
}

// tick runs when a hold should end; n is the timer's number.
func (g *Guard) tick(n uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed || n != g.timerN {
		return
	}
	g.timer, g.timerAt = nil, time.Time{}
	g.act(g.core.Due(g.cfg.Now()))
}

// act carries out a verdict: logs, metrics, emit, timer. g.mu must be held.
func (g *Guard) act(v Verdict) {
	switch {
	case v.Started:
		g.log.Warn("discovery update removes most of all instances; holding the whole update", "removed", v.Removed, "instances", v.Total,
			"service", logclip.Name(v.Service), "service_removed", v.ServiceRemoved, "service_instances", v.ServiceTotal,
			"hold", g.cfg.Hold, "until", v.Until, "fraction", g.cfg.Fraction, "window", g.cfg.Window)
		g.countHold(true)
	case v.Cancelled:
		g.log.Info("held discovery update superseded by one that keeps most instances; whole hold cancelled", "removed", v.Removed, "instances", v.Total)
	case v.Expired:
		g.log.Warn("held discovery update applied after the hold", "removed", v.Removed, "instances", v.Total, "hold", g.cfg.Hold)
	}
	for _, h := range v.Services {
		switch h.Event {
		case HoldStarted:
			g.log.Warn("discovery update removes most of a service's instances; holding its removals", "service", logclip.Name(h.Name),
				"removed", h.Removed, "instances", h.Total, "hold", g.cfg.Hold, "until", h.Until, "fraction", g.cfg.Fraction, "window", g.cfg.Window)
			g.countHold(false)
		case HoldCancelled:
			g.log.Info("held removals of a service superseded by an update that keeps most of its instances; hold cancelled",
				"service", logclip.Name(h.Name), "removed", h.Removed, "instances", h.Total)
		case HoldExpired:
			g.log.Warn("held removals of a service applied after the hold", "service", logclip.Name(h.Name),
				"removed", h.Removed, "instances", h.Total, "hold", g.cfg.Hold)
		}
	}
	g.setHeld(v.Held, v.HeldServices())
	if v.Apply {
		g.cfg.Emit(v.Snapshot)
	}
	g.schedule(v.Next)
}

// schedule sets the timer to call Due at next; zero next stops it.
func (g *Guard) schedule(next time.Time) {
	if next.IsZero() {
		g.stopTimer()
		return
	}
	if g.timer != nil && g.timerAt.Equal(next) {
		return
	}
	g.stopTimer()
	g.timerN++
	n := g.timerN
	g.timer, g.timerAt = time.AfterFunc(max(next.Sub(g.cfg.Now()), 0), func() { g.tick(n) }), next
}

func (g *Guard) stopTimer() {
	if g.timer != nil {
		g.timer.Stop()
		g.timer, g.timerAt = nil, time.Time{}
	}
}

// countHold counts a hold begun: of a whole update, or of one service's
// removals.
func (g *Guard) countHold(whole bool) {
	switch m := g.cfg.Metrics; {
	case m == nil:
	case whole:
		m.Holds.Inc()
	default:
		m.ServiceHolds.Inc()
	}
}

func (g *Guard) setHeld(whole bool, services int) {
	m := g.cfg.Metrics
	if m == nil {
		return
	}
	w := 0.0
	if whole {
		w = 1
	}
	m.Held.Set(w)
	m.HeldServices.Set(float64(services))
}
