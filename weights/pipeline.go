package weights

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
)

// Publisher takes the weights the Pipeline computes; *xds.Server
// satisfies it. Which endpoints each node is given comes the other way,
// fed to the pipeline (SetSubsets).
type Publisher interface {
	// SetWeights replaces the global EDS weights: service -> endpoint id
	// -> weight (>= 1).
	SetWeights(map[string]map[string]uint32)
	// SetNodeWeights replaces the per-node EDS weights: service -> node id
	// -> endpoint id -> weight (>= 1).
	SetNodeWeights(map[string]map[string]map[string]uint32)
}

// Modes of a weighted service (services.<name>.weights.mode).
const (
	ModeGlobal  = "global"   // one weight set for every node (the default)
	ModePerNode = "per_node" // each node gets its own weights over its subset
)

// Report sources (services.<name>.weights.sources).
const (
	SourceORCA = "orca" // the ORCA out-of-band client, to the backends
	SourceLRS  = "lrs"  // the LRS server, from the clients
	SourceHTTP = "http" // the HTTP push API (POST /v1/load)
)

// ServiceConfig is one service's weight settings, resolved (its own over
// the defaults).
type ServiceConfig struct {
	Enabled      bool     // weights from reports; false: discovery weights only
	Mode         string   // ModeGlobal (or "") or ModePerNode
	Sources      []string // SourceORCA, SourceLRS, SourceHTTP: the reports it takes
	ORCAPortMeta string   // meta key holding the backend's ORCA port; "" or absent: the service port
	// Spill turns on capacity-aware spill between the service's zones
	// (spill.go; set with weights enabled and a locality failover list;
	// ignored without Enabled):
	// the pipeline computes each zone's ZoneSpill and hands it to a
	// Publisher that is a SpillPublisher.
	Spill bool
}

// PipelineConfig configures a Pipeline.
type PipelineConfig struct {
	Tracker Config      // the formula, blackout, expiry, smoothing, overload guard
	Solve   SolveConfig // per_node services' solver
	// Balance, if set, rebalances global-mode services with their nodes'
	// subsets and LRS rates (BalanceService); nil: off.
	Balance *BalanceConfig
	// Services returns a service's settings; required.
	Services func(service string) ServiceConfig
	// Publisher receives the weights; required.
	Publisher Publisher
	// GRPC is the server the LRS service is registered on (the xDS one);
	// required.
	GRPC *grpc.Server
	// LameDuckMetric, optional (drain.orca_metric), is the ORCA named
	// metric whose value of 1 or more marks an endpoint lame duck, whether
	// or not its service takes ORCA reports for weights: the transitions
	// go to the subscribers (SubscribeLameDuck, the drains). "": off.
	LameDuckMetric string
	// HA, optional, shares reports and the global table with the other
	// replicas (ha.enabled); nil: this replica alone (as without HA).
	HA *HAConfig

	UpdatePeriod    time.Duration // recompute this often (RunnerConfig)
	MinChange       float64       // relative share change that warrants a push, in [0, 1)
	MinPushInterval time.Duration // at most one weight-driven push per this
	ORCAInterval    time.Duration // report interval asked of backends
	LRSInterval     time.Duration // load report interval asked of clients

	Logger     *slog.Logger          // nil: slog.Default()
	Registerer prometheus.Registerer // nil: no metrics
}

// Validate reports what is missing; the parts (tracker, solver, runner,
// ORCA, LRS) check their own settings when the Pipeline builds them.
func (c PipelineConfig) Validate() error {
	var errs []error
	if c.Services == nil {
		errs = append(errs, errors.New("weights: pipeline: no service settings"))
	}
	if c.Publisher == nil {
		errs = append(errs, errors.New("weights: pipeline: no publisher"))
	}
	if c.GRPC == nil {
		errs = append(errs, errors.New("weights: pipeline: no gRPC server for LRS"))
	}
	if err := c.HA.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Pipeline wires EDS weights from utilization reports: the tracker and its
// runner (which hands tables to the Publisher), the ORCA client (streams
// to the backends of services with the orca source), the LRS server (on
// the GRPC server) and the HTTP push API, run as stages (stages.go).
// Discovery snapshots (Observe) tell it which endpoints exist, the xDS
// server's views (SetSubsets) which endpoints each node is given; the
// drains subscribe to its lame-duck transitions (SubscribeLameDuck).
// Safe for concurrent use.
type Pipeline struct {
	cfg     PipelineConfig
	log     *slog.Logger
	tracker *Tracker
	runner  *Runner
	orca    *ORCA
	lrs     *LRS
	push    http.Handler
	perNode *PerNode
	ha      *haWeights // nil unless cfg.HA
	lame    *lameDucks
	spill   *spillStage

	mu       sync.Mutex
	perSvc   map[string]bool              // services in per_node mode
	hadNode  bool                         // per-node weights were handed to the publisher
	known    map[string]bool              // services the tracker holds
	services map[string]bool              // every service of the latest snapshot (ServiceState)
	addrs    map[string]map[string]string // service -> host:port -> endpoint id (for LRS)
	sources  map[string]map[string]bool   // service -> enabled sources

	subsets latestSubsets // the node subsets as last fed (SetSubsets)
}

// NewPipeline builds the pipeline and registers LRS on cfg.GRPC; nothing
// runs before Run.
func NewPipeline(cfg PipelineConfig) (*Pipeline, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With("component", "weights")
	tr, err := NewTracker(cfg.Tracker)
	if err != nil {
		return nil, fmt.Errorf("weights: %w", err)
	}
	p := &Pipeline{cfg: cfg, log: log, tracker: tr, known: map[string]bool{}, lame: newLameDucks(),
		addrs: map[string]map[string]string{}, sources: map[string]map[string]bool{}, perSvc: map[string]bool{}}
	if p.perNode, err = NewPerNode(cfg.Solve, cfg.MinChange); err != nil {
		return nil, fmt.Errorf("weights: %w", err)
	}
	rc := RunnerConfig{Tracker: tr, Registerer: cfg.Registerer,
		Publish:      func(t Table) { cfg.Publisher.SetWeights(t.Map()) },
		PublishNodes: func(t Table) bool { return p.publishNodes(t, p.subsets.get()) },
		NodeDebug: func(service, node string) (any, bool) {
			return p.perNode.Debug(service, node)
		},
		UpdatePeriod: cfg.UpdatePeriod, MinChange: cfg.MinChange, MinPushInterval: cfg.MinPushInterval,
	}
	if p.spill, err = newSpillStage(cfg, log); err != nil {
		return nil, err
	}
	if cfg.HA != nil {
		if p.ha, err = newHAWeights(*cfg.HA, cfg.Tracker, log); err != nil {
			return nil, err
		}
		rc.Tracker, rc.Publish = p.ha.merged, p.ha.publish
	}
	if p.runner, err = NewRunner(rc); err != nil {
		return nil, err
	}
	if p.orca, err = NewORCA(ORCAConfig{Sink: p.sink(SourceORCA), Interval: cfg.ORCAInterval,
		LameDuckMetric: cfg.LameDuckMetric, Logger: log, Registerer: cfg.Registerer}); err != nil {
		return nil, err
	}
	if p.lrs, err = NewLRS(LRSConfig{Sink: p.sink(SourceLRS), Resolve: p.resolve, Split: p.split, Known: p.isKnown,
		Interval: cfg.LRSInterval, Logger: log, Registerer: cfg.Registerer}); err != nil {
		return nil, err
	}
	if p.push, err = NewHTTPHandler(HTTPConfig{Sink: p.sink(SourceHTTP), Services: p, Logger: log, Registerer: cfg.Registerer}); err != nil {
		return nil, err
	}
	p.lrs.Register(cfg.GRPC)
	return p, nil
}

// StopLRS ends the LRS streams (which would otherwise hold a graceful
// stop of the gRPC server until its deadline).
func (p *Pipeline) StopLRS() { p.lrs.Stop() }

// Table returns the weight table as last computed (the web console).
func (p *Pipeline) Table() Table { return p.runner.Table() }

// Handlers adds POST /v1/load (the push API) and GET /debug/weights to an
// admin mux.
func (p *Pipeline) Handlers(mux *http.ServeMux) {
	mux.Handle("/v1/load", p.push) // the handler answers other methods with a JSON 405
	mux.Handle("GET /debug/weights", p.debugHandler(p.runner.DebugHandler()))
}
