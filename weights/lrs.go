package weights

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	lrsv3 "github.com/envoyproxy/go-control-plane/envoy/service/load_stats/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/xds-server/xds-server/internal/metricreg"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Reasons of xds_weights_lrs_skipped_total: why an endpoint's (or a
// locality's) load in an LRS request did not become a report.
const (
	skipNoCluster    = "no_cluster"       // ClusterStats without a cluster name
	skipNoInterval   = "no_interval"      // no load_report_interval and no previous report to measure from
	skipNoAddress    = "no_address"       // endpoint without a socket address
	skipUnknown      = "unknown_endpoint" // Resolve does not know the address
	skipLocalityOnly = "locality_only"    // a locality's load without endpoint granularity (grpc-go), with no known split
	skipRejected     = "rejected"         // the sink refused the report
)

// defaultLRSInterval is the load_reporting_interval asked of clients when
// LRSConfig.Interval is 0.
const defaultLRSInterval = time.Second

// LRSConfig configures the LRS server.
type LRSConfig struct {
	// Sink receives one Report per endpoint per LRS request; required
	// (a *Tracker). Its errors are counted and logged, never sent to the
	// client.
	Sink interface {
		Observe(r Report, now time.Time) error
	}
	// Resolve maps an upstream endpoint's socket address in a cluster (the
	// cluster name is the service name) to the endpoint ID of that
	// service; ok false skips the endpoint. Required; called from many
	// streams at once.
	Resolve func(cluster, address string, port uint32) (endpoint string, ok bool)
	// Split, optional, says how a node spreads its requests to a cluster
	// over the endpoints it is given (their ids, and shares summing to 1,
	// e.g. those of the EDS weights it was sent): the load of a locality
	// without endpoint stats, all that grpc-go reports, is spread by it.
	// nil, or ok false: such a load is skipped (locality_only). Called
	// from many streams at once.
	Split func(node, cluster string) (ids []string, shares []float64, ok bool)
	// Known, optional, reports whether a cluster is a service the
	// pipeline knows: only those are counted in and out of the node's
	// zone (xds_weights_lrs_zone_requests_total); nil counts none.
	Known func(service string) bool
	// Interval is the load_reporting_interval asked of clients; 0 means 1s.
	Interval   time.Duration
	Logger     *slog.Logger // nil means slog.Default()
	Registerer prometheus.Registerer
	Now        func() time.Time // nil means time.Now
}

// Validate reports every configuration error at once. The error starts
// with "weights: lrs: invalid config" and wraps ErrInvalidConfig.
func (c LRSConfig) Validate() error {
	var errs []error
	if c.Sink == nil {
		errs = append(errs, errors.New("sink is required"))
	}
	if c.Resolve == nil {
		errs = append(errs, errors.New("resolve is required"))
	}
	if c.Interval < 0 {
		errs = append(errs, fmt.Errorf("interval %v is negative", c.Interval))
	}
	if len(errs) == 0 {
		return nil
	}
	return lrsConfigError{errors.Join(errs...)}
}

// lrsConfigError is the error of LRSConfig.Validate.
type lrsConfigError struct{ err error }

func (e lrsConfigError) Error() string   { return "weights: lrs: invalid config: " + e.err.Error() }
func (e lrsConfigError) Unwrap() []error { return []error{ErrInvalidConfig, e.err} }

func (c LRSConfig) withDefaults() LRSConfig {
	if c.Interval == 0 {
		c.Interval = defaultLRSInterval
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	c.Logger = c.Logger.With("component", "weights.lrs")
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// LRS is an envoy.service.load_stats.v3.LoadReportingService server. Each
// client (Envoy or gRPC) opens one stream per node: the first request
// names the node, the server answers once asking for the load of all
// clusters per endpoint every Interval, and each later request becomes
// one Report per endpoint (Node set) handed to the sink.
type LRS struct {
	lrsv3.UnimplementedLoadReportingServiceServer
	cfg  LRSConfig
	m    *lrsMetrics
	stop context.CancelFunc
	done context.Context // done when Stop was called
}

// NewLRS returns an LRS server, or the error of cfg.Validate or of
// registering its metrics.
func NewLRS(cfg LRSConfig) (*LRS, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	m, err := newLRSMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	s := &LRS{cfg: cfg, m: m}
	s.done, s.stop = context.WithCancel(context.Background())
	return s, nil
}

// Register registers the LoadReportingService on g.
func (s *LRS) Register(g *grpc.Server) {
	lrsv3.RegisterLoadReportingServiceServer(g, s)
}

// Stop ends every open stream with status OK and refuses new ones
// (Unavailable), so that the gRPC server's GracefulStop can finish:
// clients hold LRS streams open for as long as they run. Idempotent.
func (s *LRS) Stop() { s.stop() }

// lrsRecv is one result of stream.Recv.
type lrsRecv struct {
	req *lrsv3.LoadStatsRequest
	err error
}

// StreamLoadStats implements lrsv3.LoadReportingServiceServer. It returns
// nil when the client closes its side or Stop is called, the client's
// context error when it cancels, and InvalidArgument when the first
// request does not name the node.
func (s *LRS) StreamLoadStats(stream lrsv3.LoadReportingService_StreamLoadStatsServer) error {
	if s.done.Err() != nil {
		return status.Error(codes.Unavailable, "weights: lrs: server is stopping")
	}
	s.m.streams.Inc()
	defer s.m.streams.Dec()
	// Recv blocks until a message arrives or the stream ends; it runs in its
	// own goroutine so that Stop can end the stream. Once this handler
	// returns, gRPC cancels the stream and the pending Recv returns.
	quit := make(chan struct{})
	defer close(quit)
	reqs := make(chan lrsRecv)
	go func() {
		for {
			req, err := stream.Recv()
			select {
			case reqs <- lrsRecv{req, err}:
			case <-quit:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	var st *lrsStream
	for {
		var in lrsRecv
		select {
		case <-s.done.Done():
			return nil
		case in = <-reqs:
		}
		switch {
		case errors.Is(in.err, io.EOF):
			return nil
		case in.err != nil:
			return in.err
		}
		now := s.cfg.Now()
		if st == nil {
			var err error
			if st, err = s.open(stream, in.req, now); err != nil {
				return err
			}
		}
		s.handle(st, in.req, now)
	}
}

// lrsStream is the state of one stream.
type lrsStream struct {
	node string
	at   *corev3.Locality // the node's, from its first request; nil if none
	log  *slog.Logger
	prev time.Time // when the previous request arrived
}

// open checks the stream's first request and sends the only response.
func (s *LRS) open(stream lrsv3.LoadReportingService_StreamLoadStatsServer, req *lrsv3.LoadStatsRequest, now time.Time) (*lrsStream, error) {
	node := req.GetNode().GetId()
	if node == "" {
		return nil, status.Error(codes.InvalidArgument, "weights: lrs: the first request has no node id")
	}
	resp := &lrsv3.LoadStatsResponse{
		SendAllClusters:           true,
		LoadReportingInterval:     durationpb.New(s.cfg.Interval),
		ReportEndpointGranularity: true,
	}
	if err := stream.Send(resp); err != nil {
		return nil, fmt.Errorf("weights: lrs: node %q: send response: %w", node, err)
	}
	st := &lrsStream{node: node, at: req.GetNode().GetLocality(), log: s.cfg.Logger.With("node", node), prev: now}
	st.log.Debug("lrs stream opened", "interval", s.cfg.Interval)
	return st, nil
}

// handle turns the load of one request into reports and hands them to the
// sink.
func (s *LRS) handle(st *lrsStream, req *lrsv3.LoadStatsRequest, now time.Time) {
	elapsed := now.Sub(st.prev)
	st.prev = now
	if len(req.GetClusterStats()) == 0 {
		return
	}
	s.countZones(st, req)
	reports, skipped := lrsReports(st.node, req, now, elapsed, s.cfg.Resolve, s.cfg.Split)
	for reason, n := range skipped {
		s.m.skipped.WithLabelValues(reason).Add(float64(n))
	}
	var rejected int
	var first error
	for _, r := range reports {
		if err := s.cfg.Sink.Observe(r, now); err != nil {
			rejected++
			first = cmpErr(first, err)
			continue
		}
		s.m.reports.Inc()
	}
	if rejected > 0 {
		s.m.skipped.WithLabelValues(skipRejected).Add(float64(rejected))
		st.log.Warn("lrs reports rejected", "rejected", rejected, "reports", len(reports), "err", first)
	}
}

// Where a reported request was served, relative to the node's zone
// (xds_weights_lrs_zone_requests_total's label).
const (
	zoneIn      = "in_zone"
	zoneOut     = "out_of_zone"
	zoneUnknown = "unknown" // the node or the upstream locality names no zone
)

// countZones counts the requests req reports per known service, by where
// they were served: in the node's zone (same zone, and same region when
// the node names one) or out of it.
func (s *LRS) countZones(st *lrsStream, req *lrsv3.LoadStatsRequest) {
	if s.cfg.Known == nil {
		return
	}
	for _, cs := range req.GetClusterStats() {
		service := ClusterService(cs.GetClusterName())
		if !s.cfg.Known(service) {
			continue
		}
		for _, loc := range cs.GetUpstreamLocalityStats() {
			n := loc.GetTotalSuccessfulRequests() + loc.GetTotalErrorRequests()
			if n == 0 {
				continue
			}
			s.m.zones.WithLabelValues(service, whereServed(st.at, loc.GetLocality())).Add(float64(n))
		}
	}
}

// whereServed places an upstream locality relative to the node's.
func whereServed(node, up *corev3.Locality) string {
	switch {
	case node.GetZone() == "" || up.GetZone() == "":
		return zoneUnknown
	case up.GetZone() == node.GetZone() && (node.GetRegion() == "" || up.GetRegion() == node.GetRegion()):
		return zoneIn
	default:
		return zoneOut
	}
}

// cmpErr returns first, or err when first is nil.
func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// lrsMetrics are the LRS collectors.
type lrsMetrics struct {
	streams prometheus.Gauge
	reports prometheus.Counter
	skipped *prometheus.CounterVec
	zones   *prometheus.CounterVec
}

// newLRSMetrics creates the collectors and registers them with reg (nil
// reg: not registered).
func newLRSMetrics(reg prometheus.Registerer) (*lrsMetrics, error) {
	m := &lrsMetrics{
		streams: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "xds_weights_lrs_streams", Help: "Open LRS (load reporting) streams.",
		}),
		reports: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "xds_weights_lrs_reports_total", Help: "Per-node endpoint load reports from LRS accepted by the weight tracker.",
		}),
		skipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "xds_weights_lrs_skipped_total",
			Help: "Endpoint (or locality) loads in LRS requests that did not become a report, by reason.",
		}, []string{"reason"}),
		zones: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "xds_weights_lrs_zone_requests_total",
			Help: "Requests nodes reported over LRS, by service and where they were served: in_zone (the node's own zone), out_of_zone, or unknown (the node or the upstream locality names no zone).",
		}, []string{"service", "where"}),
	}
	for _, reason := range []string{skipNoCluster, skipNoInterval, skipNoAddress, skipUnknown, skipLocalityOnly, skipRejected} {
		m.skipped.WithLabelValues(reason) // export zeros
	}
	if err := metricreg.Register(reg, m.streams, m.reports, m.skipped, m.zones); err != nil {
		return nil, fmt.Errorf("weights: lrs: register metrics: %w", err)
	}
	return m, nil
}
