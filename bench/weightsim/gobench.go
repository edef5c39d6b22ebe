package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// goBench is one benchmark of package weights (BenchmarkSolve,
// BenchmarkIngest), as medians over its -count runs.
type goBench struct {
	name    string             // without the Benchmark prefix and the -GOMAXPROCS suffix
	runs    int                // lines seen
	metrics map[string]float64 // unit (ns/op, B/op, allocs/op, sweeps, max/mean, ...) -> median
}

// readGoBench parses `go test ./weights -bench 'Solve|Balance|Ingest' -benchmem`
// output: every Benchmark line, in first-seen order of names.
func readGoBench(path string) ([]goBench, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("weightsim: %w", err)
	}
	defer f.Close()
	samples := map[string]map[string][]float64{}
	runs := map[string]int{}
	var order []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 4 || !strings.HasPrefix(fields[0], "Benchmark") {
			continue
		}
		name := strings.TrimPrefix(fields[0], "Benchmark")
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			if _, err := strconv.Atoi(name[i+1:]); err == nil {
				name = name[:i] // drop -GOMAXPROCS
			}
		}
		if samples[name] == nil {
			samples[name] = map[string][]float64{}
			order = append(order, name)
		}
		runs[name]++
		for i := 2; i+1 < len(fields); i += 2 {
			v, err := strconv.ParseFloat(fields[i], 64)
			if err != nil {
				return nil, fmt.Errorf("weightsim: %s: %q: %w", path, sc.Text(), err)
			}
			samples[name][fields[i+1]] = append(samples[name][fields[i+1]], v)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("weightsim: %s: %w", path, err)
	}
	if len(order) == 0 {
		return nil, fmt.Errorf("weightsim: %s: no Benchmark lines", path)
	}
	out := make([]goBench, 0, len(order))
	for _, name := range order {
		b := goBench{name: name, runs: runs[name], metrics: map[string]float64{}}
		for unit, vs := range samples[name] {
			b.metrics[unit] = median(vs)
		}
		out = append(out, b)
	}
	return out, nil
}

// findBench returns the named benchmark, if present.
func findBench(bs []goBench, name string) (goBench, bool) {
	for _, b := range bs {
		if b.name == name {
			return b, true
		}
	}
	return goBench{}, false
}
