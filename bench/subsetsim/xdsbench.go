package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// xdsBench is one sub-benchmark of xds's BenchmarkSubsetReconcile, as
// medians over its -count runs.
type xdsBench struct {
	name                   string
	runs                   int
	nsPerOp, bytes, allocs float64 // per op
	snapshots              float64 // distinct per-node snapshots after the run
}

// readXDSBench parses `go test -bench SubsetReconcile -benchmem` output.
func readXDSBench(path string) ([]xdsBench, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("subsetsim: %w", err)
	}
	defer f.Close()
	samples := map[string]map[string][]float64{}
	var order []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 4 || !strings.HasPrefix(fields[0], "BenchmarkSubsetReconcile/") {
			continue
		}
		name := strings.TrimPrefix(fields[0], "BenchmarkSubsetReconcile/")
		name = name[:max(strings.LastIndexByte(name, '-'), 0)] // drop -GOMAXPROCS
		if samples[name] == nil {
			samples[name] = map[string][]float64{}
			order = append(order, name)
		}
		for i := 2; i+1 < len(fields); i += 2 {
			v, err := strconv.ParseFloat(fields[i], 64)
			if err != nil {
				return nil, fmt.Errorf("subsetsim: %s: %q: %w", path, sc.Text(), err)
			}
			samples[name][fields[i+1]] = append(samples[name][fields[i+1]], v)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("subsetsim: %w", err)
	}
	if len(order) == 0 {
		return nil, fmt.Errorf("subsetsim: %s: no BenchmarkSubsetReconcile lines", path)
	}
	out := make([]xdsBench, 0, len(order))
	for _, name := range order {
		s := samples[name]
		out = append(out, xdsBench{name: name, runs: len(s["ns/op"]), nsPerOp: median(s["ns/op"]),
			bytes: median(s["B/op"]), allocs: median(s["allocs/op"]), snapshots: median(s["snapshots"])})
	}
	return out, nil
}

func renderXDSBench(p func(string, ...any), bs []xdsBench) {
	if len(bs) == 0 {
		return
	}
	p("### Serving subsets: one reconcile pass in xds")
	p("")
	p("`go test ./xds -run '^$' -bench SubsetReconcile -benchmem -count 5 -benchtime 5x` (BenchmarkSubsetReconcile):")
	p("10,000 connected nodes, one service of 1,000 endpoints, subset size 20 (or, in the `services=50` case,")
	p("the fleet benchmark's 50 services of 20 endpoints with subset size 5: every node meets every service,")
	p("500,000 picks a pass); each op flips one endpoint's health and rebuilds what every node is sent.")
	p("Nodes whose picks the flip does not touch keep their pick, load assignment and snapshot object from")
	p("the previous pass; nodes with equal picks share one load assignment and one snapshot. With 100")
	p("groups, indices repeat across groups (100 nodes per index): allocations follow the distinct")
	p("indices, not the nodes. Medians of the runs. (Issue 29: the `services=50` case took 721 ms,")
	p("422 MB and 1.05 million allocations a pass before its picks moved from maps to a slice and its")
	p("per-node maps and keys to reused scratch.)")
	p("")
	p("| case | runs | time per reconcile | B/op | allocs/op | allocs per node | distinct snapshots |")
	p("|---|---|---|---|---|---|---|")
	for _, b := range bs {
		p("| %s | %d | %s | %.1f MiB | %.0f | %.1f | %.0f |", b.name, b.runs, ms(time.Duration(b.nsPerOp)),
			b.bytes/(1<<20), b.allocs, b.allocs/10000, b.snapshots)
	}
	p("")
}
