package weights

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/xds-server/xds-server/internal/metricreg"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// Defaults of ORCAConfig.
const (
	DefaultORCAInterval    = time.Second            // requested report interval
	DefaultORCABackoffBase = 250 * time.Millisecond // first reconnect delay
	DefaultORCABackoffMax  = 30 * time.Second       // largest reconnect delay
)

// ReportSink receives reports; *Tracker implements it.
type ReportSink interface {
	// Observe records r, received at now; an error rejects the report.
	Observe(r Report, now time.Time) error
}

var _ ReportSink = (*Tracker)(nil)

// ORCATarget is one backend whose ORCA out-of-band service the client
// streams load reports from. Targets are compared as a whole: a target
// whose Address changes is a new target.
type ORCATarget struct {
	Service  string // service name of the reports; required
	Endpoint string // endpoint ID of the reports; required
	Address  string // host:port of the backend's ORCA service; required
}

// ORCAConfig configures the ORCA out-of-band client.
type ORCAConfig struct {
	// Sink receives every report; required.
	Sink ReportSink
	// Interval is the report interval asked of the backends (> 0; 0 means
	// DefaultORCAInterval). grpc-go backends send reports no more often
	// than their MinReportingInterval (30s unless configured), and always
	// one as soon as the stream opens.
	Interval time.Duration
	// BackoffBase is the delay (>= 0; 0 means DefaultORCABackoffBase)
	// before the first reconnection after a stream error; it doubles at
	// each failed attempt up to BackoffMax, each delay drawn in [d/2, d],
	// and starts over after a stream has delivered a report.
	BackoffBase time.Duration
	// BackoffMax bounds the reconnect delay (>= BackoffBase; 0 means
	// DefaultORCABackoffMax).
	BackoffMax time.Duration
	// DialOptions are passed to grpc.NewClient for every backend; nil
	// means plaintext (insecure credentials).
	DialOptions []grpc.DialOption
	// Logger receives the client's logs; nil means slog.Default().
	Logger *slog.Logger
	// Registerer registers the client's metrics; nil means no metrics.
	Registerer prometheus.Registerer
	// Now is the clock that stamps reports; nil means time.Now.
	Now func() time.Time
	// LameDuckMetric, if set, is the named metric (or named utilization)
	// whose value of 1 or more marks a report LameDuck (drain.orca_metric).
	LameDuckMetric string
}

// orcaConfigError is the error of ORCAConfig.Validate: its message starts
// with "weights: orca: invalid config" and it wraps ErrInvalidConfig.
type orcaConfigError struct{ err error }

func (e orcaConfigError) Error() string   { return "weights: orca: invalid config: " + e.err.Error() }
func (e orcaConfigError) Unwrap() []error { return []error{ErrInvalidConfig, e.err} }

// Validate reports every invalid field at once, wrapping ErrInvalidConfig.
func (c ORCAConfig) Validate() error {
	var errs []error
	if c.Sink == nil {
		errs = append(errs, errors.New("sink is required"))
	}
	if c.Interval < 0 {
		errs = append(errs, fmt.Errorf("interval %v is negative", c.Interval))
	}
	if c.BackoffBase < 0 {
		errs = append(errs, fmt.Errorf("backoff base %v is negative", c.BackoffBase))
	}
	if c.BackoffMax < 0 {
		errs = append(errs, fmt.Errorf("backoff max %v is negative", c.BackoffMax))
	}
	d := c.withDefaults()
	if c.BackoffBase >= 0 && c.BackoffMax >= 0 && d.BackoffMax < d.BackoffBase {
		errs = append(errs, fmt.Errorf("backoff max %v is below backoff base %v", d.BackoffMax, d.BackoffBase))
	}
	if len(errs) == 0 {
		return nil
	}
	return orcaConfigError{errors.Join(errs...)}
}

// withDefaults returns c with its zero fields set to their defaults.
func (c ORCAConfig) withDefaults() ORCAConfig {
	c.Interval = cmp.Or(c.Interval, DefaultORCAInterval)
	c.BackoffBase = cmp.Or(c.BackoffBase, DefaultORCABackoffBase)
	c.BackoffMax = cmp.Or(c.BackoffMax, DefaultORCABackoffMax)
	if c.DialOptions == nil {
		c.DialOptions = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	c.Logger = cmp.Or(c.Logger, slog.Default())
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// ORCA is the ORCA out-of-band client: one goroutine per target streams
// xds.service.orca.v3.OpenRcaService/StreamCoreMetrics from the backend
// and hands every report to the sink as a backend Report (Node == "").
// It is safe for concurrent use.
type ORCA struct {
	cfg     ORCAConfig // with defaults
	log     *slog.Logger
	metrics *orcaMetrics

	mu      sync.Mutex
	closed  bool
	streams map[ORCATarget]*orcaStream
	wg      sync.WaitGroup // running stream goroutines
}

// orcaStream is the handle of one target's goroutine.
type orcaStream struct {
	cancel context.CancelFunc
	done   chan struct{} // closed when the goroutine has returned
}

// NewORCA returns a client with no targets, or the error of cfg.Validate
// or of registering its metrics.
func NewORCA(cfg ORCAConfig) (*ORCA, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m, err := newORCAMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	return &ORCA{
		cfg:     cfg,
		log:     cfg.Logger.With("component", "weights.orca"),
		metrics: m,
		streams: map[ORCATarget]*orcaStream{},
	}, nil
}

// SetTargets makes ts the set of streamed targets: it starts streams for
// new targets, stops those of targets not in ts and keeps the others
// untouched, so calling it often with the same list is cheap. Duplicates
// in ts count once. It returns once the stopped streams have ended (their
// connections closed, no more reports from them). After Close it does
// nothing.
func (o *ORCA) SetTargets(ts []ORCATarget) {
	want := make(map[ORCATarget]bool, len(ts))
	for _, t := range ts {
		want[t] = true
	}
	var stopped []*orcaStream
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return
	}
	for t, s := range o.streams {
		if !want[t] {
			s.cancel()
			stopped = append(stopped, s)
			delete(o.streams, t)
		}
	}
	for t := range want {
		if o.streams[t] == nil {
			o.streams[t] = o.start(t)
		}
	}
	o.mu.Unlock()
	for _, s := range stopped {
		<-s.done
	}
}

// start runs the goroutine of t. o.mu must be held and o not closed.
func (o *ORCA) start(t ORCATarget) *orcaStream {
	ctx, cancel := context.WithCancel(context.Background())
	s := &orcaStream{cancel: cancel, done: make(chan struct{})}
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		defer close(s.done)
		o.run(ctx, t)
	}()
	return s
}

// Close stops every stream and waits until all have ended. Later calls,
// and SetTargets after Close, do nothing.
func (o *ORCA) Close() {
	o.mu.Lock()
	o.closed = true
	for t, s := range o.streams {
		s.cancel()
		delete(o.streams, t)
	}
	o.mu.Unlock()
	o.wg.Wait()
}

// orcaMetrics are the client's collectors. A nil *orcaMetrics records
// nothing.
type orcaMetrics struct {
	streams prometheus.Gauge       // open streams
	reports prometheus.Counter     // reports received
	errors  *prometheus.CounterVec // errors by kind: dial, stream, observe
}

// newORCAMetrics creates the collectors and registers them with reg; nil
// reg means no metrics. Collectors already registered (by another client
// on the same registry) are shared.
func newORCAMetrics(reg prometheus.Registerer) (*orcaMetrics, error) {
	if reg == nil {
		return nil, nil
	}
	m := &orcaMetrics{
		streams: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "xds_weights_orca_streams",
			Help: "ORCA out-of-band streams open to backends.",
		}),
		reports: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "xds_weights_orca_reports_total",
			Help: "ORCA load reports received from backends.",
		}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "xds_weights_orca_errors_total",
			Help: "ORCA client errors, by kind (dial, stream or observe).",
		}, []string{"kind"}),
	}
	var err error
	if m.streams, err = metricreg.Reuse(reg, m.streams); err != nil {
		return nil, fmt.Errorf("weights: orca: metrics: %w", err)
	}
	if m.reports, err = metricreg.Reuse(reg, m.reports); err != nil {
		return nil, fmt.Errorf("weights: orca: metrics: %w", err)
	}
	if m.errors, err = metricreg.Reuse(reg, m.errors); err != nil {
		return nil, fmt.Errorf("weights: orca: metrics: %w", err)
	}
	for _, kind := range []string{errDial, errStream, errObserve} {
		m.errors.WithLabelValues(kind) // export zeros
	}
	return m, nil
}

// Error kinds of xds_weights_orca_errors_total.
const (
	errDial    = "dial"    // grpc.NewClient failed, or the target is invalid
	errStream  = "stream"  // the stream could not open, or ended with an error
	errObserve = "observe" // the sink rejected a report
)

func (m *orcaMetrics) failed(kind string) {
	if m != nil {
		m.errors.WithLabelValues(kind).Inc()
	}
}

func (m *orcaMetrics) opened(delta float64) {
	if m != nil {
		m.streams.Add(delta)
	}
}

func (m *orcaMetrics) reported() {
	if m != nil {
		m.reports.Inc()
	}
}
