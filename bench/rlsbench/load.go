package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/xds-server/xds-server/internal/pause"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// shouldRateLimit is the RLS v3 method every request calls.
const shouldRateLimit = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"

// LoadConfig is one load run against one RLS address: Concurrency workers,
// each with one request in flight at a time (a closed loop: the offered
// concurrency is fixed, the rate is what the server sustains), spread
// over Conns gRPC connections.
type LoadConfig struct {
	Addr        string // host:port of the RLS gRPC listener
	Workload    Workload
	Concurrency int           // requests in flight, in [1, 10000]
	Conns       int           // gRPC connections (HTTP/2), in [1, Concurrency]
	Warmup      time.Duration // load before measuring, not counted
	Duration    time.Duration // measured, > 0
	Seed        uint64        // of the workers' key draws
	Client      string        // "h2" (our lean HTTP/2 client, the default) or "grpc" (grpc-go)
	// dialer, if set, makes the connections instead of TCP (tests).
	dialer func(ctx context.Context, addr string) (net.Conn, error)
	// Sample, if set, is called as the measurement starts and as it ends
	// (to read the CPU time of processes over exactly that interval).
	Sample func()
}

// Validate reports the settings that make no load run.
func (c LoadConfig) Validate() error {
	var errs []error
	if c.Addr == "" {
		errs = append(errs, errors.New("rlsbench: no address"))
	}
	if c.Concurrency < 1 || c.Concurrency > 10000 {
		errs = append(errs, fmt.Errorf("rlsbench: concurrency %d not in [1, 10000]", c.Concurrency))
	}
	if c.Conns < 1 || c.Conns > max(c.Concurrency, 1) {
		errs = append(errs, fmt.Errorf("rlsbench: conns %d not in [1, concurrency]", c.Conns))
	}
	if c.Client != "" && c.Client != clientH2 && c.Client != clientGRPC {
		errs = append(errs, fmt.Errorf("rlsbench: client %q is not h2 or grpc", c.Client))
	}
	if c.Warmup < 0 || c.Duration <= 0 {
		errs = append(errs, fmt.Errorf("rlsbench: need warmup >= 0 and duration > 0 (got %v, %v)", c.Warmup, c.Duration))
	}
	return errors.Join(append(errs, c.Workload.Validate())...)
}

// Result is what a load run measured: requests completed while measuring.
type Result struct {
	Elapsed    time.Duration // of the measurement
	Requests   uint64        // answered without a gRPC error
	Errors     uint64        // gRPC errors
	FirstError string        // the first of them
	// Per descriptor: OK with a limit, OVER_LIMIT, OK without a limit
	// (no rule matched: the store was not asked) and any other code.
	OK, OverLimit, Unlimited, Unknown uint64
	Latency                           Histogram // of the answered requests
}

// Decisions is the number of descriptor decisions answered.
func (r *Result) Decisions() uint64 { return r.OK + r.OverLimit + r.Unlimited + r.Unknown }

// RequestsPerSec is the answered requests per second of measurement.
func (r *Result) RequestsPerSec() float64 { return perSec(r.Requests, r.Elapsed) }

// DecisionsPerSec is the answered descriptor decisions per second.
func (r *Result) DecisionsPerSec() float64 { return perSec(r.Decisions(), r.Elapsed) }

func perSec(n uint64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// Phases of a run, as the workers see them.
const (
	phaseWarmup int32 = iota
	phaseMeasure
	phaseStop
)

// Clients the load generator can use.
const (
	clientH2   = "h2"
	clientGRPC = "grpc"
)

// invoker sends one request (wire format) and parses its answer into d.
type invoker interface {
	invoke(ctx context.Context, msg []byte, d *decisions) error
}

// grpcInvoker calls through grpc-go, with rawCodec.
type grpcInvoker struct {
	cc  *grpc.ClientConn
	req rawRequest
}

func (g *grpcInvoker) invoke(ctx context.Context, msg []byte, d *decisions) error {
	g.req.b = msg
	return g.cc.Invoke(ctx, shouldRateLimit, &g.req, d)
}

// h2Invoker calls through an h2Conn.
type h2Invoker struct {
	conn *h2Conn
	call *h2Call
}

func (h *h2Invoker) invoke(ctx context.Context, msg []byte, d *decisions) error {
	resp, err := h.conn.invoke(ctx, h.call, msg)
	if err != nil {
		return err
	}
	return d.parse(resp)
}

// worker is one closed loop; its counters are its own until the run ends.
type worker struct {
	inv    invoker
	gen    *generator
	resp   decisions
	res    Result
	errMsg string
}

// connect opens cfg.Conns connections and returns one invoker factory per
// worker index, and a function closing them all.
func connect(ctx context.Context, cfg LoadConfig) (func(i int) invoker, func(), error) {
	var closers []func()
	closeAll := func() {
		for _, f := range closers {
			f()
		}
	}
	if cfg.Client == clientGRPC {
		conns := make([]*grpc.ClientConn, cfg.Conns)
		for i := range conns {
			cc, err := dial(cfg.Addr, cfg.dialer)
			if err != nil {
				closeAll()
				return nil, nil, err
			}
			closers = append(closers, func() { cc.Close() })
			conns[i] = cc
		}
		return func(i int) invoker { return &grpcInvoker{cc: conns[i%len(conns)]} }, closeAll, nil
	}
	conns := make([]*h2Conn, cfg.Conns)
	for i := range conns {
		c, err := dialH2(ctx, cfg.Addr, shouldRateLimit, cfg.dialer)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		closers = append(closers, func() { c.Close() })
		conns[i] = c
	}
	return func(i int) invoker { return &h2Invoker{conn: conns[i%len(conns)], call: newH2Call()} }, closeAll, nil
}

// Run loads cfg.Addr for cfg.Warmup then cfg.Duration and returns what
// was measured. It returns early, with an error, when ctx is done.
func Run(ctx context.Context, cfg LoadConfig) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	newInvoker, closeAll, err := connect(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer closeAll()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var phase atomic.Int32
	workers := make([]*worker, cfg.Concurrency)
	var wg sync.WaitGroup
	for i := range workers {
		w := &worker{inv: newInvoker(i), gen: newGenerator(cfg.Workload, cfg.Seed+uint64(i))}
		workers[i] = w
		wg.Go(func() { w.loop(ctx, &phase) })
	}
	stop := func() {
		phase.Store(phaseStop)
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second): // a request stuck past the end
			cancel()
			<-done
		}
	}
	if !pause.For(ctx, cfg.Warmup) {
		stop()
		return nil, fmt.Errorf("rlsbench: %w", ctx.Err())
	}
	if cfg.Sample != nil {
		cfg.Sample()
	}
	start := time.Now()
	phase.Store(phaseMeasure)
	ok := pause.For(ctx, cfg.Duration)
	phase.Store(phaseStop)
	elapsed := time.Since(start)
	if cfg.Sample != nil {
		cfg.Sample()
	}
	stop()
	if !ok {
		return nil, fmt.Errorf("rlsbench: %w", ctx.Err())
	}
	total := &Result{Elapsed: elapsed}
	for _, w := range workers {
		total.add(&w.res)
		if total.FirstError == "" {
			total.FirstError = w.errMsg
		}
	}
	return total, nil
}

// add adds the counts of o to r.
func (r *Result) add(o *Result) {
	r.Requests += o.Requests
	r.Errors += o.Errors
	r.OK += o.OK
	r.OverLimit += o.OverLimit
	r.Unlimited += o.Unlimited
	r.Unknown += o.Unknown
	r.Latency.Merge(&o.Latency)
}

// loop sends requests until the phase is stop or ctx is done, counting
// those that finish while measuring.
func (w *worker) loop(ctx context.Context, phase *atomic.Int32) {
	for {
		if phase.Load() == phaseStop || ctx.Err() != nil {
			return
		}
		msg := w.gen.next()
		t0 := time.Now()
		err := w.inv.invoke(ctx, msg, &w.resp)
		d := time.Since(t0)
		if phase.Load() != phaseMeasure {
			if err != nil && !pause.For(ctx, time.Millisecond) { // don't spin on a dead server
				return
			}
			continue
		}
		if err != nil {
			w.res.Errors++
			if w.errMsg == "" {
				w.errMsg = err.Error()
			}
			if !pause.For(ctx, time.Millisecond) {
				return
			}
			continue
		}
		w.res.Requests++
		w.res.Latency.Record(d)
		w.res.OK += uint64(w.resp.ok)
		w.res.OverLimit += uint64(w.resp.over)
		w.res.Unlimited += uint64(w.resp.unlimited)
		w.res.Unknown += uint64(w.resp.unknown)
	}
}

// dial opens a gRPC connection (lazily) that speaks rawCodec; dialer nil
// means TCP.
func dial(addr string, dialer func(context.Context, string) (net.Conn, error)) (*grpc.ClientConn, error) {
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(rawCodec{}))}
	if dialer != nil {
		opts = append(opts, grpc.WithContextDialer(dialer))
		addr = "passthrough:///" + addr
	}
	cc, err := grpc.NewClient(addr, opts...)
	if err != nil {
		return nil, fmt.Errorf("rlsbench: dial %s: %w", addr, err)
	}
	return cc, nil
}

// Probe sends one request with a single descriptor key=value and returns
// its decisions: how a caller waits for a server to serve a domain (an OK
// with a limit means the config is loaded).
func Probe(ctx context.Context, addr string, w Workload, value string) (*decisions, error) {
	cc, err := dial(addr, nil)
	if err != nil {
		return nil, err
	}
	defer cc.Close()
	w.ValuePrefix, w.Descriptors = value, 1
	req, _ := w.AppendRequest(nil, nil, []int{0})
	var d decisions
	if err := cc.Invoke(ctx, shouldRateLimit, &rawRequest{b: req}, &d); err != nil {
		return nil, fmt.Errorf("rlsbench: probe %s: %w", addr, err)
	}
	return &d, nil
}
