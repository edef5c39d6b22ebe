package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/xds-server/xds-server/bench/section"
)

// options are the command line.
type options struct {
	clients, backends, size int
	trials                  int
	seed                    uint64
	preset                  string
	markdown                string
	timingRuns              int
	reference               bool
	xdsBench                string
}

func main() {
	var o options
	flag.IntVar(&o.clients, "clients", 300, "clients (client indices 0..clients-1)")
	flag.IntVar(&o.backends, "backends", 300, "backends (random ids)")
	flag.IntVar(&o.size, "size", 10, "subset size")
	flag.IntVar(&o.trials, "trials", 100, "trials per configuration, each with fresh random backend ids")
	flag.Uint64Var(&o.seed, "seed", 1, "seed of the random backend ids")
	flag.StringVar(&o.preset, "preset", "all", `"all" (the default) also runs 1000 clients x 200 backends x size 20; "none" runs only the configuration of the flags`)
	flag.StringVar(&o.markdown, "markdown", "", "rewrite the subsetting section of this Markdown file")
	flag.IntVar(&o.timingRuns, "timing-runs", 9, "runs of the 10,000 x 1,000 computation (median reported); 0 skips it")
	flag.BoolVar(&o.reference, "reference", true, "also simulate bounded-load rendezvous, an exact-balance reference that is not shipped")
	flag.StringVar(&o.xdsBench, "xds-bench", "", "output of `go test ./xds -bench SubsetReconcile -benchmem` to include (optional)")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil)).With("component", "bench.subsetsim")
	if err := run(o, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		log.Error("simulation failed", "error", err)
		os.Exit(1)
	}
}

// run simulates, prints the section to stdout and progress to stderr, and
// rewrites o.markdown if set.
func run(o options, args []string, stdout, stderr io.Writer) error {
	if o.clients < 1 || o.backends < 2 || o.size < 1 || o.trials < 1 {
		return fmt.Errorf("subsetsim: need clients >= 1, backends >= 2, size >= 1, trials >= 1")
	}
	if o.preset == "" {
		o.preset = "none"
	}
	if o.preset != "all" && o.preset != "none" {
		return fmt.Errorf("subsetsim: unknown preset %q (valid: all, none)", o.preset)
	}
	configs := []config{{clients: o.clients, backends: o.backends, size: o.size}}
	if extra := (config{clients: 1000, backends: 200, size: 20}); o.preset == "all" && extra != configs[0] {
		configs = append(configs, extra)
	}
	res := results{command: "go run ./bench/subsetsim " + strings.Join(args, " "), trials: o.trials, seed: o.seed}
	for _, cfg := range configs {
		fmt.Fprintf(stderr, "subsetsim: %s, %d trials\n", cfg, o.trials)
		res.configs = append(res.configs, simulateConfig(cfg, o.trials, o.seed, o.reference))
	}
	if o.timingRuns > 0 {
		fmt.Fprintf(stderr, "subsetsim: timing %s, %d runs\n", timingConfig, o.timingRuns)
		res.timings = timeAll(timingConfig, o.timingRuns, o.seed)
	}
	if o.xdsBench != "" {
		xb, err := readXDSBench(o.xdsBench)
		if err != nil {
			return err
		}
		res.xds = xb
	}
	return section.Emit(stdout, o.markdown, sectionName, render(res))
}
