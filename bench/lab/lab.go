package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/xds-server/xds-server/bench"
)

// result is one policy's run.
type result struct {
	policy     policy
	run        int // 0-based run of the lab (--runs); -1 in a summary
	fig        figures
	util       [][]float64 // by backend and second
	p50, p99   float64     // client latency, ms
	requests   int64
	errors     int64
	codes      map[string]int64 // errors by gRPC status code
	simMaxMean float64
	floor      float64 // max/mean a perfectly balanced fleet would measure (noiseFloor)
	mismatched int     // clients whose subset is not the simulator's; -1: not checked
	cpuLoad    float64 // backends and clients: CPU seconds per second
	cpuServer  float64 // xds-server: CPU seconds per second
	ui         string
}

// env is what every run shares: the binaries, Consul, the backends and
// their samplers, the simulator's fleets.
type env struct {
	o        options
	dir      string
	bins     map[string]string // with --clients envoy, "envoy" too
	consul   string
	backends []*backend
	sampler  *sampler
	sims     map[int]simFleet // by subset size
	envoys   *envoyFleet      // the run's Envoys (--clients envoy); nil between runs and with grpc-go clients
	log      *slog.Logger
}

// run runs the lab and writes its outputs.
func run(ctx context.Context, o options, args []string, stdout io.Writer, log *slog.Logger) error {
	if o.zones {
		return runZones(ctx, o, args, stdout, log)
	}
	start := time.Now()
	e, ps, err := prepare(ctx, o, log)
	if err != nil {
		return err
	}
	o = e.o // with its seed
	fleet := e.sims[cmpOr(ps[0].subset, o.backends)].Fleet
	consul, addr, err := startConsul(ctx, e.dir)
	if err != nil {
		return err
	}
	defer consul.stop(5 * time.Second)
	e.consul = addr
	stopFleet, err := e.startFleet(ctx, fleet.Capacities, nil)
	if err != nil {
		return err
	}
	defer stopFleet()
	log.Info("fleet up", "consul", addr, "backends", len(e.backends), "clients", o.clients, "logs", e.dir)
	runs, err := e.runAll(ctx, ps, fleet.Rates)
	if err != nil {
		return err
	}
	return e.write(aggregate(runs), args, time.Since(start), stdout)
}

// startFleet starts the backends of capacities caps (in zones, by
// backend; nil: none) registered in the Consul at e.consul, and the
// sampler of their ORCA reports; stop stops both.
func (e *env) startFleet(ctx context.Context, caps []float64, zones []string) (stop func(), err error) {
	if e.backends, err = startBackends(ctx, e.bins["backend"], e.dir, e.consul, e.o, caps, zones); err != nil {
		return nil, err
	}
	sctx, stopSampler := context.WithCancel(ctx)
	if e.sampler, err = startSampler(sctx, e.backends); err != nil {
		stopSampler()
		stopBackends(e.backends)
		return nil, err
	}
	return func() { stopSampler(); e.sampler.close(); stopBackends(e.backends) }, nil
}

// prepare builds the binaries into a new directory, picks the median
// fleet's seed when o has none, and simulates every subset size of the
// selected policies; the env it returns holds o with its seed.
func prepare(ctx context.Context, o options, log *slog.Logger) (*env, []policy, error) {
	root, err := moduleRoot()
	if err != nil {
		return nil, nil, err
	}
	dir, err := os.MkdirTemp("", "xds-lab-")
	if err != nil {
		return nil, nil, fmt.Errorf("lab: %w", err)
	}
	log.Info("building", "dir", dir)
	e := &env{o: o, dir: dir, log: log, sims: map[int]simFleet{}}
	if e.bins, err = build(ctx, root, dir); err != nil {
		return nil, nil, err
	}
	if o.kind == envoyClients {
		if e.bins["envoy"], err = envoyBinary(); err != nil {
			return nil, nil, err
		}
	}
	if o.seed == 0 {
		if o.seed, err = medianSeed(ctx, e.bins["weightsim"], o); err != nil {
			return nil, nil, err
		}
		o.medianFleet, e.o = true, o
		log.Info("fleet", "seed", o.seed, "why", "the median fleet of its shape (weightsim -median-fleet)")
	}
	ps := selected(o)
	for _, p := range ps {
		size := cmpOr(p.subset, o.backends)
		if _, ok := e.sims[size]; !ok {
			if e.sims[size], err = simulate(ctx, e.bins["weightsim"], dir, o, size); err != nil {
				return nil, nil, err
			}
		}
	}
	return e, ps, nil
}

// runAll runs every selected policy o.runs times, in turn, and returns
// the results by run; the last policy of the last run holds its fleet
// when o.hold.
func (e *env) runAll(ctx context.Context, ps []policy, rates []float64) ([][]result, error) {
	o := e.o
	runs := make([][]result, o.runs)
	for run := range o.runs {
		for k, p := range ps {
			last := run == o.runs-1 && k == len(ps)-1
			r, err := e.runPolicy(ctx, p, run, rates, o.hold && last)
			if err != nil {
				return nil, err
			}
			r.simMaxMean = e.sims[cmpOr(p.subset, o.backends)].simMaxMean(p.sim)
			runs[run] = append(runs[run], r)
			e.log.Info("policy done", "run", run+1, "runs", o.runs, "policy", p.label(o.backends), "max_mean", round3(r.fig.MaxMean),
				"converge_s", r.fig.Converge, "errors", r.errors, "error_codes", r.codes, "sim_max_mean", round3(r.simMaxMean), "subsets_unlike_sim", r.mismatched)
		}
	}
	return runs, nil
}

// selected are the policies --only keeps: those whose label contains
// one of its |-separated parts.
func selected(o options) []policy {
	var out []policy
	for _, p := range policies(o) {
		if o.only == "" || slices.ContainsFunc(strings.Split(o.only, "|"), func(part string) bool {
			return strings.Contains(p.label(o.backends), part)
		}) {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		return policies(o)
	}
	return out
}

// runPolicy runs one policy on a fresh xds-server with fresh clients for
// o.duration and measures it; run (0-based) picks the clients' arrivals.
// With hold, it keeps everything running until ctx ends before it measures.
func (e *env) runPolicy(ctx context.Context, p policy, run int, rates []float64, hold bool) (result, error) {
	o := e.o
	srv, err := startServer(ctx, e.bins["xds-server"], e.dir, e.consul, p, o)
	if err != nil {
		return result{}, err
	}
	defer srv.stop()
	e.log.Info("policy start", "run", run+1, "policy", p.label(o.backends), "console", srv.ui())
	cs, closeCs, err := e.dial(ctx, srv.xds, p, run, rates)
	if err != nil {
		return result{}, err
	}
	defer closeCs()
	mismatched, err := subsetMismatches(srv.admin, e.sims[cmpOr(p.subset, o.backends)].Fleet.Subsets, e.backends, e.envoyUnlike())
	if err != nil {
		e.log.Warn("subsets not checked", "error", err)
		mismatched = -1
	} else if mismatched > 0 {
		e.log.Warn("clients' subsets differ from the simulator's", "policy", p.label(o.backends), "clients", mismatched)
	}
	cpu0, srv0, t0 := e.loadCPU(), srv.p.cpuSeconds(), time.Now()
	rctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, c := range cs {
		c.t0 = t0
		wg.Go(func() { c.run(rctx, newArrivals(o.seed, run, c.index, c.rate), o.timeout) })
	}
	var envoySamples []envoySample
	var serverSamples []serverSample
	if p.weights {
		wg.Go(func() { serverSamples = watchServer(rctx, srv.admin, len(cs), t0) })
	}
	if e.envoys != nil {
		f := e.envoys
		wg.Go(func() { envoySamples = watchEnvoys(rctx, f, e.backends, t0) })
	}
	select {
	case <-ctx.Done():
	case <-time.After(o.duration):
	}
	if hold {
		fmt.Fprintf(os.Stderr, "lab: holding %s; watch it at %s; interrupt to stop\n", p.label(o.backends), srv.ui())
		<-ctx.Done()
	}
	stop()
	wg.Wait()
	wall := time.Since(t0).Seconds()
	r := result{policy: p, run: run, ui: srv.ui(), mismatched: mismatched, cpuLoad: (e.loadCPU() - cpu0) / wall, cpuServer: (srv.p.cpuSeconds() - srv0) / wall}
	if ctx.Err() != nil && !hold {
		return result{}, ctx.Err()
	}
	if err := e.envoysAlive(); err != nil {
		return result{}, err
	}
	e.measure(&r, cs, t0)
	d := e.diagnose(r, cs, envoySamples)
	d.Server = serverSamples
	e.writeDiagnostics(d, p.slug())
	return r, nil
}

// measure fills r with the backends' utilization from t0 over the run
// and the clients' latencies and errors.
func (e *env) measure(r *result, cs []*client, t0 time.Time) {
	o := e.o
	secs := int(o.duration / time.Second)
	r.util = grid(e.sampler.window(t0, t0.Add(o.duration)), secs)
	r.fig = analyze(r.util, secs, int(o.window/time.Second), int(o.final/time.Second))
	caps := make([]float64, len(e.backends))
	for j, b := range e.backends {
		caps[j] = b.capacity
	}
	r.floor = noiseFloor(caps, r.fig.MeanUtil, o.final.Seconds(), 1001)
	var lat []float64
	for _, c := range cs {
		c.mu.Lock()
		lat = append(lat, c.latencies...)
		for code, n := range c.codes {
			if r.codes == nil {
				r.codes = map[string]int64{}
			}
			r.codes[code.String()] += n
		}
		c.mu.Unlock()
		r.requests += c.sent.Load()
		r.errors += c.errors.Load()
	}
	slices.Sort(lat)
	if len(lat) > 0 {
		r.p50, r.p99 = bench.Percentile(lat, 50), bench.Percentile(lat, 99)
	}
}

// diagnose gathers the run's diagnostics (diagnostics).
func (e *env) diagnose(r result, cs []*client, es []envoySample) diagnostics {
	d := diagnostics{Policy: r.policy.label(e.o.backends), Run: r.run + 1, Util: r.util, Envoys: es,
		Errors: map[int]map[int]int64{}, Slow: map[int]map[int]int64{}, Subsets: map[int][]int{},
		Codes: map[int]map[string]int{}, Requests: map[int]int64{}}
	subs := e.sims[cmpOr(r.policy.subset, e.o.backends)].Fleet.Subsets
	for _, c := range cs {
		if m := c.errAt.snapshot(); len(m) > 0 {
			d.Errors[c.index] = m
		}
		if m := c.slowAt.snapshot(); len(m) > 0 {
			d.Slow[c.index] = m
		}
		if c.index < len(subs) {
			d.Subsets[c.index] = subs[c.index]
		}
		d.Requests[c.index] = c.sent.Load()
		c.mu.Lock()
		for code, n := range c.codes {
			if d.Codes[c.index] == nil {
				d.Codes[c.index] = map[string]int{}
			}
			d.Codes[c.index][code.String()] += int(n)
		}
		c.mu.Unlock()
	}
	return d
}

// loadCPU is the CPU time so far of the backends, of this process (the
// clients and samplers) and of the run's Envoys.
func (e *env) loadCPU() float64 {
	total := selfCPU()
	if e.envoys != nil {
		total += e.envoys.cpuSeconds()
	}
	for _, b := range e.backends {
		total += b.p.cpuSeconds()
	}
	return total
}

func cmpOr(a, b int) int {
	if a != 0 {
		return a
	}
	return b
}
