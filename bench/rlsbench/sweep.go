package main

// The offered-load sweep: the headline workload measured again at more
// requests in flight, envoyproxy/ratelimit and xds-server with Redis
// side by side, so that each is seen at its capacity. At -concurrency
// one server may be saturated while the other still waits on its round
// trips (a closed loop's rate is requests in flight over latency); the
// sweep shows both at the load where each peaks, and the p99 it costs.

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// sweepPoint is the headline workload's runs at one concurrency.
type sweepPoint struct {
	concurrency int
	runs        []legRun
}

// parseSweep reads -sweep: concurrencies above base, ascending.
func parseSweep(s string, base int) ([]int, error) {
	var out []int
	for _, f := range splitList(s) {
		n, err := strconv.Atoi(f)
		if err != nil || n <= base || n > 10000 {
			return nil, fmt.Errorf("rlsbench: -sweep %q: each value must be an integer in (%d, 10000] (above -concurrency)", s, base)
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// sweep measures wl at each concurrency of c.o.sweep on the legs envoy
// and xds-redis (the memory leg is the Redis legs' reference, not a
// Redis server).
func (c *compareRun) sweep(ctx context.Context, wl namedWorkload, at []int) ([]sweepPoint, error) {
	var points []sweepPoint
	for _, n := range at {
		cc := *c
		cc.o.load.Concurrency = n
		cc.legs = slices.DeleteFunc(slices.Clone(c.legs), func(l *leg) bool { return l.name == legXDSMemory })
		cc.log = c.log.With("concurrency", n)
		runs, err := cc.measure(ctx, wl)
		if err != nil {
			return nil, err
		}
		points = append(points, sweepPoint{concurrency: n, runs: runs})
	}
	return points, nil
}

// renderSweep writes the sweep of t (the headline workload at
// -concurrency first, then each sweep point) and each server's peak.
func renderSweep(b *strings.Builder, t topologyResult, base int, h string) {
	if len(t.sweep) == 0 || len(t.workloads) == 0 {
		return
	}
	head := t.workloads[0]
	points := append([]sweepPoint{{concurrency: base, runs: head.runs}}, t.sweep...)
	fmt.Fprintf(b, "\n%s Capacity: the headline workload (%s) at more requests in flight\n\n", h, head.named.name)
	b.WriteString("Both servers at each offered load (closed loops, medians of the rounds): decisions/s and p99, the first row " +
		"is the table above. A server whose decisions/s stop growing with the load is at its capacity; more load only " +
		"lengthens its queue (its p99).\n\n")
	b.WriteString("| requests in flight | envoyproxy/ratelimit: decisions/s | : p99 | : CPU cores server / Redis / client " +
		"| xds-server: decisions/s | : p99 | : CPU cores server / Redis / client | decisions/s ratio |\n")
	b.WriteString("|---:|---:|---:|---|---:|---:|---|---:|\n")
	var envoyPeak, xdsPeak legSummary
	envoyAt, xdsAt := 0, 0
	sums := make([][2]legSummary, len(points))
	for i, p := range points {
		e, x := summarize(p.runs, legEnvoy), summarize(p.runs, legXDSRedis)
		sums[i] = [2]legSummary{e, x}
		fmt.Fprintf(b, "| %d | %s | %s | %s | %s | %s | %s | %s |\n", p.concurrency,
			thousands(uint64(e.decisionsPerSec+0.5)), fmtLatency(e.p99), cores(e),
			thousands(uint64(x.decisionsPerSec+0.5)), fmtLatency(x.p99), cores(x),
			ratio(x.decisionsPerSec, e.decisionsPerSec, e.runs > 0 && x.runs > 0))
		if e.runs > 0 && e.decisionsPerSec > envoyPeak.decisionsPerSec {
			envoyPeak, envoyAt = e, p.concurrency
		}
	}
	// xds-server's peak among the loads where its p99 stays within
	// envoyproxy/ratelimit's p99 at that one's peak.
	for i, s := range sums {
		if x := s[1]; x.runs > 0 && x.p99 <= envoyPeak.p99 && x.decisionsPerSec > xdsPeak.decisionsPerSec {
			xdsPeak, xdsAt = x, points[i].concurrency
		}
	}
	if envoyPeak.runs == 0 || xdsPeak.runs == 0 {
		b.WriteString("\nPeaks: **not measured** (a leg is missing, or xds-server's p99 never stayed within envoyproxy/ratelimit's).\n")
		return
	}
	tp, lat := xdsPeak.decisionsPerSec/envoyPeak.decisionsPerSec, float64(xdsPeak.p99)/float64(envoyPeak.p99)
	fmt.Fprintf(b, "\nAt capacity: envoyproxy/ratelimit peaks at %s decisions/s (%d in flight, p99 %s); xds-server, "+
		"with its p99 within that, at %s decisions/s (%d in flight, p99 %s): **%.2fx** at %.2fx the p99.\n",
		thousands(uint64(envoyPeak.decisionsPerSec+0.5)), envoyAt, fmtLatency(envoyPeak.p99),
		thousands(uint64(xdsPeak.decisionsPerSec+0.5)), xdsAt, fmtLatency(xdsPeak.p99), tp, lat)
	if t.name == topoCluster {
		fmt.Fprintf(b, "\n- xds-server Redis Cluster >= 3x envoyproxy/ratelimit's decisions/s at <= its p99 (issue 28), "+
			"each at its capacity: %.2fx at %.2fx the p99 — **%s**\n", tp, lat, metOrMissed(tp >= 3 && lat <= 1))
	}
}

func cores(s legSummary) string {
	if s.runs == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f / %.2f / %.2f", s.cpuServer, s.cpuRedis, s.cpuClient)
}
