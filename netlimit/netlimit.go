package netlimit

import (
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the connection collectors of every limited listener,
// labelled by listener name.
type Metrics struct {
	open    *prometheus.GaugeVec
	max     *prometheus.GaugeVec
	refused *prometheus.CounterVec
	shed    *prometheus.CounterVec
	timeout *prometheus.CounterVec
}

// NewMetrics registers the collectors with reg (nil: not registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		open: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "listener_open_connections", Help: "Connections open on a listener, by listener (xds, ratelimit, admin).",
		}, []string{"listener"}),
		max: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "listener_max_connections", Help: "The connection cap of a listener: its <listener>.max_connections key, or the cap derived from the open-file limit when that is 0.",
		}, []string{"listener"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "listener_connections_refused_total", Help: "Connections closed as soon as accepted because the listener was at its cap, by listener.",
		}, []string{"listener"}),
	}
	m.shed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "listener_connections_shed_total", Help: "Connections closed to admit a new one while the listener was at its cap: the one idle longest (no request in progress), by listener (admin).",
	}, []string{"listener"})
	m.timeout = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "listener_read_timeouts_total", Help: "Connections whose read hit its deadline, by listener: on xds, no TLS handshake and HTTP/2 preface within xds.handshake_timeout; on admin, a request slower than its timeouts or an idle keep-alive.",
	}, []string{"listener"})
	if reg != nil {
		reg.MustRegister(m.open, m.max, m.refused, m.shed, m.timeout)
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
	timeout prometheus.Counter

	// With ShedIdle: the open connections, and the counter of those shed.
	shedding bool
	shed     prometheus.Counter
	mu       sync.Mutex
	conns    map[*conn]struct{}
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
		gauge: m.open.WithLabelValues(name), refused: m.refused.WithLabelValues(name),
		timeout: m.timeout.WithLabelValues(name), shed: m.shed.WithLabelValues(name)}
}

// ShedIdle makes the listener, when at its cap, close the connection
// that has been idle longest (a new connection that has not sent a whole
// request yet, or a keep-alive between requests) to admit the new one,
// and refuse the new one only when every open connection is in a
// request. So slow or silent clients cannot hold every slot: a health
// probe still gets in. The listener learns which connections are in a
// request from ConnState, which must be the http.Server's ConnState.
// Call it before the first Accept.
func (l *Listener) ShedIdle() {
	l.shedding = true
	l.conns = map[*conn]struct{}{}
}

// ConnState is an http.Server ConnState hook for a listener that sheds
// idle connections: it marks c in a request (active, hijacked) or idle
// (new, idle).
func (l *Listener) ConnState(c net.Conn, s http.ConnState) {
	if t, ok := c.(*tls.Conn); ok {
		c = t.NetConn()
	}
	lc, ok := c.(*conn)
	if !ok {
		return
	}
	switch s {
	case http.StateActive, http.StateHijacked:
		lc.busy.Store(true)
	case http.StateNew, http.StateIdle:
		lc.idleSince.Store(time.Now().UnixNano())
		lc.busy.Store(false)
	}
}

// shedOldestIdle closes the connection idle longest; false if every
// open connection is in a request.
func (l *Listener) shedOldestIdle() bool {
	l.mu.Lock()
	var victim *conn
	for c := range l.conns {
		if !c.busy.Load() && (victim == nil || c.idleSince.Load() < victim.idleSince.Load()) {
			victim = c
		}
	}
	l.mu.Unlock()
	if victim == nil {
		return false
	}
	l.shed.Inc() // counted before the close: whoever sees the close sees the count
	_ = victim.Close()
	return true
}

// Accept returns the next connection within the cap.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if n := l.open.Add(1); l.max > 0 && n > l.max && !(l.shedding && l.shedOldestIdle()) {
			l.open.Add(-1)
			l.refused.Inc() // counted before the close, as above
			_ = c.Close()
			continue
		}
		l.gauge.Inc()
		lc := &conn{Conn: c, l: l}
		if l.shedding {
			lc.idleSince.Store(time.Now().UnixNano())
			l.mu.Lock()
			l.conns[lc] = struct{}{}
			l.mu.Unlock()
		}
		return lc, nil
	}
}

// Open returns the number of connections open now.
func (l *Listener) Open() int { return int(l.open.Load()) }

// conn gives its slot back when closed (once, however often Close is
// called) and counts its first read timeout.
type conn struct {
	net.Conn
	l         *Listener
	once      sync.Once
	timedOut  atomic.Bool
	busy      atomic.Bool  // in a request (ShedIdle only)
	idleSince atomic.Int64 // Unix ns when it last became idle (ShedIdle only)
}

func (c *conn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	var ne net.Error
	if err != nil && errors.As(err, &ne) && ne.Timeout() && c.timedOut.CompareAndSwap(false, true) {
		c.l.timeout.Inc()
	}
	return n, err
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		if c.l.shedding {
			c.l.mu.Lock()
			delete(c.l.conns, c)
			c.l.mu.Unlock()
		}
		c.l.open.Add(-1)
		c.l.gauge.Dec()
	})
	return err
}

// Open returns the open-connections gauge of a listener (for tests and
// checks).
func (m *Metrics) Open(listener string) prometheus.Gauge { return m.open.WithLabelValues(listener) }

// Shed returns the shed-connections counter of a listener.
func (m *Metrics) Shed(listener string) prometheus.Counter { return m.shed.WithLabelValues(listener) }

// ReadTimeouts returns the read-timeout counter of a listener.
func (m *Metrics) ReadTimeouts(listener string) prometheus.Counter {
	return m.timeout.WithLabelValues(listener)
}

// Refused returns the refused-connections counter of a listener.
func (m *Metrics) Refused(listener string) prometheus.Counter {
	return m.refused.WithLabelValues(listener)
}
