package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// options are the command line.
type options struct {
	backends, clients, subset int
	kind                      string  // of the clients: grpcClients or envoyClients (--clients)
	runs                      int     // of the whole policy sequence; the figures are medians over them
	slots                     int     // concurrent slots per backend
	util                      float64 // mean utilization: total client rate over total capacity
	sigma                     float64 // of the clients' lognormal rates
	seed                      uint64
	medianFleet               bool          // seed is the median fleet's (--seed 0)
	duration                  time.Duration // per policy
	window                    time.Duration // smoothing window of the spread over time
	final                     time.Duration // the final window the figures are taken over
	timeout                   time.Duration // per request
	ringSize                  int           // ring_hash ring size (grpc-go's cap raised to it: ringHashCapEnv)
	fast                      bool          // xds-server's weights blackout and push interval at 2s (--quick)
	noFull                    bool          // skip the runs without subsets
	only                      string        // run only the policies whose label contains this
	hold                      bool
	json                      string
	markdown                  string
	charts                    string
	serverArgs                serverArgs
	zones                     bool    // the zone lab (--zones, zones.go) instead of the balancing policies
	zoneShare                 float64 // share of the backends in zone a (--zones)
	distribute                float64 // locality.distribute of the zone lab's distribute policy
}

func defaultOptions() options {
	return options{backends: 12, clients: 36, kind: grpcClients, subset: 4, runs: 1, slots: 8, util: 0.5, sigma: 0.7,
		duration: 75 * time.Second, window: 10 * time.Second, final: 25 * time.Second, timeout: 5 * time.Second,
		ringSize: 65536}
}

// quick shrinks o to the --quick lab: a fleet half the size, one run of
// shorter policy runs, the runs with subsets only, and weights pushed
// every 2s.
func (o *options) quick() {
	o.backends, o.clients, o.subset, o.runs = 6, 18, 3, 1
	o.duration, o.final, o.window = 30*time.Second, 10*time.Second, 5*time.Second
	o.fast, o.noFull = true, true
}

// ringHashCapEnv is grpc-go's cap on ring_hash rings (default 4096), read
// once when grpc-go initializes: the lab re-executes itself with it set.
const ringHashCapEnv = "GRPC_RING_HASH_CAP"

func main() {
	o, err := parseOptions(os.Args[1:], os.Stderr)
	if err == nil && os.Getenv(ringHashCapEnv) == "" {
		reexec(o.ringSize) // returns only if it cannot
	}
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		os.Exit(2)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil)).With("component", "bench.lab")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, os.Args[1:], os.Stdout, log); err != nil {
		log.Error("lab failed", "error", err)
		os.Exit(1)
	}
}

// parseOptions parses the command line; --quick applies first, so that
// other flags override it.
func parseOptions(args []string, out io.Writer) (options, error) {
	o := defaultOptions()
	for _, a := range args {
		if a == "--quick" || a == "-quick" || a == "--quick=true" || a == "-quick=true" {
			o.quick()
		}
		if a == "--zones" || a == "-zones" || a == "--zones=true" || a == "-zones=true" {
			o.zonePreset()
		}
	}
	fs := flag.NewFlagSet("lab", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Bool("quick", false, "a smaller, shorter lab (6 backends, 18 clients, subsets of 3, one run, 30s per policy, weights pushed every 2s, no runs without subsets): within 3 minutes")
	fs.IntVar(&o.runs, "runs", o.runs, "runs of the whole policy sequence on the same fleet (1 by default: one run at the defaults takes about 8 minutes; `make lab` runs 3, the figures its targets are judged on): every figure is the median over the runs, "+
		"errors their sum; each run draws its own arrivals (from --seed and the run), so runs are independent samples")
	fs.IntVar(&o.backends, "backends", o.backends, "backends; capacities uniform in [1, 2] x 100 requests/s (bench/weightsim's fleet)")
	fs.Var(clientsFlag{&o}, "clients", "the clients: grpc (the default: grpc-go xDS clients, each its own node), envoy (one real Envoy 1.40 per client node, "+
		"each node's load generator sending gRPC through its own Envoy), or the count of client nodes (36; repeatable: --clients envoy --clients 24)")
	fs.IntVar(&o.subset, "subset", o.subset, "subset size of the runs with subsets")
	fs.IntVar(&o.slots, "slots", o.slots, "concurrent slots per backend (service time = slots / capacity)")
	fs.Float64Var(&o.util, "util", o.util, "mean utilization: the clients' total rate over the backends' total capacity")
	fs.Float64Var(&o.sigma, "sigma", o.sigma, "sigma of the clients' lognormal request rates")
	fs.Uint64Var(&o.seed, "seed", o.seed, "seed of the fleet (capacities, rates: bench/weightsim's, the same in every run) and of the arrivals (another stream per run); "+
		"0 (the default): the median fleet of the shape (--backends, --clients, --subset, --util, --sigma) among seeds 1-200, by bench/weightsim -median-fleet")
	fs.DurationVar(&o.duration, "duration", o.duration, "length of each policy's run")
	fs.DurationVar(&o.window, "window", o.window, "smoothing window of the spread over time (convergence, oscillation)")
	fs.DurationVar(&o.final, "final", o.final, "the figures are the backends' mean utilization over the last this of each run")
	fs.DurationVar(&o.timeout, "timeout", o.timeout, "deadline of each request (a request past it is an error)")
	fs.IntVar(&o.ringSize, "ring-size", o.ringSize, "ring_hash ring size of the weighted policies: every client of a set of endpoints builds the same ring, "+
		"so its arcs' deviation from the weights (about 1/sqrt(ring size / endpoints)) is the same for all and does not average out")
	fs.BoolVar(&o.noFull, "no-full", o.noFull, "skip the runs without subsets")
	fs.StringVar(&o.only, "only", "", "run only the policies whose label contains this, or one of its |-separated parts (e.g. per-node, or 'round robin|per-node')")
	fs.BoolVar(&o.hold, "hold", false, "keep the last run's last policy's fleet running until interrupted (watch it in the console, /ui/)")
	fs.StringVar(&o.json, "json", "", "write the figures as JSON to this file (- for stdout, instead of the table)")
	fs.StringVar(&o.markdown, "markdown", "", "rewrite the lab section of this Markdown file (BENCHMARKS.md)")
	fs.StringVar(&o.charts, "charts", "", "write one SVG chart per policy into this directory (default: bench/lab/charts with --markdown)")
	fs.Bool("zones", false, "the zone lab (issue 26) instead: clients in zones a and b, zone a's backends short of its clients' demand, "+
		"round_robin, strict failover, distribute and capacity-aware spill compared on cross-zone share and max/mean (10 backends, 12 clients, util 0.8, 3 runs of 60s; "+
		"writes the lab-zones section with --markdown); other flags override its defaults")
	fs.Float64Var(&o.zoneShare, "zone-share", o.zoneShare, "with --zones: share of the backends in zone a (half the clients are)")
	fs.Float64Var(&o.distribute, "distribute", o.distribute, "with --zones: locality.distribute of the distribute policy")
	fs.Var(&o.serverArgs, "server-arg", "an extra xds-server flag, e.g. --server-arg=--weights.smoothing=0.7 (repeatable)")
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	if o.charts == "" && o.markdown != "" && !o.zones {
		o.charts = "bench/lab/charts"
		if o.kind == envoyClients {
			o.charts = "bench/lab/charts/envoy"
		}
	}
	err := o.validate()
	if fs.NArg() > 0 {
		err = errors.Join(fmt.Errorf("lab: unexpected arguments %q", fs.Args()), err)
	}
	if err != nil {
		fmt.Fprintln(out, err)
	}
	return o, err
}

// validate reports every option that makes no lab.
func (o options) validate() error {
	var errs []error
	if o.backends < 1 || o.clients < 1 || o.subset < 1 || o.slots < 1 {
		errs = append(errs, fmt.Errorf("lab: need backends, clients, subset and slots >= 1 (got %d, %d, %d, %d)",
			o.backends, o.clients, o.subset, o.slots))
	}
	if o.runs < 1 || o.runs > 99 {
		errs = append(errs, fmt.Errorf("lab: runs %d not in [1, 99]", o.runs))
	}
	if !(o.util > 0 && o.util < 1) {
		errs = append(errs, fmt.Errorf("lab: util %v not in (0, 1)", o.util))
	}
	if !(o.sigma >= 0 && o.sigma <= 3) {
		errs = append(errs, fmt.Errorf("lab: sigma %v not in [0, 3]", o.sigma))
	}
	if o.window < time.Second || o.final < time.Second || o.final > o.duration || o.window > o.duration {
		errs = append(errs, fmt.Errorf("lab: want 1s <= window, final <= duration (got %v, %v, %v)", o.window, o.final, o.duration))
	}
	if o.ringSize < 1024 || o.ringSize > 8<<20 {
		errs = append(errs, fmt.Errorf("lab: ring size %d not in [1024, 8388608]", o.ringSize))
	}
	if o.timeout <= 0 {
		errs = append(errs, fmt.Errorf("lab: timeout %v, want > 0", o.timeout))
	}
	if o.zones && (o.backends < 2 || o.clients < 2 || !(o.zoneShare > 0 && o.zoneShare < 1) || !(o.distribute > 0 && o.distribute < 1)) {
		errs = append(errs, fmt.Errorf("lab: --zones needs backends and clients >= 2, zone-share and distribute in (0, 1) (got %d, %d, %v, %v)",
			o.backends, o.clients, o.zoneShare, o.distribute))
	}
	return errors.Join(errs...)
}

// reexec runs this program again with grpc-go's ring cap at size: grpc-go
// reads it only at initialization.
func reexec(size int) {
	self, err := os.Executable()
	if err != nil {
		return
	}
	env := append(os.Environ(), fmt.Sprintf("%s=%d", ringHashCapEnv, size))
	_ = syscall.Exec(self, os.Args, env) // on success, never returns
}

// command is the lab's command line as the Markdown shows it.
func command(args []string) string {
	return strings.TrimSpace("go run ./bench/lab " + strings.Join(args, " "))
}
