package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	orcadata "github.com/cncf/xds/go/xds/data/orca/v3"
	orcaservice "github.com/cncf/xds/go/xds/service/orca/v3"
	"google.golang.org/grpc/orca"
	"google.golang.org/grpc/status"
)

// loadPeriod is how often the load figures reported over ORCA are updated.
const loadPeriod = time.Second

// reportLoad samples l into m every loadPeriod until ctx ends: CPU
// utilization (fixed; else, with s set, the share of slot time in use;
// else average RPCs in flight / capacity), QPS and EPS.
func reportLoad(ctx context.Context, l *load, s *slots, m orca.ServerMetricsRecorder, utilization float64, capacity int) {
	tick := time.NewTicker(loadPeriod)
	defer tick.Stop()
	setLoad(m, sample{}, utilization, capacity)
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			calls, u := l.sample(now), utilization
			if s != nil {
				busy := s.busy.sample(now)
				if u < 0 {
					u = s.utilization(busy)
				}
			}
			setLoad(m, calls, u, capacity)
		}
	}
}

// setLoad records s in m; utilization < 0 derives the CPU utilization
// from s.Concurrency and capacity.
func setLoad(m orca.ServerMetricsRecorder, s sample, utilization float64, capacity int) {
	if utilization < 0 {
		utilization = s.Concurrency / float64(capacity)
	}
	m.SetCPUUtilization(utilization)
	m.SetQPS(s.QPS)
	m.SetEPS(s.EPS)
}

// serverMetrics is what the backend reports over ORCA: the load recorded
// in its recorder and, once lame duck begins, the named metric lameDuckMetric
// with the value 1.
type serverMetrics struct {
	orca.ServerMetricsRecorder
	lameDuckMetric string
	lameDuck       atomic.Bool
}

// ServerMetrics returns a copy of the current metrics.
func (m *serverMetrics) ServerMetrics() *orca.ServerMetrics {
	sm := m.ServerMetricsRecorder.ServerMetrics()
	if m.lameDuck.Load() {
		sm.NamedMetrics[m.lameDuckMetric] = 1
	}
	return sm
}

// orcaService is xds.service.orca.v3.OpenRcaService, ORCA out of band. It
// sends the metrics of its provider when a stream opens, then at the
// interval the client asks for (at least minInterval), and at once when
// lame duck begins. Its streams end when stopping is closed, so that they
// do not hold up the graceful stop of the server.
//
// grpc-go's orca.Register serves the same reports, but no more often than
// every 30s and never at once on a change: too slow for a drain signal.
type orcaService struct {
	orcaservice.UnimplementedOpenRcaServiceServer
	metrics     orca.ServerMetricsProvider
	minInterval time.Duration   // > 0
	lameDuck    <-chan struct{} // closed when lame duck begins, after the metric is set
	stopping    <-chan struct{} // closed when the server stops accepting
}

// StreamCoreMetrics streams load reports until the client leaves or the
// server stops accepting.
func (s *orcaService) StreamCoreMetrics(req *orcaservice.OrcaLoadReportRequest,
	stream orcaservice.OpenRcaService_StreamCoreMetricsServer) error {
	tick := time.NewTicker(max(req.GetReportInterval().AsDuration(), s.minInterval))
	defer tick.Stop()
	lameDuck := s.lameDuck
	select {
	case <-lameDuck: // already in the first report
		lameDuck = nil
	default:
	}
	for {
		if err := stream.Send(loadReport(s.metrics.ServerMetrics())); err != nil {
			return fmt.Errorf("backend: orca: send: %w", err)
		}
		select {
		case <-stream.Context().Done():
			return status.FromContextError(stream.Context().Err()).Err()
		case <-s.stopping:
			return nil
		case <-lameDuck:
			lameDuck = nil // report the change once, now
		case <-tick.C:
		}
	}
}

// loadReport converts m (-1 meaning unset) to its ORCA proto.
func loadReport(m *orca.ServerMetrics) *orcadata.OrcaLoadReport {
	r := &orcadata.OrcaLoadReport{Utilization: m.Utilization, NamedMetrics: m.NamedMetrics}
	for _, f := range []struct {
		from float64
		to   *float64
	}{
		{m.CPUUtilization, &r.CpuUtilization},
		{m.MemUtilization, &r.MemUtilization},
		{m.AppUtilization, &r.ApplicationUtilization},
		{m.QPS, &r.RpsFractional},
		{m.EPS, &r.Eps},
	} {
		if f.from != -1 {
			*f.to = f.from
		}
	}
	return r
}
