package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/xds-server/xds-server/bench/section"
)

// options are the command line.
type options struct {
	backends, clients, size int
	util                    float64 // mean utilization: total load / total capacity
	sigma                   float64 // of the clients' lognormal rates
	intervals               int
	interval                time.Duration // between reports
	noise                   float64       // coefficient of variation of a request's cost; 0 = noise-free only
	damping                 float64       // least-loaded's step
	trials                  int
	seed                    uint64
	markdown                string
	goBench                 string
	json                    string // -json: the first trial's fleet and every policy's figures
	medianFleet             bool   // -median-fleet: print the median fleet's seed and nothing else
}

func defaultOptions() options {
	return options{backends: 100, clients: 300, size: 10, util: 0.6, sigma: 0.7, intervals: 60,
		interval: 10 * time.Second, noise: 2, damping: 0.5, trials: 21, seed: 1}
}

func main() {
	o := defaultOptions()
	flag.IntVar(&o.backends, "backends", o.backends, "backends (slots 0..backends-1), capacities uniform in [1, 2] x 100 requests/s")
	flag.IntVar(&o.clients, "clients", o.clients, "clients (client indices 0..clients-1)")
	flag.IntVar(&o.size, "subset", o.size, "subset size")
	flag.Float64Var(&o.util, "util", o.util, "mean utilization: total client rate over total capacity")
	flag.Float64Var(&o.sigma, "sigma", o.sigma, "sigma of the clients' lognormal request rates")
	flag.IntVar(&o.intervals, "intervals", o.intervals, "report intervals simulated per policy")
	flag.DurationVar(&o.interval, "interval", o.interval, "time between reports (the tracker's clock advances by this)")
	flag.Float64Var(&o.noise, "noise", o.noise, "coefficient of variation of a request's cost, with Poisson arrivals; 0 runs only the noise-free simulation")
	flag.Float64Var(&o.damping, "ll-damping", o.damping, "least-loaded: fraction of the way to its new split a client goes per interval, in (0, 1]")
	flag.IntVar(&o.trials, "trials", o.trials, "trials (seeds seed..seed+trials-1); figures are medians")
	flag.Uint64Var(&o.seed, "seed", o.seed, "seed of the first trial (capacities, rates, noise)")
	flag.StringVar(&o.json, "json", "", "also write the first trial's fleet and each policy's steady-state figures to this JSON file (read by bench/lab)")
	flag.BoolVar(&o.medianFleet, "median-fleet", false, "print the seed of the median fleet of seeds seed..seed+trials-1 (the one whose noise-free round robin and global-weights figures are nearest their medians; bench/lab's default fleet) on the first line, and nothing else is simulated")
	flag.StringVar(&o.markdown, "markdown", "", "rewrite the weightsim section of this Markdown file")
	flag.StringVar(&o.goBench, "go-bench", "", "output of `go test ./weights -run '^$' -bench 'Solve|Balance|Ingest' -benchmem` to include (optional)")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil)).With("component", "bench.weightsim")
	if err := run(o, os.Args[1:], os.Stdout, log); err != nil {
		log.Error("simulation failed", "error", err)
		os.Exit(1)
	}
}

// validate reports the options that make no simulation.
func (o options) validate() error {
	switch {
	case o.backends < 1 || o.clients < 1 || o.size < 1:
		return fmt.Errorf("weightsim: need backends, clients and subset >= 1 (got %d, %d, %d)", o.backends, o.clients, o.size)
	case !(o.util > 0 && o.util <= 10):
		return fmt.Errorf("weightsim: utilization %v not in (0, 10]", o.util)
	case !(o.sigma >= 0 && o.sigma <= 5):
		return fmt.Errorf("weightsim: sigma %v not in [0, 5]", o.sigma)
	case o.intervals < window+1:
		return fmt.Errorf("weightsim: need at least %d intervals (got %d)", window+1, o.intervals)
	case o.interval < time.Millisecond:
		return fmt.Errorf("weightsim: interval %v below 1ms", o.interval)
	case !(o.noise >= 0 && o.noise <= 100):
		return fmt.Errorf("weightsim: noise %v not in [0, 100]", o.noise)
	case !(o.damping > 0 && o.damping <= 1):
		return fmt.Errorf("weightsim: least-loaded damping %v not in (0, 1]", o.damping)
	case o.trials < 1:
		return fmt.Errorf("weightsim: need trials >= 1 (got %d)", o.trials)
	}
	return nil
}

// run simulates, prints the section to stdout, and rewrites o.markdown if
// set.
func run(o options, args []string, stdout io.Writer, log *slog.Logger) error {
	if err := o.validate(); err != nil {
		return err
	}
	if o.medianFleet {
		m, err := findMedianFleet(o)
		if err != nil {
			return err
		}
		return m.print(stdout)
	}
	res := results{command: strings.TrimSpace("go run ./bench/weightsim " + strings.Join(args, " ")), opts: o}
	noises := []float64{0}
	if o.noise > 0 {
		noises = append(noises, o.noise)
	}
	for _, noise := range noises {
		log.Info("simulating", "backends", o.backends, "clients", o.clients, "subset", o.size,
			"noise", noise, "trials", o.trials, "intervals", o.intervals)
		m, err := simulateMode(o, noise)
		if err != nil {
			return err
		}
		res.modes = append(res.modes, m)
	}
	if o.goBench != "" {
		gb, err := readGoBench(o.goBench)
		if err != nil {
			return err
		}
		res.goBench = gb
	}
	if o.json != "" {
		if err := writeJSON(o.json, res); err != nil {
			return err
		}
	}
	return section.Emit(stdout, o.markdown, sectionName, render(res))
}
