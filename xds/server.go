package xds

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	clusterservice "github.com/envoyproxy/go-control-plane/envoy/service/cluster/v3"
	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	endpointservice "github.com/envoyproxy/go-control-plane/envoy/service/endpoint/v3"
	listenerservice "github.com/envoyproxy/go-control-plane/envoy/service/listener/v3"
	routeservice "github.com/envoyproxy/go-control-plane/envoy/service/route/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"

	"github.com/xds-server/xds-server/discovery"
	"github.com/xds-server/xds-server/envoy"
	"github.com/xds-server/xds-server/internal/pause"
	"github.com/xds-server/xds-server/translate"
	"github.com/xds-server/xds-server/xdscache"
)

// Keepalive holds the gRPC keepalive settings of the xDS listener.
type Keepalive struct {
	Time    time.Duration // ping a client idle this long; 0 means 30s
	Timeout time.Duration // close the connection if a ping is not answered in this time; 0 means 10s
	MinTime time.Duration // reject clients pinging more often than this; 0 means 10s
}

// Buffers are the gRPC buffer sizes of each client connection, in bytes.
// An xDS connection is idle almost always and reads little (requests and
// ACKs of a few hundred bytes), so per-connection buffers are most of what
// a node costs on the gRPC side: 10,000 nodes with grpc-go's 32 KiB read
// buffer hold 320 MiB of them.
type Buffers struct {
	Read  int // read buffer; 0 means none (frames are read from the socket directly); at most 1 MiB
	Write int // write buffer, from a shared pool only while writing; 0 means 32 KiB; at most 1 MiB
}

// Config configures the xDS server.
type Config struct {
	Debounce   time.Duration // quiet time that ends a burst of changes; 0 means 50ms
	MaxDelay   time.Duration // a burst never delays a rebuild longer than this; 0 means 1s
	NodeGrace  time.Duration // snapshots of nodes gone longer than this are dropped; 0 means 5m
	Keepalive  Keepalive
	MaxStreams uint32  // concurrent streams per connection; 0 means 1000
	Buffers    Buffers // per-connection gRPC buffers
	// Names bound the resource names streams and nodes subscribe to (names.go).
	Names NameLimits
	// MaxKnownNodes bounds the nodes known at once, connected or
	// disconnected within NodeGrace: past it a new node evicts the one
	// disconnected the longest, or is refused if every one is connected;
	// 0 means no bound.
	MaxKnownNodes int
	// MaxPendingBytes bounds the encoded responses waiting to be written
	// to nodes, over all connections (see sendBudget); 0 means no bound.
	MaxPendingBytes int64
	// HandshakeTimeout bounds a new connection's TLS handshake and HTTP/2
	// preface; at most 2m, 0 means 5s.
	HandshakeTimeout time.Duration
	// SotWFullState makes every state-of-the-world response carry every
	// requested resource of its type. By default load assignment (EDS)
	// and route configuration (RDS) responses carry only the resources
	// that changed, as the xDS spec allows (see cache_sotw.go); clusters
	// and listeners are always full state.
	SotWFullState bool
	Settings      translate.SettingsFunc // per-service settings; nil means defaults for all
	Subsetting    SubsetConfig           // client indices for subsetting
	// Listeners are HTTP listeners from configuration: Envoy nodes they
	// match get them (with their routes), proxyless gRPC nodes get them
	// as api_listeners. Validated by New.
	Listeners []translate.Listener
	// RateLimitAddress is the host:port where Envoy reaches xds-server's
	// rate-limit service: the address of the envoy.RateLimitClusterName
	// cluster, needed when a listener's rate limit names no cluster.
	RateLimitAddress string
	// RateLimitTLS, when not nil, says that the rate-limit service serves
	// TLS: the generated cluster speaks it (see envoy.SecureRateLimitCluster).
	RateLimitTLS *envoy.RateLimitTLS
	// Credentials secure the listener (TLS, mTLS); nil means plaintext.
	Credentials credentials.TransportCredentials
	// Authorization, when not empty, ties client certificates to the nodes
	// they may claim (see AuthzRule; needs mTLS Credentials).
	Authorization []AuthzRule
	// OnSubsets, optional, receives the node subsets (SubsetsView) after
	// every reconcile pass, and after known nodes changed (at most once
	// per Debounce): the weights pipeline's input. It is called with the
	// reconciler's lock held, in version order: it must not block or call
	// the server.
	OnSubsets func(*SubsetsView)
	// Datacenters is the datacenter failover order, the local one first
	// (discovery.consul.datacenters): a node whose metadata names no
	// "datacenter" is in the first; services with a datacenter failover
	// level try the others in this order. Empty: one datacenter.
	Datacenters []string
	// Passes, optional, is told when each reconcile pass starts and when
	// its pushes are done (see PassObserver).
	Passes     PassObserver
	Logger     *slog.Logger // nil means slog.Default()
	Registerer prometheus.Registerer
	Now        func() time.Time // nil means time.Now
}

// Validate reports configuration errors.
func (c Config) Validate() error {
	var errs []error
	for name, d := range map[string]time.Duration{
		"xds.debounce": c.Debounce, "xds.max_delay": c.MaxDelay, "xds.node_grace": c.NodeGrace,
		"xds.keepalive.time": c.Keepalive.Time, "xds.keepalive.timeout": c.Keepalive.Timeout,
		"xds.keepalive.min_time": c.Keepalive.MinTime, "xds.handshake_timeout": c.HandshakeTimeout,
	} {
		if d < 0 {
			errs = append(errs, fmt.Errorf("xds: %s: %v is negative", name, d))
		}
	}
	if c.HandshakeTimeout > 2*time.Minute {
		errs = append(errs, fmt.Errorf("xds: xds.handshake_timeout: %v is longer than 2m", c.HandshakeTimeout))
	}
	for name, n := range map[string]int{"xds.max_resource_names": c.Names.PerStream,
		"xds.max_unknown_resource_names": c.Names.UnknownPerNode, "xds.max_known_nodes": c.MaxKnownNodes} {
		if n < 0 {
			errs = append(errs, fmt.Errorf("xds: %s: %d is negative", name, n))
		}
	}
	if c.MaxPendingBytes < 0 {
		errs = append(errs, fmt.Errorf("xds: xds.max_pending_bytes: %d is negative", c.MaxPendingBytes))
	}
	for name, n := range map[string]int{"xds.read_buffer_size": c.Buffers.Read, "xds.write_buffer_size": c.Buffers.Write} {
		if n < 0 || n > maxBuffer {
			errs = append(errs, fmt.Errorf("xds: %s: %d is not in [0, %d]", name, n, maxBuffer))
		}
	}
	if err := validateRules(c.Authorization); err != nil {
		errs = append(errs, err)
	}
	if err := c.Subsetting.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.MaxDelay > 0 && c.Debounce > c.MaxDelay {
		errs = append(errs, fmt.Errorf("xds: xds.debounce (%v) is longer than xds.max_delay (%v)", c.Debounce, c.MaxDelay))
	}
	return errors.Join(errs...)
}

// maxBuffer bounds Buffers: larger buffers only cost memory per node.
const maxBuffer = 1 << 20

func (c Config) withDefaults() Config {
	c.Debounce = cmp.Or(c.Debounce, 50*time.Millisecond)
	c.MaxDelay = cmp.Or(c.MaxDelay, time.Second)
	c.NodeGrace = cmp.Or(c.NodeGrace, 5*time.Minute)
	c.Keepalive.Time = cmp.Or(c.Keepalive.Time, 30*time.Second)
	c.Keepalive.Timeout = cmp.Or(c.Keepalive.Timeout, 10*time.Second)
	c.Keepalive.MinTime = cmp.Or(c.Keepalive.MinTime, 10*time.Second)
	c.HandshakeTimeout = cmp.Or(c.HandshakeTimeout, 5*time.Second)
	c.MaxStreams = cmp.Or(c.MaxStreams, 1000)
	c.Buffers.Write = cmp.Or(c.Buffers.Write, 32<<10)
	if c.Settings == nil {
		c.Settings = func(string) translate.ServiceSettings { return translate.ServiceSettings{} }
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	c.Logger = cmp.Or(c.Logger, slog.Default()).With("component", "xds")
	return c
}

// Server is the xDS control plane: a gRPC server with ADS (and the
// per-type discovery services) backed by a per-node snapshot cache.
type Server struct {
	cfg    Config
	cache  *xdscache.Cache
	reg    *registry
	rec    *reconciler
	idx    *indexer
	logs   *logLimiter
	cb     *callbacks
	m      *metrics
	grpc   *grpc.Server
	stop   context.CancelFunc // ends every open xDS stream
	stopCt context.Context

	closing  sync.Once
	closed   chan struct{} // closed once GracefulStop has returned
	shutting atomic.Bool   // StopAccepting was called
}

// New creates a server. Feed it with Update, start its loop with Run and
// its listener with Serve.
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	s := &Server{cfg: cfg, reg: newRegistry(cfg.MaxKnownNodes), closed: make(chan struct{})}
	var err error
	if s.m, err = newMetrics(cfg.Registerer); err != nil {
		return nil, err
	}
	var lis *listenerSet
	if len(cfg.Listeners) > 0 {
		if lis, err = newListenerSet(cfg.Listeners, cfg.RateLimitAddress, cfg.RateLimitTLS); err != nil {
			return nil, err
		}
	}
	s.cache = xdscache.New(cfg.SotWFullState)
	s.rec = newReconciler(s.cache, s.reg, s.m, reconcileConfig{Settings: cfg.Settings, Logger: cfg.Logger, Now: cfg.Now, Passes: cfg.Passes,
		Debounce: cfg.Debounce, MaxDelay: cfg.MaxDelay, OnSubsets: cfg.OnSubsets, Datacenters: cfg.Datacenters}, lis)
	s.idx = newIndexer(cfg.Subsetting, cfg.Now, s.m, cfg.Logger)
	s.rec.slots = newEndpointSlots(s.idx)
	if cfg.Registerer != nil {
		cfg.Registerer.MustRegister(newSubsetCollector(s.rec, s.reg), prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "xds_known_nodes", Help: "Nodes known: connected, or disconnected within xds.node_grace (bounded by xds.max_known_nodes).",
		}, func() float64 { return float64(s.reg.size()) }))
	}
	s.logs = newLogLimiter(logEvery)
	s.cb = &callbacks{reg: s.reg, rec: s.rec, idx: s.idx, m: s.m, log: cfg.Logger, now: cfg.Now, refusing: &s.shutting, logs: s.logs,
		conns: newConnLog(), names: newNameBook(cfg.Names), snapshot: s.cache.Current, evicted: s.forget, maxKnown: cfg.MaxKnownNodes}
	s.cb.pushes = newPerKind(func(name string) prometheus.Counter { return s.m.pushes.WithLabelValues(name) })
	s.cache.Subscribed = s.cb.subscribed
	var cb serverv3.Callbacks = s.cb
	if len(cfg.Authorization) > 0 {
		cb = newAuthz(cb, cfg.Authorization, cfg.Registerer, cfg.Logger)
	}
	s.stopCt, s.stop = context.WithCancel(context.Background())
	xs := streamServers(s.stopCt, s.cache, cb)
	opts := []grpc.ServerOption{
		grpc.MaxConcurrentStreams(cfg.MaxStreams),
		grpc.ConnectionTimeout(cfg.HandshakeTimeout), // a connection that never sends the preface is closed
		// Nodes hold their streams open for hours and mostly idle: release
		// the write buffer between writes and read without a buffer by
		// default, which cuts per-connection memory by about 60 KiB.
		grpc.SharedWriteBuffer(true),
		// Static flow-control windows of HTTP/2's default size (64 KiB):
		// with dynamic ones (grpc-go's BDP estimation) every ACK, a DATA
		// frame, made the server write a PING and a window update and read
		// the PING's ACK, doubling the syscalls of each node's change on
		// both sides. Requests are small; nothing needs a larger window.
		grpc.StaticStreamWindowSize(staticWindow),
		grpc.StaticConnWindowSize(staticWindow),
		grpc.ReadBufferSize(cfg.Buffers.Read),
		grpc.WriteBufferSize(cfg.Buffers.Write),
		grpc.ForceServerCodecV2(codec{budget: newSendBudget(cfg.MaxPendingBytes, cfg.Registerer), heads: &heads{}}), // pooled, bounded, shared buffers
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: cfg.Keepalive.Time, Timeout: cfg.Keepalive.Timeout}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: cfg.Keepalive.MinTime, PermitWithoutStream: true}),
	}
	if cfg.Credentials != nil {
		opts = append(opts, grpc.Creds(cfg.Credentials))
	}
	s.grpc = grpc.NewServer(opts...)
	discoverygrpc.RegisterAggregatedDiscoveryServiceServer(s.grpc, xs)
	clusterservice.RegisterClusterDiscoveryServiceServer(s.grpc, xs)
	endpointservice.RegisterEndpointDiscoveryServiceServer(s.grpc, xs)
	listenerservice.RegisterListenerDiscoveryServiceServer(s.grpc, xs)
	routeservice.RegisterRouteDiscoveryServiceServer(s.grpc, xs)
	return s, nil
}

// Update hands the server a new discovery snapshot. It returns at once;
// nodes are updated by the reconcile loop after the debounce.
func (s *Server) Update(snap discovery.Snapshot) { s.rec.update(snap) }

// SetWeights replaces the EDS weights computed from utilization reports:
// service -> endpoint id -> weight (>= 1). Services and endpoints absent
// keep their discovery weights. Nodes are updated by the reconcile loop
// after the debounce, as for Update; only changed services are rebuilt.
func (s *Server) SetWeights(w map[string]map[string]uint32) {
	s.m.weightUpdates.Inc()
	s.rec.setWeights(w)
}

// SetNodeWeights replaces the per-node EDS weights (see NodeWeights).
// Nodes are updated by the reconcile loop after the debounce; a node whose
// weights and endpoints are unchanged keeps its snapshot (no push).
func (s *Server) SetNodeWeights(w NodeWeights) {
	s.m.weightUpdates.Inc()
	s.rec.setNodeWeights(w)
}

// SetSpill replaces the zone spill states of services with
// locality.spill (see Spill); nodes are updated by the reconcile loop
// after the debounce.
func (s *Server) SetSpill(sp Spill) {
	s.m.weightUpdates.Inc()
	s.rec.redo(func() { s.rec.spill, s.rec.spillVer = sp, s.rec.spillVer+1 })
}

// SubsetsView returns the node subsets as last published (see
// Config.OnSubsets); nil before the first reconcile pass.
func (s *Server) SubsetsView() *SubsetsView { return s.rec.views.latest.Load() }

// Reconcile applies the latest Update now, without waiting for the
// debounce; the Run loop does the same after each burst.
func (s *Server) Reconcile() { s.rec.reconcile() }

// Ready reports whether a first snapshot has been built and the server is
// not shutting down.
func (s *Server) Ready() bool { return s.rec.isReady() && !s.shutting.Load() }

// Run runs the reconcile loop and the expiry of departed nodes until ctx is done.
func (s *Server) Run(ctx context.Context) {
	go s.rec.run(ctx)
	pause.Every(ctx, min(s.cfg.NodeGrace/4, 30*time.Second), s.Expire)
}

// Expire drops the snapshots of nodes disconnected for longer than the
// grace period (with their subsetting group membership and log state),
// sweeps the expired index reservations of this process's tables, and
// moves endpoint slots and connected nodes' indices taken from this
// process's table during an outage of the shared one back to the shared
// one (see slots_heal.go).
// Run calls it periodically; tests call it after moving their clock.
func (s *Server) Expire() {
	gone := s.reg.expire(s.cfg.Now(), s.cfg.NodeGrace)
	for i, id := range gone {
		s.forget(id)
		s.m.expired.Inc()
		if i < maxExpiredLines {
			s.cfg.Logger.Info("node expired", "node", clip(id), "grace", s.cfg.NodeGrace)
		}
	}
	if len(gone) > maxExpiredLines {
		s.cfg.Logger.Info("more nodes expired", "nodes", len(gone)-maxExpiredLines, "grace", s.cfg.NodeGrace)
	}
	s.m.swept.Add(float64(s.idx.sweep()))
	s.rec.healSlots()
	if s.idx.healIndices(s.reg) {
		s.rec.redo(func() {})
	}
}

// maxExpiredLines bounds the "node expired" lines of one Expire; the
// others are summed in one line.
const maxExpiredLines = 10

// forget drops what the server holds of a node the registry forgot
// (expired or evicted): its snapshot, group membership and log state.
func (s *Server) forget(id string) {
	s.rec.forget(id)
	s.idx.forget(id)
	s.logs.forget(id)
	if _, back := s.reg.get(id); back {
		s.rec.connected(id) // it came back meanwhile: give it its snapshot again
	}
}

// Serve accepts xDS streams on lis until Shutdown.
func (s *Server) Serve(lis net.Listener) error {
	if err := s.grpc.Serve(lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return fmt.Errorf("xds: serve: %w", err)
	}
	return nil
}

// GRPC exposes the underlying gRPC server, e.g. to register more services
// on the same listener.
func (s *Server) GRPC() *grpc.Server { return s.grpc }

// StopAccepting closes the listener and refuses new streams (gRPC
// GOAWAY), while the open streams keep being served and updated, so that
// clients can reconnect to another replica at their own pace. Ready
// reports false from now on. Idempotent.
func (s *Server) StopAccepting() {
	s.closing.Do(func() {
		s.shutting.Store(true)
		go func() {
			s.grpc.GracefulStop()
			close(s.closed)
		}()
	})
}

// Shutdown stops accepting streams (if StopAccepting was not called),
// ends the open ones once their in-flight responses are written, and waits
// for that until ctx is done (then it closes everything at once).
func (s *Server) Shutdown(ctx context.Context) {
	s.StopAccepting()
	s.stop()
	select {
	case <-s.closed:
	case <-ctx.Done():
		s.grpc.Stop()
		<-s.closed
	}
}
