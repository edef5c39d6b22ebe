package h2rpc

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics of a Server.
type metrics struct {
	refused        *prometheus.CounterVec // calls answered before the handler, by reason
	active         prometheus.Gauge       // calls whose handler runs
	connErrors     *prometheus.CounterVec // connections ended by an error, by HTTP/2 error code
	writes, frames prometheus.Counter     // socket writes and the frames they carried
}

// Reasons of <name>_lean_refused_total.
const (
	reasonUnimplemented = "unimplemented" // another method
	reasonCompressed    = "compressed"    // a compressed message
	reasonTooLarge      = "too_large"     // message or connection buffer bound
	reasonMalformed     = "malformed"     // bad headers, prefix or grpc-timeout, or no message
	reasonStreams       = "streams"       // over MaxStreams: REFUSED_STREAM
	reasonUnauthorized  = "unauthorized"  // Authorize refused
	reasonShutdown      = "shutting_down" // after GOAWAY
)

func newMetrics(name string, reg prometheus.Registerer) (*metrics, error) {
	if name == "" {
		name = "h2rpc"
	}
	m := &metrics{
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: name + "_lean_refused_total",
			Help: "Calls the lean gRPC server answered without running the handler, by reason: unimplemented (another method), compressed, too_large, malformed, streams (REFUSED_STREAM over the streams bound), unauthorized, shutting_down."}, []string{"reason"}),
		active: prometheus.NewGauge(prometheus.GaugeOpts{Name: name + "_lean_calls_active",
			Help: "Calls of the lean gRPC server whose handler is running."}),
		connErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: name + "_lean_connection_errors_total",
			Help: "Connections the lean gRPC server closed for an error, by HTTP/2 error code (PROTOCOL_ERROR, FLOW_CONTROL_ERROR, ...; io: the socket failed or timed out)."}, []string{"code"}),
		writes: prometheus.NewCounter(prometheus.CounterOpts{Name: name + "_lean_writes_total",
			Help: "Socket writes of the lean gRPC server (each carries the frames of every call ready then)."}),
		frames: prometheus.NewCounter(prometheus.CounterOpts{Name: name + "_lean_frames_written_total",
			Help: "HTTP/2 frames the lean gRPC server wrote."}),
	}
	for _, r := range []string{reasonUnimplemented, reasonCompressed, reasonTooLarge, reasonMalformed, reasonStreams, reasonUnauthorized, reasonShutdown} {
		m.refused.WithLabelValues(r)
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.refused, m.active, m.connErrors, m.writes, m.frames} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("h2rpc: registering metrics: %w", err)
			}
		}
	}
	return m, nil
}
