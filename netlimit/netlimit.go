package netlimit

import (
	"net"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the connection collectors of every limited listener,
// labelled by listener name.
type Metrics struct {
	open    *prometheus.GaugeVec
	max     *prometheus.GaugeVec
	refused *prometheus.CounterVec
}

// NewMetrics registers the collectors with reg (nil: not registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		open: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "listener_open_connections", Help: "Connections open on a listener, by listener (xds, ratelimit, admin).",
		}, []string{"listener"}),
		max: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "listener_max_connections", Help: "The connection cap of a listener (its <listener>.max_connections key); 0 means none.",
		}, []string{"listener"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "listener_connections_refused_total", Help: "Connections closed as soon as accepted because the listener was at its cap, by listener.",
		}, []string{"listener"}),
	}
	if reg != nil {
		reg.MustRegister(m.open, m.max, m.refused)
	}
	return m
}

// Listener is a net.Listener that holds at most Max connections open.
// A connection accepted while Max are open is closed at once and counted
// as refused, so the backlog keeps draining and the flood costs no more
// descriptors than the cap.
type Listener struct {
	net.Listener
	max     int64 // <= 0: no cap
	open    atomic.Int64
	gauge   prometheus.Gauge
	refused prometheus.Counter
}

// Limit wraps l so that it holds at most max connections (max <= 0: no
// cap, connections are still counted); name labels its metrics; m nil
// means unregistered metrics.
func Limit(l net.Listener, name string, max int, m *Metrics) *Listener {
	if m == nil {
		m = NewMetrics(nil)
	}
	m.max.WithLabelValues(name).Set(float64(max))
	return &Listener{Listener: l, max: int64(max),
		gauge: m.open.WithLabelValues(name), refused: m.refused.WithLabelValues(name)}
}

// Accept returns the next connection within the cap.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if n := l.open.Add(1); l.max > 0 && n > l.max {
			l.open.Add(-1)
			_ = c.Close()
			l.refused.Inc()
			continue
		}
		l.gauge.Inc()
		return &conn{Conn: c, l: l}, nil
	}
}

// Open returns the number of connections open now.
func (l *Listener) Open() int { return int(l.open.Load()) }

// conn gives its slot back when closed (once, however often Close is called).
type conn struct {
	net.Conn
	l    *Listener
	once sync.Once
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.open.Add(-1)
		c.l.gauge.Dec()
	})
	return err
}

// Open returns the open-connections gauge of a listener (for tests and
// checks).
func (m *Metrics) Open(listener string) prometheus.Gauge { return m.open.WithLabelValues(listener) }

// Refused returns the refused-connections counter of a listener.
func (m *Metrics) Refused(listener string) prometheus.Counter {
	return m.refused.WithLabelValues(listener)
}
