package bench

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/xds-server/xds-server/e2e/harness"
)

var (
	flagEnvoys       = flag.Int("envoys", 30, "real Envoy processes (--concurrency 1) of BenchmarkEnvoyFleet")
	flagEnvoyModes   = flag.String("envoy-modes", "sotw,delta,consul", "comma-separated xDS servers of BenchmarkEnvoyFleet: sotw and delta (xds-server), consul (Consul's own xDS, `consul connect envoy` sidecars)")
	flagEnvoyChanges = flag.Int("envoy-changes", 15, "single-endpoint changes per BenchmarkEnvoyFleet run")
	flagEnvoyPoll    = flag.Duration("envoy-poll", 20*time.Millisecond, "how often each Envoy's admin API is read while a change is on its way (the latencies' resolution)")
	flagEnvoyResults = flag.String("envoy-results", "", "append one JSON line per BenchmarkEnvoyFleet run to this file (read by bench/report -envoy)")
	flagEnvoySettle  = flag.Duration("envoy-settle", 2*time.Second, "quiet time before each memory reading of BenchmarkEnvoyFleet")
)

// Timeouts of the phases of a real-Envoy run.
const (
	envoySyncTimeout   = 120 * time.Second // every Envoy shows the whole catalog
	envoyChangeTimeout = 30 * time.Second  // every Envoy shows a change
	envoySyncPoll      = 100 * time.Millisecond
	xdsHistoryInterval = 10 * time.Second // xds-server's default --console.history.interval
)

// BenchmarkEnvoyFleet measures, with -envoys real Envoy processes on one
// xDS server and the catalog in a real Consul, how long a Consul health
// change takes to reach every Envoy (its admin API), the server's memory
// per Envoy and the Envoys' own; for xds-server (state of the world and
// delta) and for Consul's own xDS serving the same catalog to Envoys
// bootstrapped by `consul connect envoy`. If an Envoy does not take what
// Consul sends, the run records what Envoy said instead. Run it with
// -benchtime 1x; each iteration is a whole run with a fresh Consul, server
// and Envoys.
func BenchmarkEnvoyFleet(b *testing.B) {
	for _, mode := range strings.Split(*flagEnvoyModes, ",") {
		b.Run(mode, func(b *testing.B) {
			for range b.N {
				r := runEnvoyFleet(b, mode)
				if len(r.Latencies) > 0 {
					b.ReportMetric(Percentile(r.Latencies, 50)*1e3, "p50-ms")
					b.ReportMetric(Percentile(r.Latencies, 99)*1e3, "p99-ms")
					b.ReportMetric(r.RSSPerEnvoy()/1024, "server-rss-KiB/envoy")
					b.ReportMetric(Median(r.EnvoyRSS)/(1<<20), "envoy-rss-MiB")
				}
				if *flagEnvoyResults != "" {
					if err := AppendEnvoyRun(*flagEnvoyResults, r); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// envoySide is the xDS server of one mode: its process (for memory and
// CPU readings), its live heap (xds-server only) and how to start Envoy i
// on it.
type envoySide struct {
	name   string
	pid    int
	heap   func() float64
	launch func(i int) *harness.Envoy
	// settled is the earliest time of the reading with no Envoy: the
	// server's catalog-sized allocations done.
	settled time.Time
}

// runEnvoyFleet is one run: fresh Consul, catalog, server and Envoys.
func runEnvoyFleet(b *testing.B, mode string) EnvoyRun {
	b.StopTimer()
	start := time.Now()
	cat := Catalog{Services: *flagServices, Endpoints: *flagEndpoints}
	if err := cat.Validate(); err != nil {
		b.Fatal(err)
	}
	r := EnvoyRun{Mode: mode, Envoys: *flagEnvoys, Services: cat.Services, Endpoints: cat.Endpoints,
		Poll: flagEnvoyPoll.Seconds(), Started: start.UTC().Format(time.RFC3339)}
	if r.Envoys < 1 {
		b.Fatalf("-envoys %d: want at least 1", r.Envoys)
	}
	consul := envoyConsul(b)
	var side envoySide
	switch mode {
	case EnvoyModeSotW, EnvoyModeDelta:
		side = xdsServerSide(b, consul, cat, mode == EnvoyModeDelta)
	case EnvoyModeConsul:
		side = consulSide(b, consul, cat)
	default:
		b.Fatalf("-envoy-modes: unknown mode %q (want sotw, delta or consul)", mode)
	}
	r.Server = side.name
	b.Logf("%s: catalog and server ready after %.1fs", mode, time.Since(start).Seconds())
	r.RSSBefore, r.HeapBefore = envoyServerMemory(b, side)

	envoys, admins, syncErr := envoyStart(b, side, cat, &r)
	r.Rejected, r.Said = envoyVerdict(b, envoys)
	if syncErr != nil || len(r.Rejected) > 0 {
		if mode == EnvoyModeConsul { // a valid result: what Envoy 1.40 did not take from Consul 1.14
			b.Logf("Envoy did not take Consul's config (%v):\n%s", syncErr, strings.Join(append(r.Rejected, r.Said...), "\n"))
			r.Latencies = nil
			r.RunSeconds = time.Since(start).Seconds()
			return r
		}
		b.Fatalf("Envoys on xds-server (%s): %v\nrejected: %s\nEnvoy said:\n%s", mode, syncErr,
			strings.Join(r.Rejected, "; "), strings.Join(r.Said, "\n"))
	}
	r.RSSAfter, r.HeapAfter = envoyServerMemory(b, side)
	for _, e := range envoys {
		mem, err := ReadMemory(e.PID())
		if err != nil {
			b.Fatal(err)
		}
		pss, err := ReadPSS(e.PID())
		if err != nil {
			b.Fatal(err)
		}
		r.EnvoyRSS, r.EnvoyPSS = append(r.EnvoyRSS, mem.RSS), append(r.EnvoyPSS, pss)
	}

	b.StartTimer()
	flip := envoyChanges(b, consul, cat, side, admins, &r)
	b.StopTimer()
	envoyFinalCheck(b, envoys, cat, flip)
	r.RunSeconds = time.Since(start).Seconds()
	b.Logf("%s: %d Envoys synced %.1fs after the first started; run %.1fs; server RSS %.1f -> %.1f MiB",
		mode, r.Envoys, r.SyncSeconds, r.RunSeconds, r.RSSBefore/(1<<20), r.RSSAfter/(1<<20))
	return r
}

// envoyStart starts the Envoys one after the other, each once the one
// before shows the whole catalog, and records how long each took from its
// launch (SyncSeconds: the first launch to the last synced). It stops at
// the first Envoy that does not sync and returns why.
func envoyStart(b *testing.B, side envoySide, cat Catalog, r *EnvoyRun) ([]*harness.Envoy, []*EnvoyAdmin, error) {
	t0 := time.Now()
	var envoys []*harness.Envoy
	var admins []*EnvoyAdmin
	for i := range r.Envoys {
		t := time.Now()
		e := side.launch(i)
		a := NewEnvoyAdmin(e.AdminAddr)
		envoys, admins = append(envoys, e), append(admins, a)
		if err := AwaitEnvoysSynced(b.Context(), []*EnvoyAdmin{a}, cat, envoySyncPoll/5, envoySyncTimeout); err != nil {
			return envoys, admins, fmt.Errorf("envoy %d of %d: %w", i+1, r.Envoys, err)
		}
		r.EnvoySync = append(r.EnvoySync, time.Since(t).Seconds())
	}
	r.SyncSeconds = time.Since(t0).Seconds()
	return envoys, admins, nil
}

// envoyConsul starts the Consul agent of a run (stopped at cleanup).
func envoyConsul(b *testing.B) *ConsulConnect {
	bin, err := harness.ConsulBinary()
	if err != nil {
		b.Fatal(err)
	}
	harness.RequireEnvoy(b)
	dir := b.TempDir()
	c, err := StartConsulConnect(b.Context(), bin, dir)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		c.Stop()
		if b.Failed() {
			b.Logf("consul log tail:\n%s", c.LogTail(40))
		}
	})
	return c
}

// xdsServerSide registers the catalog, starts xds-server on it (the
// defaults, as BenchmarkConsulFleet) and waits until it has every endpoint.
func xdsServerSide(b *testing.B, consul *ConsulConnect, cat Catalog, delta bool) envoySide {
	ctx := b.Context()
	if err := RegisterNodes(ctx, consul.Client.Catalog(), cat, false, 16); err != nil {
		b.Fatal(err)
	}
	srv := harness.StartServer(b, "--discovery.source", "consul", "--discovery.consul.address", consul.HTTPAddr)
	srv.WaitReady(b)
	if err := awaitCatalog(ctx, "http://"+srv.AdminAddr+"/metrics", cat.Size()); err != nil {
		b.Fatal(err)
	}
	// The console's history allocates its rings for every endpoint at its
	// first sample with the whole catalog: every --console.history.interval
	// (10s by default). A reading before it would count them as Envoys'.
	return envoySide{name: "xds-server", pid: srv.PID(), settled: time.Now().Add(xdsHistoryInterval + time.Second),
		heap: func() float64 {
			if *flagHeapProfile != "" { // the last reading's wins: every Envoy synced
				if err := fetchTo(ctx, "http://"+srv.AdminAddr+"/debug/pprof/heap?gc=1", *flagHeapProfile); err != nil {
					b.Fatal(err)
				}
			}
			return liveHeap(b, srv.AdminAddr)
		},
		launch: func(i int) *harness.Envoy {
			return harness.StartEnvoy(b, harness.EnvoyOptions{NodeID: fmt.Sprintf("bench-envoy-%03d", i),
				XDSAddr: srv.XDSAddr, Delta: delta})
		}}
}

// consulSide registers the catalog with Connect sidecars; Envoy i is the
// sidecar of its own "bench-envoy" instance, upstreams to every service,
// bootstrapped by `consul connect envoy -bootstrap`.
func consulSide(b *testing.B, consul *ConsulConnect, cat Catalog) envoySide {
	ctx := b.Context()
	agent := consul.Client.Agent()
	if err := RegisterNodes(ctx, consul.Client.Catalog(), cat, true, 16); err != nil {
		b.Fatal(err)
	}
	if err := AwaitConnectCatalog(ctx, consul.Client, cat, envoySyncTimeout); err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	socks, err := os.MkdirTemp("", "eb") // Unix socket paths must stay short
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(socks) })
	return envoySide{name: "consul", pid: consul.PID(), heap: func() float64 { return 0 },
		launch: func(i int) *harness.Envoy {
			sockDir := fmt.Sprintf("%s/e%03d", socks, i)
			if err := os.Mkdir(sockDir, 0o700); err != nil {
				b.Fatal(err)
			}
			if err := RegisterEnvoyProxy(ctx, agent, cat, i, harness.FreePort(b), sockDir); err != nil {
				b.Fatal(err)
			}
			path := fmt.Sprintf("%s/envoy-%03d.json", dir, i)
			if err := consul.Bootstrap(ctx, EnvoyProxyID(i), path); err != nil {
				b.Fatal(err)
			}
			return harness.StartEnvoy(b, harness.EnvoyOptions{NodeID: EnvoyProxyID(i), Bootstrap: path})
		}}
}
