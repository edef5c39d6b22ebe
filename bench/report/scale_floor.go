package main

import (
	"fmt"
	"runtime"

	"github.com/xds-server/xds-server/bench"
)

// renderFloors writes, per group, the CPU the server and the load
// generator spent on the connect storm and on a full push, and the least
// wall time that CPU needs on this machine's cores (issue 29: say whether
// the cores or the server set the limit). Runs without the server's storm
// CPU (older results) show none.
func renderFloors(p func(string, ...any), groups []scaleGroup) {
	cores := float64(runtime.NumCPU())
	p("What the %d cores allow: CPU-seconds of the server and of the load generator over the connect storm and", int(cores))
	p("over one full push (medians over runs and pushes), and the least wall time their sum needs on %d cores", int(cores))
	p("(the sum over the cores; Consul's share left out), next to the time measured.")
	p("")
	p("| variant | connect storm: server / load generator CPU | : least time | : measured | full push: server / load generator CPU | : least time | : measured p99 |")
	p("|---|---|---|---|---|---|---|")
	for _, g := range groups {
		f := computeScale(g)
		storm, stormFloor := "-", "-"
		if len(f.serverStormCPU) > 0 {
			s, l := bench.Median(f.serverStormCPU), bench.Median(f.loadCPU)
			storm, stormFloor = cpuPair(s, l), secs((s+l)/cores)
		}
		push, pushFloor, pushP99 := "-", "-", "-"
		if len(f.cpuPN) > 0 {
			s, l := bench.Median(f.cpuPN)*float64(g.runs[0].Nodes), bench.Median(f.loadPushCPU)
			push, pushFloor, pushP99 = cpuPair(s, l), secs((s+l)/cores), secs(bench.Median(f.pushP99))
		}
		p("| %s | %s | %s | %s | %s | %s | %s |", g.name(), storm, stormFloor, secs(bench.Median(f.storm)), push, pushFloor, pushP99)
	}
	p("")
}

func cpuPair(server, load float64) string {
	return fmt.Sprintf("%.2f / %.2f CPU-s", server, load)
}
