package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/xds-server/xds-server/bench"
	"github.com/xds-server/xds-server/bench/section"
)

func main() {
	var (
		runs      = flag.String("runs", "", "JSON lines written by BenchmarkConsulFleet -results")
		haRuns    = flag.String("ha", "", "JSON lines written by BenchmarkHAFleet -results: rewrite only the HA section of -out")
		scaleRuns = flag.String("scale", "", "JSON lines written by BenchmarkConsulFleet -results at 10,000 nodes: rewrite only the 10,000-node section of -out")
		envoyRuns = flag.String("envoy", "", "JSON lines written by BenchmarkEnvoyFleet -envoy-results: rewrite only the real-Envoy section of -out")
		inprocess = flag.String("inprocess", "", "go test output of BenchmarkInProcessPush (optional)")
		commands  = flag.String("commands", "", "file listing the commands that produced the results (optional)")
		invoked   = flag.String("invoked", "make bench", "the one command that runs everything")
		wall      = flag.Duration("wall", 0, "wall time of the whole benchmark")
		out       = flag.String("out", "BENCHMARKS.md", "file to write")
	)
	modelRuns, question := modelFlags(flag.CommandLine)
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil)).With("component", "bench.report")
	if *modelRuns != "" {
		if err := runModel(*modelRuns, *commands, *out, question()); err != nil {
			log.Error("cost model report failed", "error", err)
			os.Exit(1)
		}
		return
	}
	if *haRuns != "" {
		if err := runHA(*haRuns, *commands, *out); err != nil {
			log.Error("HA report failed", "error", err)
			os.Exit(1)
		}
		return
	}
	if *scaleRuns != "" {
		if err := runScale(*scaleRuns, *commands, wall.String(), *out); err != nil {
			log.Error("10,000-node report failed", "error", err)
			os.Exit(1)
		}
		return
	}
	if *envoyRuns != "" {
		if err := runEnvoy(*envoyRuns, *commands, wall.String(), *out); err != nil {
			log.Error("real-Envoy report failed", "error", err)
			os.Exit(1)
		}
		return
	}
	if err := run(*runs, *inprocess, *commands, *invoked, *wall, *out); err != nil {
		log.Error("report failed", "error", err)
		os.Exit(1)
	}
}

func run(runsPath, inprocessPath, commandsPath, invoked string, wall time.Duration, out string) error {
	runs, err := bench.ReadRuns(runsPath)
	if err != nil {
		return err
	}
	if len(runs) == 0 {
		return fmt.Errorf("report: no runs in %s", runsPath)
	}
	var inproc []goBench
	if inprocessPath != "" {
		if inproc, err = readGoBench(inprocessPath); err != nil {
			return err
		}
	}
	cmds, err := readCommands(commandsPath)
	if err != nil {
		return err
	}
	doc := render(report{machine: probeMachine(), invoked: invoked, commands: cmds, wall: wall,
		modes: byMode(runs), inprocess: inproc, at: time.Now().UTC()})
	kept, err := preservedSections(out) // the simulators' sections survive a rewrite
	if err != nil {
		return err
	}
	doc = withPreserved(doc, kept)
	tmp := out + ".tmp"
	if err := os.WriteFile(tmp, []byte(doc), 0o644); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	if err := os.Rename(tmp, out); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return nil
}

// runHA rewrites the HA section of out from the runs at runsPath; the
// rest of out is kept byte for byte.
func runHA(runsPath, commandsPath, out string) error {
	return rewriteSection(out, haSection, runsPath, commandsPath, "HA runs", bench.ReadHARuns,
		func(runs []bench.HARun, cmds string) string { return renderHA(runs, cmds, time.Now().UTC()) })
}

// rewriteSection rewrites section name of out with render's body for the
// runs read from runsPath (what names them when there are none) and the
// commands at commandsPath; the rest of out is kept byte for byte.
func rewriteSection[R any](out, name, runsPath, commandsPath, what string, read func(string) ([]R, error), render func(runs []R, commands string) string) error {
	runs, err := read(runsPath)
	if err != nil {
		return err
	}
	if len(runs) == 0 {
		return fmt.Errorf("report: no %s in %s", what, runsPath)
	}
	cmds, err := readCommands(commandsPath)
	if err != nil {
		return err
	}
	if err := section.Rewrite(out, name, render(runs, cmds)); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return nil
}

// renderCommands writes the commands that produced a section, as a shell
// block after an empty line; nothing when there are none.
func renderCommands(p func(string, ...any), commands string) {
	if commands != "" {
		p("")
		p("```sh")
		p("%s", commands)
		p("```")
	}
}

// byMode groups runs by protocol, in first-seen order.
func byMode(runs []bench.Run) [][]bench.Run {
	var order []string
	groups := map[string][]bench.Run{}
	for _, r := range runs {
		if _, ok := groups[r.Mode]; !ok {
			order = append(order, r.Mode)
		}
		groups[r.Mode] = append(groups[r.Mode], r)
	}
	out := make([][]bench.Run, 0, len(order))
	for _, m := range order {
		out = append(out, groups[m])
	}
	return out
}

// machine describes where the benchmark ran.
type machine struct {
	cpu, memory, kernel, goVersion, consul string
	cores                                  int
}

func probeMachine() machine {
	m := machine{cores: runtime.NumCPU(), goVersion: runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH,
		cpu: "unknown", memory: "unknown", kernel: "unknown", consul: "unknown"}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
				if kb, err := strconv.ParseFloat(f[1], 64); err == nil {
					m.memory = fmt.Sprintf("%.1f GiB", kb/(1<<20))
				}
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.kernel = "Linux " + strings.TrimSpace(string(b))
	}
	if b, err := exec.Command("consul", "version").Output(); err == nil {
		m.consul, _, _ = strings.Cut(string(b), "\n")
	}
	return m
}

// goBench is one result line of `go test -bench`.
type goBench struct {
	name    string
	n       int
	metrics map[string]float64 // by unit
}

// readGoBench parses the result lines of a `go test -bench` output.
func readGoBench(path string) ([]goBench, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	var out []goBench
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") || len(f)%2 != 0 {
			continue
		}
		n, err := strconv.Atoi(f[1])
		if err != nil {
			continue
		}
		gb := goBench{name: f[0], n: n, metrics: map[string]float64{}}
		for i := 2; i+1 < len(f); i += 2 {
			if v, err := strconv.ParseFloat(f[i], 64); err == nil {
				gb.metrics[f[i+1]] = v
			}
		}
		out = append(out, gb)
	}
	return out, sc.Err()
}

// groupGoBench groups results by benchmark name, in first-seen order.
func groupGoBench(results []goBench) (names []string, groups map[string][]goBench) {
	groups = map[string][]goBench{}
	for _, r := range results {
		if !slices.Contains(names, r.name) {
			names = append(names, r.name)
		}
		groups[r.name] = append(groups[r.name], r)
	}
	return names, groups
}

// readCommands returns the commands file's text, trimmed ("" without a
// file): the commands a section shows as what produced it.
func readCommands(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("report: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}
