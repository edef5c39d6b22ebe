package bench

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
)

// haDrainPhase drains -drains endpoints one at a time through replica A
// (a) and undrains each through the last replica (c), recording for both
// the latency until every node of every replica has the new state.
func haDrainPhase(b *testing.B, fleets []*Fleet, a, c *Drainer, cat Catalog, r *HARun) {
	ctx := b.Context()
	perReplica := make([][]float64, len(fleets))
	for k := range *flagDrains {
		s, e := (k*7+3)%cat.Services, (k*3+1)%cat.Endpoints
		lats, err := awaitEverywhere(ctx, fleets, a.DrainWant(s, e), func() error { return a.Admin(ctx, s, e, true) })
		if err != nil {
			b.Fatalf("drain %d through A: %v", k, err)
		}
		for i, l := range lats {
			perReplica[i] = append(perReplica[i], l...)
			r.DrainLatencies = append(r.DrainLatencies, l...)
			r.DrainFirst = append(r.DrainFirst, Percentile(l, 0))
		}
		r.Drains++
		healthy := Want{Key: cat.Key(s, e), Status: corev3.HealthStatus_HEALTHY}
		lats, err = awaitEverywhere(ctx, fleets, healthy, func() error { return c.Admin(ctx, s, e, false) })
		if err != nil {
			b.Fatalf("undrain %d through the last replica: %v", k, err)
		}
		for _, l := range lats {
			r.UndrainLatencies = append(r.UndrainLatencies, l...)
		}
		sleep(ctx, *flagGap)
	}
	for _, l := range perReplica {
		r.ReplicaDrainP99 = append(r.ReplicaDrainP99, Percentile(l, 99))
	}
}

// haChangePhase makes -ha-changes single-endpoint changes in Consul (a
// TTL check flipped, endpoint 0 of service k, as BenchmarkConsulFleet
// does; the drains never touch endpoint 0 below 13 drains) and records the
// latency until every node of every replica has the new health, and the
// CPU each replica (scraped from metrics) and the load generator spent
// over the phase.
func haChangePhase(b *testing.B, fleets []*Fleet, flip *Flipper, cat Catalog, metrics []string, r *HARun) {
	ctx := b.Context()
	perReplica := make([][]float64, len(fleets))
	prof := haProfile(b, metrics)
	m0, cpu0, t0 := haScrape(b, metrics), SelfCPU(), time.Now()
	for k := range *flagHAChange {
		s, e := k%cat.Services, (k/cat.Services)%cat.Endpoints
		lats, err := awaitEverywhere(ctx, fleets, flip.Next(s, e), func() error { return flip.Flip(ctx, s, e) })
		if err != nil {
			b.Fatalf("change %d: %v", k, err)
		}
		for i, l := range lats {
			perReplica[i] = append(perReplica[i], l...)
			r.ChangeLatencies = append(r.ChangeLatencies, l...)
		}
		r.Changes++
		sleep(ctx, *flagGap)
	}
	if prof != nil {
		if err := <-prof; err != nil {
			b.Fatal(err)
		}
	}
	m1 := haScrape(b, metrics)
	r.ChangeSeconds, r.LoadGenChangeCPU = time.Since(t0).Seconds(), SelfCPU()-cpu0
	for i := range m1 {
		r.ChangeCPU = append(r.ChangeCPU, m1[i][MetricCPU]-m0[i][MetricCPU])
	}
	for _, l := range perReplica {
		r.ReplicaChangeP99 = append(r.ReplicaChangeP99, Percentile(l, 99))
	}
}

// haProfile starts fetching replica A's CPU profile (-changeprofile,
// -changeprofile-seconds long) from its /debug/pprof/ and returns the
// channel of the result, or nil without -changeprofile.
func haProfile(b *testing.B, metrics []string) <-chan error {
	if *flagChangeProfile == "" {
		return nil
	}
	ctx := b.Context()
	prof := make(chan error, 1)
	url := fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", strings.TrimSuffix(metrics[0], "/metrics"), *flagChangeSeconds)
	go func() { prof <- fetchTo(ctx, url, *flagChangeProfile) }()
	sleep(ctx, 100*time.Millisecond) // the profile starts before the first change
	return prof
}

// awaitEverywhere installs want on every fleet, calls do, and returns per
// fleet the latencies (seconds) of its nodes until each has want.
func awaitEverywhere(ctx context.Context, fleets []*Fleet, want Want, do func() error) ([][]float64, error) {
	waits := make([]*Wait, len(fleets))
	for i, f := range fleets {
		waits[i] = f.Install([]Want{want})
	}
	if err := do(); err != nil {
		return nil, err
	}
	out := make([][]float64, len(fleets))
	for i, f := range fleets {
		if err := f.Await(ctx, waits[i], changeTimeout); err != nil {
			return nil, err
		}
		for _, d := range waits[i].Latencies() {
			out[i] = append(out[i], d.Seconds())
		}
	}
	return out, nil
}
