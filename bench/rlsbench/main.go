package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
	"time"
)

// options are the command line.
type options struct {
	load       LoadConfig
	compare    compareOptions
	doCompare  bool
	cpuProfile string
}

func main() {
	o := parseFlags(flag.CommandLine, os.Args[1:])
	log := slog.New(slog.NewTextHandler(os.Stderr, nil)).With("component", "bench.rlsbench")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			log.Error("cpu profile", "error", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	var err error
	if o.doCompare {
		err = runCompare(ctx, o.compare, os.Args[1:], os.Stdout, log)
	} else {
		err = runLoad(ctx, o.load, os.Stdout)
	}
	if err != nil {
		log.Error("benchmark failed", "error", err)
		stop()
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

// parseFlags reads the command line (exiting on errors, as flag does).
func parseFlags(fs *flag.FlagSet, args []string) options {
	o := options{load: LoadConfig{Workload: Workload{Domain: "rlsbench", Key: "user", ValuePrefix: "u", Keys: 10000, Descriptors: 1},
		Concurrency: 64, Conns: 8, Warmup: 2 * time.Second, Duration: 10 * time.Second, Seed: 1}}
	l, w := &o.load, &o.load.Workload
	fs.StringVar(&l.Addr, "addr", "", "host:port of the RLS gRPC service to load (load mode)")
	fs.IntVar(&l.Concurrency, "concurrency", l.Concurrency, "requests in flight (closed-loop workers)")
	fs.IntVar(&l.Conns, "conns", l.Conns, "gRPC connections the workers share (at most -concurrency)")
	fs.DurationVar(&l.Duration, "duration", l.Duration, "measured time per run")
	fs.DurationVar(&l.Warmup, "warmup", l.Warmup, "load before measuring, not counted")
	fs.Uint64Var(&l.Seed, "seed", l.Seed, "seed of the key draws")
	fs.StringVar(&l.Client, "client", clientH2, "h2: a lean HTTP/2 gRPC client (less CPU taken from the server on a small machine); grpc: grpc-go")
	fs.StringVar(&w.Domain, "domain", w.Domain, "rate-limit domain of every request")
	fs.StringVar(&w.Key, "key", w.Key, "descriptor entry key (load mode; compare mode uses its own workloads)")
	fs.StringVar(&w.ValuePrefix, "value-prefix", w.ValuePrefix, "descriptor entry values are this followed by k")
	fs.IntVar(&w.Keys, "keys", w.Keys, "distinct values k, drawn uniformly per descriptor")
	fs.IntVar(&w.Descriptors, "descriptors", w.Descriptors, "descriptors per request")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write this process's (the load generator's) CPU profile to this file")

	c := &o.compare
	fs.BoolVar(&o.doCompare, "compare", false, "run the side-by-side benchmark (starts redis-server, envoyproxy/ratelimit and xds-server)")
	fs.StringVar(&c.markdown, "markdown", "", "compare: rewrite the rlsbench section of this Markdown file")
	fs.StringVar(&c.envoyBin, "envoy-bin", "", "compare: envoyproxy/ratelimit's service_cmd binary (empty: skip that leg)")
	fs.StringVar(&c.xdsBin, "xds-bin", "", "compare: xds-server binary (empty: go build ./cmd/xds-server into the work dir)")
	fs.StringVar(&c.redisBin, "redis-bin", "redis-server", "compare: redis-server binary")
	fs.StringVar(&c.workDir, "workdir", "", "compare: directory for configs, binaries and Redis (empty: a new temp dir, removed at the end)")
	fs.IntVar(&c.rounds, "rounds", 3, "compare: rounds; each runs every leg once, in rotated order")
	fs.StringVar(&c.legs, "legs", "envoy,xds-redis,xds-memory", "compare: legs to run, of envoy, xds-redis, xds-memory")
	fs.StringVar(&c.workloads, "workloads", "within,within3,overlimit", "compare: workloads, of "+workloadNames())
	fs.IntVar(&c.envoyLocalCache, "envoy-local-cache", 64<<20, "compare: envoyproxy/ratelimit's LOCAL_CACHE_SIZE_IN_BYTES (its local over-limit cache; xds-server has one too); 0 disables")
	fs.StringVar(&c.redis, "redis", topoSingle, "compare: Redis topologies to measure, one after the other: single (one redis-server), cluster (3 masters, 3 replicas, started with redis-cli --cluster create) or single,cluster")
	fs.StringVar(&c.redisCLI, "redis-cli", "", "compare: redis-cli binary, for -redis cluster (empty: the one next to -redis-bin, else redis-cli on PATH)")
	fs.StringVar(&c.sweep, "sweep", "", "compare: requests in flight, comma-separated and above -concurrency, at which the headline (first) workload runs again on each topology, envoy and xds-redis legs, to see each server at its capacity; empty: none")
	fs.DurationVar(&c.envoyPipelineWindow, "envoy-pipeline-window", 0, "compare: envoyproxy/ratelimit's REDIS_PIPELINE_WINDOW (its write batching); 0 keeps its default (none)")
	_ = fs.Parse(args)
	if c.redisCLI == "" {
		c.redisCLI = redisCLIFor(c.redisBin)
	}
	c.load = o.load
	return o
}

// runLoad is load mode: one run against -addr, printed.
func runLoad(ctx context.Context, cfg LoadConfig, stdout io.Writer) error {
	if cfg.Addr == "" {
		return fmt.Errorf("rlsbench: -addr or -compare is required")
	}
	res, err := Run(ctx, cfg)
	if err != nil {
		return err
	}
	_, err = io.WriteString(stdout, renderLoad(cfg, res))
	return err
}
