package weights

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"time"

	orcadata "github.com/cncf/xds/go/xds/data/orca/v3"
	orcaservice "github.com/cncf/xds/go/xds/service/orca/v3"
	"github.com/xds-server/xds-server/internal/pause"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"
)

// run streams reports from t until ctx ends, reconnecting after errors
// with jittered exponential backoff. An invalid target is logged once and
// waits for the stop.
func (o *ORCA) run(ctx context.Context, t ORCATarget) {
	log := o.log.With("service", t.Service, "endpoint", t.Endpoint, "address", t.Address)
	if err := t.validate(); err != nil {
		o.metrics.failed(errDial)
		log.Error("orca target is invalid, not streaming", "error", err)
		<-ctx.Done()
		return
	}
	failures := 0 // consecutive sessions without a report
	for {
		reported, err := o.session(ctx, t, log)
		if ctx.Err() != nil {
			return
		}
		if reported {
			failures = 0
		}
		delay := orcaBackoff(o.cfg.BackoffBase, o.cfg.BackoffMax, failures)
		level := slog.LevelDebug // a backend that stays down is logged once
		if failures == 0 {
			level = slog.LevelWarn
		}
		log.Log(ctx, level, "orca stream failed, reconnecting",
			"error", err, "attempt", failures+1, "backoff", delay)
		failures++
		if !pause.For(ctx, delay) {
			return
		}
	}
}

// session dials t, opens the stream and hands its reports to the sink
// until the stream fails or ctx ends. reported tells whether any report
// arrived; err is never nil.
func (o *ORCA) session(ctx context.Context, t ORCATarget, log *slog.Logger) (reported bool, err error) {
	conn, err := grpc.NewClient(t.Address, o.cfg.DialOptions...)
	if err != nil {
		o.metrics.failed(errDial)
		return false, fmt.Errorf("weights: orca: dial %s: %w", t.Address, err)
	}
	defer conn.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // before conn.Close: ends the stream first
	req := &orcaservice.OrcaLoadReportRequest{ReportInterval: durationpb.New(o.cfg.Interval)}
	stream, err := orcaservice.NewOpenRcaServiceClient(conn).StreamCoreMetrics(ctx, req)
	if err != nil {
		if ctx.Err() == nil {
			o.metrics.failed(errStream)
		}
		return false, fmt.Errorf("weights: orca: open stream to %s: %w", t.Address, err)
	}
	o.metrics.opened(1)
	defer o.metrics.opened(-1)
	rejected := 0 // reports the sink rejected in this session
	for {
		lr, err := stream.Recv()
		if err != nil {
			if ctx.Err() == nil {
				o.metrics.failed(errStream)
			}
			return reported, fmt.Errorf("weights: orca: stream from %s: %w", t.Address, err)
		}
		if !reported {
			log.Debug("orca stream reporting")
		}
		reported = true
		o.metrics.reported()
		now := o.cfg.Now()
		r := orcaReport(t, lr, now)
		r.LameDuck = o.cfg.LameDuckMetric != "" && r.Named[o.cfg.LameDuckMetric] >= 1
		if err := o.cfg.Sink.Observe(r, now); err != nil {
			o.metrics.failed(errObserve)
			level := slog.LevelDebug // the same error at every report is logged once
			if rejected == 0 {
				level = slog.LevelWarn
			}
			rejected++
			log.Log(ctx, level, "orca report rejected", "error", err, "rejected", rejected)
		}
	}
}

// orcaReport converts lr, received from t at now, to a backend Report.
func orcaReport(t ORCATarget, lr *orcadata.OrcaLoadReport, now time.Time) Report {
	r := Report{
		Service:  t.Service,
		Endpoint: t.Endpoint,
		At:       now,
		QPS:      lr.GetRpsFractional(),
		EPS:      lr.GetEps(),
		CPU:      lr.GetCpuUtilization(),
		App:      lr.GetApplicationUtilization(),
	}
	// Named metrics, and named utilizations (all grpc-go's
	// ServerMetricsRecorder can send) where no named metric has the name.
	named, util := lr.GetNamedMetrics(), lr.GetUtilization()
	if len(named)+len(util) > 0 {
		r.Named = make(map[string]float64, len(named)+len(util))
		maps.Copy(r.Named, util)
		maps.Copy(r.Named, named)
	}
	return r
}

// validate reports every problem of t at once.
func (t ORCATarget) validate() error {
	var errs []error
	if t.Service == "" {
		errs = append(errs, errors.New("service is empty"))
	}
	if t.Endpoint == "" {
		errs = append(errs, errors.New("endpoint is empty"))
	}
	if _, port, err := net.SplitHostPort(t.Address); err != nil {
		errs = append(errs, fmt.Errorf("address %q is not host:port: %w", t.Address, err))
	} else if port == "" {
		errs = append(errs, fmt.Errorf("address %q has no port", t.Address))
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("weights: orca: invalid target %q/%q: %w", t.Service, t.Endpoint, errors.Join(errs...))
}

// orcaBackoff is the delay before the reconnection that follows failures
// consecutive failed sessions (0 for the first): d = base * 2^failures,
// at most maxDelay, drawn uniformly in [d/2, d]. base must be > 0.
func orcaBackoff(base, maxDelay time.Duration, failures int) time.Duration {
	d := base
	for i := 0; i < failures && d < maxDelay; i++ {
		d *= 2
	}
	d = min(d, maxDelay)
	return d/2 + rand.N(d-d/2+1)
}
