package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// ADS method names, as a node calls them.
const (
	sotwMethod  = "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources"
	deltaMethod = "/envoy.service.discovery.v3.AggregatedDiscoveryService/DeltaAggregatedResources"
)

// DefaultTypes are the wildcard subscriptions of a node: what a gRPC or
// Envoy node with every service in its config asks for.
var DefaultTypes = []string{resource.ClusterType, resource.EndpointType, resource.ListenerType, resource.RouteType}

// FleetConfig configures a Fleet.
type FleetConfig struct {
	Addr           string   // host:port of the xDS server
	Nodes          int      // number of nodes, >= 1; node i has id "bench-node-%05d" of i+IDOffset
	IDOffset       int      // added to the node numbers in ids, so that fleets on several servers never share a node id
	StreamsPerConn int      // nodes sharing one gRPC connection; 0 means 1 (a connection per node)
	Delta          bool     // incremental xDS instead of state of the world
	Types          []string // wildcard subscriptions; nil means DefaultTypes (must include EDS)
	Openers        int      // streams opened concurrently; 0 means 64
	// Subsets: nodes see subsets of the services (subset_size), so a
	// change reaches only some of them. A Want then applies to a node only
	// if the endpoint is in its view when the Wait is installed, and a
	// Want of a state other than HEALTHY is also met by the endpoint
	// leaving the view (a replacement that stops serving is dropped, not
	// shown unhealthy). A node no Want applies to is not sampled.
	Subsets bool
	// GRPCWindows: the nodes' HTTP/2 flow control is grpc-go's (a 64 KiB
	// window grown by BDP pings, which the server answers). By default
	// it is Envoy's: static 256 MiB stream and connection windows, no BDP
	// pings (Envoy's http2_protocol_options defaults), since the fleet
	// plays Envoy nodes speaking raw ADS.
	GRPCWindows bool
}

// Fleet is a set of simulated xDS nodes, one ADS stream each, that ACK
// every response and record when each node receives an installed Wait.
type Fleet struct {
	cfg    FleetConfig
	t      *table
	conns  []*grpc.ClientConn
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	nodes  []*node // by index, once its stream is open
	cur    atomic.Pointer[Wait]
	typed  atomic.Int64 // nodes that received every subscribed type
	allIn  chan struct{}
	eds    atomic.Int64 // EDS responses over the fleet's life
	failed chan struct{}
	once   sync.Once
	err    error
}

// NewFleet prepares a fleet; Install a first Wait, then Connect.
func NewFleet(cfg FleetConfig) (*Fleet, error) {
	if cfg.Nodes < 1 || cfg.Addr == "" {
		return nil, fmt.Errorf("bench: fleet: want an address and at least one node, got %q and %d", cfg.Addr, cfg.Nodes)
	}
	cfg.StreamsPerConn = cmp.Or(cfg.StreamsPerConn, 1)
	cfg.Openers = cmp.Or(cfg.Openers, 64)
	if cfg.Types == nil {
		cfg.Types = DefaultTypes
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Fleet{cfg: cfg, t: newTable(), ctx: ctx, cancel: cancel, nodes: make([]*node, cfg.Nodes),
		allIn: make(chan struct{}), failed: make(chan struct{})}, nil
}

// Install makes wants the change the nodes are awaited for, starting now.
// Every wanted state must differ from what the nodes currently have.
func (f *Fleet) Install(wants []Want) *Wait {
	w := &Wait{wants: wants, lat: make([]atomic.Int64, f.cfg.Nodes), done: make(chan struct{}), subsets: f.cfg.Subsets}
	left := int64(f.cfg.Nodes)
	if f.cfg.Subsets {
		w.apply = make([]uint64, f.cfg.Nodes)
		for i, n := range f.nodes {
			if n == nil {
				w.apply[i] = all
				continue
			}
			n.mu.Lock()
			w.apply[i] = w.applicable(n.view)
			n.mu.Unlock()
			if w.apply[i] == 0 {
				w.lat[i].Store(-1) // not sampled: the change does not reach it
				left--
			}
		}
	}
	w.left.Store(left)
	if left == 0 {
		close(w.done)
	}
	w.start = time.Now()
	f.cur.Store(w)
	return w
}

// envoyWindow is Envoy's default initial stream and connection window
// (http2_protocol_options initial_stream_window_size and
// initial_connection_window_size: 256 MiB).
const envoyWindow = 256 << 20

// Connect dials the connections and opens every node's stream.
func (f *Fleet) Connect(ctx context.Context) error {
	cc := codec{t: f.t}
	for range (f.cfg.Nodes + f.cfg.StreamsPerConn - 1) / f.cfg.StreamsPerConn {
		opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.ForceCodecV2(cc), grpc.WaitForReady(true))}
		if !f.cfg.GRPCWindows {
			opts = append(opts, grpc.WithInitialWindowSize(envoyWindow), grpc.WithInitialConnWindowSize(envoyWindow))
		}
		conn, err := grpc.NewClient("passthrough:///"+f.cfg.Addr, opts...)
		if err != nil {
			return fmt.Errorf("bench: dial %s: %w", f.cfg.Addr, err)
		}
		f.conns = append(f.conns, conn)
	}
	sem := make(chan struct{}, f.cfg.Openers)
	errc := make(chan error, 1)
	var wg sync.WaitGroup
	for i := range f.cfg.Nodes {
		select {
		case sem <- struct{}{}:
		case err := <-errc:
			wg.Wait()
			return err
		case <-ctx.Done():
			wg.Wait()
			return ctx.Err()
		}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := f.open(i); err != nil {
				select {
				case errc <- err:
				default:
				}
			}
		})
	}
	wg.Wait()
	select {
	case err := <-errc:
		return err
	default:
		return nil
	}
}

// open opens node i's stream, subscribes and starts its receive loop.
func (f *Fleet) open(i int) error {
	conn := f.conns[i/f.cfg.StreamsPerConn]
	method := sotwMethod
	if f.cfg.Delta {
		method = deltaMethod
	}
	desc := &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}
	st, err := conn.NewStream(f.ctx, desc, method)
	if err != nil {
		return fmt.Errorf("bench: node %d: open stream: %w", i, err)
	}
	id := &corev3.Node{Id: fmt.Sprintf("bench-node-%05d", i+f.cfg.IDOffset), Cluster: "bench", UserAgentName: "xds-server-bench"}
	for k, typ := range f.cfg.Types {
		var req any = &discoveryv3.DiscoveryRequest{TypeUrl: typ}
		if f.cfg.Delta {
			req = &discoveryv3.DeltaDiscoveryRequest{TypeUrl: typ, ResourceNamesSubscribe: []string{"*"}}
		}
		if k == 0 {
			switch r := req.(type) {
			case *discoveryv3.DiscoveryRequest:
				r.Node = id
			case *discoveryv3.DeltaDiscoveryRequest:
				r.Node = id
			}
		}
		if err := st.SendMsg(req); err != nil {
			return fmt.Errorf("bench: node %d: subscribe: %w", i, err)
		}
	}
	n := &node{f: f, i: i, st: st, all: 1<<len(f.cfg.Types) - 1, sotw: map[string]*entry{}, delta: map[string]*entry{}}
	f.mu.Lock()
	f.nodes[i] = n
	f.mu.Unlock()
	f.wg.Go(func() {
		var err error
		if f.cfg.Delta {
			err = n.runDelta()
		} else {
			err = n.runSotW()
		}
		f.fail(fmt.Errorf("bench: node %d: %w", i, err))
	})
	return nil
}

// fail records the first stream error unless the fleet is closing.
func (f *Fleet) fail(err error) {
	if f.ctx.Err() != nil {
		return
	}
	f.once.Do(func() {
		f.err = err
		close(f.failed)
	})
}

// Err is the first stream error, if any.
func (f *Fleet) Err() error {
	select {
	case <-f.failed:
		return f.err
	default:
		return nil
	}
}

// AllTypes is closed once every node received every subscribed type.
func (f *Fleet) AllTypes() <-chan struct{} { return f.allIn }

// EDSResponses is the number of EDS responses received so far.
func (f *Fleet) EDSResponses() int64 { return f.eds.Load() }

// Close ends every stream and connection and waits for the nodes to stop.
func (f *Fleet) Close() error {
	f.cancel()
	var errs []error
	for _, c := range f.conns {
		errs = append(errs, c.Close())
	}
	f.wg.Wait()
	return errors.Join(errs...)
}

// node is one simulated xDS node.
type node struct {
	f     *Fleet
	i     int
	mu    sync.Mutex // guards sotw and delta against Install (Subsets)
	st    grpc.ClientStream
	types uint32 // bit k: a response of Types[k] was received
	all   uint32
	sotw  map[string]*entry // SotW: EDS resources by name, merged from the responses that carry them
	delta map[string]*entry // delta: EDS resources by name
}

func (n *node) runSotW() error {
	for {
		var r sotwResponse
		if err := n.st.RecvMsg(&r); err != nil {
			return err
		}
		now := time.Now()
		ack := &discoveryv3.DiscoveryRequest{TypeUrl: r.typeURL, VersionInfo: r.version, ResponseNonce: r.nonce}
		if err := n.st.SendMsg(ack); err != nil {
			return err
		}
		n.seen(r.typeURL)
		if r.typeURL != resource.EndpointType {
			continue
		}
		// A SotW EDS response carries the load assignments that changed
		// (the others are kept; the bench never removes a service).
		n.mu.Lock()
		for _, res := range r.eds {
			n.sotw[res.name] = res.eds
		}
		n.observe(now, n.sotwView)
		n.mu.Unlock()
	}
}

func (n *node) runDelta() error {
	for {
		var r deltaResponse
		if err := n.st.RecvMsg(&r); err != nil {
			return err
		}
		now := time.Now()
		if err := n.st.SendMsg(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: r.typeURL, ResponseNonce: r.nonce}); err != nil {
			return err
		}
		n.seen(r.typeURL)
		if r.typeURL != resource.EndpointType {
			continue
		}
		n.mu.Lock()
		for _, res := range r.resources {
			n.delta[res.name] = res.eds
		}
		for _, name := range r.removed {
			delete(n.delta, name)
		}
		n.observe(now, n.deltaView)
		n.mu.Unlock()
	}
}

// view is the node's current EDS view of service (under n.mu).
func (n *node) view(service string) cla {
	if n.f.cfg.Delta {
		return n.deltaView(service)
	}
	return n.sotwView(service)
}

func (n *node) sotwView(service string) cla {
	if e := n.sotw[service]; e != nil {
		return e.clas[service]
	}
	return nil
}

func (n *node) deltaView(service string) cla {
	if e := n.delta[service]; e != nil {
		return e.clas[service]
	}
	return nil
}

func (n *node) seen(typeURL string) {
	if n.types == n.all {
		return
	}
	for k, t := range n.f.cfg.Types {
		if t == typeURL {
			n.types |= 1 << k
		}
	}
	if n.types == n.all && n.f.typed.Add(1) == int64(n.f.cfg.Nodes) {
		close(n.f.allIn)
	}
}

func (n *node) observe(now time.Time, view func(string) cla) {
	n.f.eds.Add(1)
	w := n.f.cur.Load()
	if w == nil {
		return
	}
	w.eds.Add(1)
	if w.lat[n.i].Load() == 0 && w.satisfiedBy(n.i, view) {
		w.arrive(n.i, now)
	}
}
