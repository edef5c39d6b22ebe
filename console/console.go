package console

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/xds-server/xds-server/discovery"
)

// Defaults of Config: the history keeps DefaultHistoryPoints samples
// taken every DefaultHistoryInterval (the last hour) of at most
// DefaultMaxSeries endpoints.
const (
	DefaultHistoryInterval = 10 * time.Second
	DefaultHistoryPoints   = 360
	DefaultMaxSeries       = 2000
	// statsTick is how often the rate-limit rates and top-k are refreshed.
	statsTick = time.Second
)

// Config configures New. Every source is optional: a page shows what its
// sources give.
type Config struct {
	Fleet    Fleet
	Weights  Weights
	Drains   Drains
	Rules    Rules
	Gatherer Gatherer
	// Policies is the traffic policy from Consul's config entries; nil:
	// not read (the pages show none).
	Policies Policies
	// Stats are the rate-limit statistics (NewStats), the observer of the
	// rate-limit service; nil: none (the page shows the rules only).
	Stats *Stats
	// TokenRequired: the admin address needs a bearer token. The pages are
	// then served without data (the script asks for the token once and
	// keeps it in sessionStorage); only /ui/api/ returns data.
	TokenRequired bool
	// HistoryInterval (> 0) between samples, HistoryPoints (> 1) kept per
	// series, MaxSeries (> 0) endpoint series; zero means the default.
	HistoryInterval time.Duration
	HistoryPoints   int
	MaxSeries       int
	// Registerer gets the console's metrics; nil registers none.
	Registerer prometheus.Registerer
	// Logger gets component=console; nil discards.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Validate reports every invalid field.
func (c Config) Validate() error {
	var errs []error
	if c.HistoryInterval < 0 {
		errs = append(errs, fmt.Errorf("history interval %v is negative", c.HistoryInterval))
	}
	if c.HistoryPoints < 0 || c.HistoryPoints == 1 {
		errs = append(errs, fmt.Errorf("history points %d: want 0 (default) or at least 2", c.HistoryPoints))
	}
	if c.MaxSeries < 0 {
		errs = append(errs, fmt.Errorf("max series %d is negative", c.MaxSeries))
	}
	if len(errs) > 0 {
		return fmt.Errorf("console: invalid config: %w", errors.Join(errs...))
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.HistoryInterval == 0 {
		c.HistoryInterval = DefaultHistoryInterval
	}
	if c.HistoryPoints == 0 {
		c.HistoryPoints = DefaultHistoryPoints
	}
	if c.MaxSeries == 0 {
		c.MaxSeries = DefaultMaxSeries
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Console is the web console. Safe for concurrent use.
type Console struct {
	cfg     Config
	log     *slog.Logger
	m       *metrics
	history *history
	stats   *Stats
	subsets *subsetCache

	first chan struct{} // gets one value when the first snapshot arrives

	mu      sync.Mutex
	snap    discovery.Snapshot // the latest served snapshot
	have    bool
	metrics every[FleetView] // the parts of the fleet page from the metrics (fromMetrics)
	nodes   every[nodesView] // the parts of the fleet page from the node list
}

// New returns a console; the error is that of cfg.Validate or of
// registering its metrics.
func New(cfg Config) (*Console, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	c := &Console{cfg: cfg, log: cfg.Logger.With("component", "console"), m: m,
		history: newHistory(cfg.HistoryPoints, cfg.MaxSeries, m.seriesDropped),
		stats:   cfg.Stats, subsets: newSubsetCache(cfg.Fleet), first: make(chan struct{}, 1)}
	if c.stats == nil {
		c.stats, _ = NewStats(nil)
	}
	c.stats.Tick(cfg.Now())
	return c, nil
}

// Observe takes the snapshot being served (after the drain overlay). It
// keeps a reference: the snapshot must not be mutated afterwards. A nil
// console ignores it.
func (c *Console) Observe(s discovery.Snapshot) {
	if c == nil {
		return
	}
	c.mu.Lock()
	first := !c.have
	c.snap, c.have = s, true
	c.mu.Unlock()
	if first {
		c.first <- struct{}{} // room for one: never blocks
	}
}

// snapshot is the latest served snapshot, and whether there is one.
func (c *Console) snapshot() (discovery.Snapshot, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.snap, c.have
}

// Run samples the history every HistoryInterval (and when the first
// snapshot arrives) and refreshes the rate-limit statistics every second
// until ctx is done.
func (c *Console) Run(ctx context.Context) {
	hist := time.NewTicker(c.cfg.HistoryInterval)
	defer hist.Stop()
	tick := time.NewTicker(statsTick)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.first:
			c.Sample(c.cfg.Now())
		case <-hist.C:
			c.Sample(c.cfg.Now())
		case <-tick.C:
			c.stats.Tick(c.cfg.Now())
		}
	}
}

// Sample adds one point at now to the history: every endpoint's weight
// and utilization, and every service's spread.
func (c *Console) Sample(now time.Time) {
	snap, ok := c.snapshot()
	if !ok {
		return
	}
	c.history.add(now, samplePoint(snap, c.table()))
}
