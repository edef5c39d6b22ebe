package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/xds-server/xds-server/bench/section"
)

// compareOptions are compare mode's command line.
type compareOptions struct {
	load            LoadConfig // concurrency, conns, warmup, duration, seed, domain, keys
	markdown        string
	envoyBin        string
	xdsBin          string
	redisBin        string
	workDir         string
	rounds          int
	legs            string
	workloads       string
	envoyLocalCache int // bytes
	// envoyPipelineWindow is envoyproxy/ratelimit's REDIS_PIPELINE_WINDOW
	// (0: its default, no write batching).
	envoyPipelineWindow time.Duration
	redis               string // -redis: topologies to measure, of single, cluster
	redisCLI            string // redis-cli binary (cluster)
	sweep               string // -sweep: more concurrencies for the headline workload
	sweepAt             []int  // parsed
	topology            string // the topology being measured (set per topology)
}

// namedWorkload is one of compare mode's workloads.
type namedWorkload struct {
	name, label string
	w           Workload
}

// The configuration every leg serves (envoyproxy/ratelimit's format, fixed
// windows: what both implementations support): a generous per-user limit
// that the "within" workloads never reach, so every decision is a store
// round trip, and a small per-tenant limit that the "overlimit" workload
// exhausts at once.
const (
	userLimit   = 1_000_000 // per user per minute
	tenantLimit = 10        // per tenant per minute
	tenants     = 100
)

func configYAML(domain string) string {
	return fmt.Sprintf(`domain: %s
descriptors:
  - key: user
    rate_limit:
      unit: minute
      requests_per_unit: %d
  - key: tenant
    rate_limit:
      unit: minute
      requests_per_unit: %d
`, domain, userLimit, tenantLimit)
}

// workloadsFor returns compare mode's workloads: users (-keys of them) with
// 1 or 3 descriptors per request, and tenants.
func workloadsFor(domain string, users int) []namedWorkload {
	user := Workload{Domain: domain, Key: "user", ValuePrefix: "u", Keys: users, Descriptors: 1}
	user3 := user
	user3.Descriptors = 3
	return []namedWorkload{
		{"within", fmt.Sprintf("within limit (headline): %s users, 1 descriptor per request", thousands(uint64(users))), user},
		{"within3", fmt.Sprintf("within limit: %s users, 3 descriptors per request", thousands(uint64(users))), user3},
		{"overlimit", fmt.Sprintf("over-limit heavy: %d tenants at %d per minute, 1 descriptor per request", tenants, tenantLimit),
			Workload{Domain: domain, Key: "tenant", ValuePrefix: "t", Keys: tenants, Descriptors: 1}},
	}
}

func workloadNames() string {
	var names []string
	for _, w := range workloadsFor("d", 1) {
		names = append(names, w.name)
	}
	return strings.Join(names, ", ")
}

// Legs of the comparison.
const (
	legEnvoy     = "envoy"
	legXDSRedis  = "xds-redis"
	legXDSMemory = "xds-memory"
)

var legLabels = map[string]string{
	legEnvoy:     "envoyproxy/ratelimit, Redis",
	legXDSRedis:  "xds-server, Redis store",
	legXDSMemory: "xds-server, memory store",
}

// leg is one server under test.
type leg struct {
	name        string
	addr        string
	server      *proc
	redis       []*proc // the redis-servers it uses (every node of the topology); nil: none
	unavailable string
}

// compareRun is everything compare mode needs while it measures one
// Redis topology.
type compareRun struct {
	o          compareOptions
	log        *slog.Logger
	ps         *procs // this topology's processes
	dir        string
	cfgPath    string
	xdsBin     string
	redisAddrs []string // the node, or the cluster's nodes (all seeds)
	redis      []*proc  // the redis-servers, in the order of redisAddrs
	legs       []*leg
}

// runCompare runs the side-by-side benchmark on each Redis topology, one
// after the other (the processes of one stopped before the next starts),
// and emits its section.
func runCompare(ctx context.Context, o compareOptions, args []string, stdout io.Writer, log *slog.Logger) error {
	wls, legNames, topos, err := o.selection()
	if err != nil {
		return err
	}
	if o.sweepAt, err = parseSweep(o.sweep, o.load.Concurrency); err != nil {
		return err
	}
	ps := &procs{log: log}
	defer ps.stopAll()
	dir, err := workDir(o.workDir, ps)
	if err != nil {
		return err
	}
	rep := report{command: commandLine(args, dir, cacheDir()), load: o.load, rounds: o.rounds, config: configYAML(o.load.Workload.Domain),
		machine: machineNotes(o.redisBin, o.envoyBin), envoyLocalCache: o.envoyLocalCache,
		envoyPipelineWindow: o.envoyPipelineWindow, xdsServer: os.Getenv("XDS_SERVER_RATELIMIT_SERVER")}
	xdsBin, err := xdsServer(ctx, o.xdsBin, dir, legNames, log)
	if err != nil {
		return err
	}
	for _, topo := range topos {
		to := o
		to.topology = topo
		c := &compareRun{o: to, log: log.With("redis", topo), ps: &procs{log: log}, dir: dir, xdsBin: xdsBin}
		t, err := c.run(ctx, wls, topologyLegs(topo, legNames))
		c.ps.stopAll()
		if err != nil {
			return err
		}
		rep.topologies = append(rep.topologies, t)
	}
	return section.Emit(stdout, o.markdown, sectionName, render(rep))
}

// topologyLegs are the legs run on topo: the memory leg, which uses no
// Redis, only on one node.
func topologyLegs(topo string, legNames []string) []string {
	if topo == topoSingle {
		return legNames
	}
	return slices.DeleteFunc(slices.Clone(legNames), func(n string) bool { return n == legXDSMemory })
}

// run sets up one topology and measures every workload on it.
func (c *compareRun) run(ctx context.Context, wls []namedWorkload, legNames []string) (topologyResult, error) {
	t := topologyResult{name: c.o.topology}
	if len(legNames) == 0 {
		return t, nil
	}
	if err := c.setUp(ctx, legNames); err != nil {
		return t, err
	}
	for _, l := range c.legs {
		t.legs = append(t.legs, legInfo{name: l.name, unavailable: l.unavailable})
	}
	for _, wl := range wls {
		runs, err := c.measure(ctx, wl)
		if err != nil {
			return t, err
		}
		t.workloads = append(t.workloads, workloadResult{named: wl, runs: runs})
	}
	var err error
	t.sweep, err = c.sweep(ctx, wls[0], c.o.sweepAt)
	return t, err
}

// selection returns the workloads, legs and Redis topologies asked for.
func (o compareOptions) selection() ([]namedWorkload, []string, []string, error) {
	if o.rounds < 1 {
		return nil, nil, nil, fmt.Errorf("rlsbench: rounds %d < 1", o.rounds)
	}
	topos := splitList(o.redis)
	for _, t := range topos {
		if t != topoSingle && t != topoCluster {
			return nil, nil, nil, fmt.Errorf("rlsbench: unknown -redis topology %q (have single, cluster)", t)
		}
	}
	if len(topos) == 0 || len(slices.Compact(slices.Clone(topos))) != len(topos) {
		return nil, nil, nil, fmt.Errorf("rlsbench: -redis %q: want single, cluster or single,cluster", o.redis)
	}
	all := workloadsFor(o.load.Workload.Domain, o.load.Workload.Keys)
	var wls []namedWorkload
	for _, name := range splitList(o.workloads) {
		i := slices.IndexFunc(all, func(w namedWorkload) bool { return w.name == name })
		if i < 0 {
			return nil, nil, nil, fmt.Errorf("rlsbench: unknown workload %q (have %s)", name, workloadNames())
		}
		wls = append(wls, all[i])
	}
	legs := splitList(o.legs)
	for _, l := range legs {
		if legLabels[l] == "" {
			return nil, nil, nil, fmt.Errorf("rlsbench: unknown leg %q (have envoy, xds-redis, xds-memory)", l)
		}
	}
	if len(wls) == 0 || len(legs) == 0 {
		return nil, nil, nil, errors.New("rlsbench: no workload or no leg")
	}
	return wls, legs, topos, nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// workDir returns workDir (made if missing) or a new temp dir removed at
// exit (by ps.stopAll, once its processes stopped).
func workDir(workDir string, ps *procs) (string, error) {
	if workDir != "" {
		return workDir, os.MkdirAll(workDir, 0o755)
	}
	dir, err := os.MkdirTemp("", "rlsbench.")
	if err != nil {
		return "", fmt.Errorf("rlsbench: %w", err)
	}
	ps.cleanup = append(ps.cleanup, func() { os.RemoveAll(dir) })
	return dir, nil
}

// setUp writes the config, starts Redis and the servers of the legs and
// waits until each serves the domain.
func (c *compareRun) setUp(ctx context.Context, legNames []string) error {
	// envoyproxy/ratelimit reads RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/config/*.yaml;
	// xds-server reads the same file.
	cfgDir := filepath.Join(c.dir, "runtime", "ratelimit", "config")
	if err := os.MkdirAll(cfgDir, 0o755); err != nil {
		return fmt.Errorf("rlsbench: %w", err)
	}
	c.cfgPath = filepath.Join(cfgDir, "rlsbench.yaml")
	if err := os.WriteFile(c.cfgPath, []byte(configYAML(c.o.load.Workload.Domain)), 0o644); err != nil {
		return fmt.Errorf("rlsbench: %w", err)
	}
	start := c.startRedis
	if c.o.topology == topoCluster {
		start = c.startRedisCluster
	}
	if err := start(ctx); err != nil {
		return err
	}
	var err error
	for _, name := range legNames {
		l := &leg{name: name}
		c.legs = append(c.legs, l)
		switch name {
		case legEnvoy:
			err = c.startEnvoy(ctx, l)
		case legXDSRedis:
			err = c.startXDS(ctx, l, c.xdsBin, "redis")
		case legXDSMemory:
			err = c.startXDS(ctx, l, c.xdsBin, "memory")
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// measure runs wl against every available leg, o.rounds times, the order
// of the legs rotated each round.
func (c *compareRun) measure(ctx context.Context, wl namedWorkload) ([]legRun, error) {
	var avail []*leg
	for _, l := range c.legs {
		if l.unavailable == "" {
			avail = append(avail, l)
		}
	}
	var runs []legRun
	for r := range c.o.rounds {
		for j := range avail {
			l := avail[(j+r)%len(avail)]
			run, err := c.runOne(ctx, l, wl, r)
			if err != nil {
				return nil, err
			}
			runs = append(runs, run)
		}
	}
	return runs, nil
}

// runOne loads one leg once, Redis emptied first (the legs' keys may
// collide), and reads the CPU its processes used while measuring.
func (c *compareRun) runOne(ctx context.Context, l *leg, wl namedWorkload, round int) (legRun, error) {
	if err := c.flushRedis(ctx); err != nil {
		return legRun{}, err
	}
	cfg := c.o.load
	cfg.Addr, cfg.Workload = l.addr, wl.w
	cfg.Seed = c.o.load.Seed + uint64(round)*1_000_003
	var samples [2][3]time.Duration // start, end x client, server, redis
	n := 0
	cfg.Sample = func() {
		if n < 2 {
			samples[n][0], _ = cpuTime(0)
			samples[n][1], _ = cpuTime(l.server.pid())
			samples[n][2] = 0
			for _, p := range l.redis { // every node of the topology
				d, _ := cpuTime(p.pid())
				samples[n][2] += d
			}
		}
		n++
	}
	res, err := Run(ctx, cfg)
	if err != nil {
		return legRun{}, err
	}
	if err := l.server.exited(); err != nil {
		return legRun{}, err
	}
	run := legRun{leg: l.name, round: round, res: res}
	secs := res.Elapsed.Seconds()
	run.cpuClient = (samples[1][0] - samples[0][0]).Seconds() / secs
	run.cpuServer = (samples[1][1] - samples[0][1]).Seconds() / secs
	run.cpuRedis = (samples[1][2] - samples[0][2]).Seconds() / secs
	c.log.Info("run", "workload", wl.name, "round", round+1, "leg", l.name,
		"decisions_per_s", int(res.DecisionsPerSec()), "p50", res.Latency.Quantile(0.5), "p99", res.Latency.Quantile(0.99),
		"over_limit", res.OverLimit, "errors", res.Errors,
		"cpu_client", fmt.Sprintf("%.2f", run.cpuClient), "cpu_server", fmt.Sprintf("%.2f", run.cpuServer),
		"cpu_redis", fmt.Sprintf("%.2f", run.cpuRedis))
	if res.FirstError != "" {
		c.log.Warn("errors", "leg", l.name, "first", res.FirstError)
	}
	if c.o.topology == topoCluster {
		c.logSpread(ctx, l.name)
	}
	return run, nil
}

// commandLine is how the run was started, the work dir written as $TMP
// and the cache dir (scripts/rlsbench.sh installs into it) as
// $XDS_SERVER_CACHE.
func commandLine(args []string, dir, cache string) string {
	line := strings.TrimSpace("go run ./bench/rlsbench " + strings.Join(args, " "))
	if dir != "" {
		line = strings.ReplaceAll(line, dir, "$TMP")
	}
	if cache != "" {
		line = strings.ReplaceAll(line, cache, "$XDS_SERVER_CACHE")
	}
	return line
}

// cacheDir is $XDS_SERVER_CACHE or its default, ~/.cache/xds-server.
func cacheDir() string {
	if d := os.Getenv("XDS_SERVER_CACHE"); d != "" {
		return d
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".cache", "xds-server")
	}
	return ""
}
