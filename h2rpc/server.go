package h2rpc

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Handler answers one call: req is the request message (without its
// 5-byte prefix, valid until Handler returns); it appends the response
// message to out and returns it, or returns an error whose gRPC status
// (status.FromError; Unknown without one) is the answer.
type Handler func(ctx context.Context, req, out []byte) ([]byte, error)

// Defaults of Config.
const (
	DefaultMaxStreams        = 1024
	DefaultMaxRecvMsgSize    = 4 << 20 // grpc-go's default too
	DefaultMaxBufferedBytes  = 64 << 20
	DefaultMaxHeaderListSize = 16 << 10
	DefaultStreamWindow      = 1 << 20
	DefaultPingAfter         = 2 * time.Hour // grpc-go's keepalive.ServerParameters.Time default
	DefaultPingTimeout       = 20 * time.Second
	handshakeTimeout         = 10 * time.Second
	writeTimeout             = 30 * time.Second
	maxPendingWrite          = 1 << 20 // unwritten bytes per connection before writers wait
)

// Config configures New. Zero fields take the defaults named.
type Config struct {
	// Method is the one :path served, "/package.Service/Method";
	// required.
	Method  string
	Handler Handler // required
	// TLS, if set, is the server's TLS configuration (its NextProtos
	// are set to h2); nil serves cleartext HTTP/2 (prior knowledge).
	TLS *tls.Config
	// Authorize, if set, is asked before each call with the connection's
	// TLS state (nil without TLS); its error's status is the answer
	// (PermissionDenied if it has none).
	Authorize func(cs *tls.ConnectionState) error
	// MaxStreams is SETTINGS_MAX_CONCURRENT_STREAMS, in [1, 1<<20].
	MaxStreams uint32
	// MaxRecvMsgSize bounds a request message, bytes; it also bounds the
	// request bytes buffered per connection (twice this).
	MaxRecvMsgSize int
	// MaxBufferedBytes bounds the request bytes buffered over all
	// connections, so that many connections each within their own bound
	// cannot together hold more; a call that would pass it is answered
	// RESOURCE_EXHAUSTED.
	MaxBufferedBytes int64
	// MaxHeaderListSize bounds a call's header list (HPACK-decoded).
	MaxHeaderListSize uint32
	// StreamWindow is each call's receive window (also the connection's,
	// times 4), bytes, in [65535, 1<<30].
	StreamWindow uint32
	// PingAfter is the idle time after which a connection gets a PING;
	// it is closed when no frame arrives within PingTimeout then.
	PingAfter, PingTimeout time.Duration
	// Name prefixes the metrics' names (Name_lean_...); required with
	// Registerer.
	Name       string
	Registerer prometheus.Registerer // nil: metrics unregistered
	Logger     *slog.Logger          // component attribute set by the caller; nil discards
}

func (c *Config) setDefaults() error {
	var errs []error
	if c.Method == "" || c.Method[0] != '/' {
		errs = append(errs, fmt.Errorf("method %q is not /service/method", c.Method))
	}
	if c.Handler == nil {
		errs = append(errs, errors.New("handler is required"))
	}
	if c.MaxRecvMsgSize < 0 || c.MaxBufferedBytes < 0 || c.StreamWindow != 0 && (c.StreamWindow < 65535 || c.StreamWindow > 1<<30) ||
		c.MaxStreams > 1<<20 || c.PingAfter < 0 || c.PingTimeout < 0 {
		errs = append(errs, errors.New("a bound is out of range"))
	}
	if len(errs) > 0 {
		return fmt.Errorf("h2rpc: invalid config: %w", errors.Join(errs...))
	}
	def := func(v *uint32, d uint32) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.MaxStreams, DefaultMaxStreams)
	def(&c.MaxHeaderListSize, DefaultMaxHeaderListSize)
	def(&c.StreamWindow, DefaultStreamWindow)
	if c.MaxRecvMsgSize == 0 {
		c.MaxRecvMsgSize = DefaultMaxRecvMsgSize
	}
	if c.MaxBufferedBytes == 0 {
		c.MaxBufferedBytes = DefaultMaxBufferedBytes
	}
	if c.PingAfter == 0 {
		c.PingAfter = DefaultPingAfter
	}
	if c.PingTimeout == 0 {
		c.PingTimeout = DefaultPingTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.TLS != nil {
		c.TLS = c.TLS.Clone()
		c.TLS.NextProtos = []string{"h2"}
	}
	return nil
}

// Server serves Config.Method on listeners. Safe for concurrent use.
type Server struct {
	cfg      Config
	m        *metrics
	buffered atomic.Int64 // request bytes held over all connections (<= cfg.MaxBufferedBytes)

	mu       sync.Mutex
	conns    map[*conn]struct{}
	lis      map[net.Listener]struct{}
	shutdown bool
	idle     chan struct{} // closed when shutting down and no conns are left
	work     chan *stream  // to idle workers (unbuffered)
	quit     chan struct{} // closed by stop: workers return
}

// ErrServerClosed is what Serve returns after Shutdown or Close.
var ErrServerClosed = errors.New("h2rpc: server closed")

// New returns a server of c.
func New(c Config) (*Server, error) {
	if err := c.setDefaults(); err != nil {
		return nil, err
	}
	m, err := newMetrics(c.Name, c.Registerer)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: c, m: m, conns: map[*conn]struct{}{}, lis: map[net.Listener]struct{}{},
		idle: make(chan struct{}), work: make(chan *stream), quit: make(chan struct{})}
	for range workers {
		go s.worker()
	}
	return s, nil
}

// workers run calls on goroutines whose stacks have grown already (a new
// goroutine per call would grow its stack every time); a call that finds
// none idle gets a goroutine of its own.
const workers = 128

func (s *Server) worker() {
	for {
		select {
		case st := <-s.work:
			st.c.run(st)
		case <-s.quit:
			return
		}
	}
}

// Serve accepts connections on l until Shutdown or Close (then it
// returns ErrServerClosed) or an accept error.
func (s *Server) Serve(l net.Listener) error {
	s.mu.Lock()
	if s.shutdown {
		s.mu.Unlock()
		return ErrServerClosed
	}
	s.lis[l] = struct{}{}
	s.mu.Unlock()
	var delay time.Duration
	for {
		nc, err := l.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.shutdown
			s.mu.Unlock()
			if closed {
				return ErrServerClosed
			}
			if temporary(err) {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				time.Sleep(delay) // back off, as net/http does
				continue
			}
			return fmt.Errorf("h2rpc: accept: %w", err)
		}
		delay = 0
		c := newConn(s, nc)
		if !s.track(c, true) {
			_ = nc.Close()
			continue
		}
		go c.serve()
	}
}

// temporary reports whether an accept error passes: out of file
// descriptors, an aborted connection, a timeout.
func temporary(err error) bool {
	var ne net.Error
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) || errors.Is(err, syscall.ECONNABORTED) ||
		(errors.As(err, &ne) && ne.Timeout())
}

// track adds or removes c; adding fails once shutting down.
func (s *Server) track(c *conn, add bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if add {
		if s.shutdown {
			return false
		}
		s.conns[c] = struct{}{}
		return true
	}
	delete(s.conns, c)
	if s.shutdown && len(s.conns) == 0 {
		select {
		case <-s.idle:
		default:
			close(s.idle)
		}
	}
	return true
}

// Shutdown stops accepting, sends every connection a GOAWAY, and waits
// until their calls have been answered and they are closed, or ctx is
// done (then it closes them and returns ctx's error).
func (s *Server) Shutdown(ctx context.Context) error {
	conns := s.stop()
	for _, c := range conns {
		c.goAway()
	}
	select {
	case <-s.idle:
		return nil
	case <-ctx.Done():
		_ = s.Close()
		return ctx.Err()
	}
}

// Close closes the listeners and every connection at once.
func (s *Server) Close() error {
	for _, c := range s.stop() {
		c.close(nil)
	}
	return nil
}

// stop marks the server shut down, closes its listeners and returns its
// connections.
func (s *Server) stop() []*conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.shutdown {
		s.shutdown = true
		close(s.quit)
		for l := range s.lis {
			_ = l.Close()
		}
		if len(s.conns) == 0 {
			close(s.idle)
		}
	}
	out := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		out = append(out, c)
	}
	return out
}
