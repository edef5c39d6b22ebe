package bench

import (
	"context"
	"flag"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xds-server/xds-server/e2e/harness"
)

var (
	flagNodes          = flag.Int("nodes", 1000, "simulated xDS nodes (one ADS stream each)")
	flagServices       = flag.Int("services", 50, "services registered in Consul")
	flagEndpoints      = flag.Int("endpoints", 20, "endpoints per service")
	flagStreamsPerConn = flag.Int("streams-per-conn", 1, "nodes sharing one gRPC connection (1: a connection per node)")
	flagChanges        = flag.Int("changes", 20, "single-endpoint changes per run (propagation latency)")
	flagPushes         = flag.Int("pushes", 5, "full pushes per run (one endpoint of every service flipped at once)")
	flagDrains         = flag.Int("drains", 10, "lame-duck drains per run, alternately Consul maintenance and the admin drain API (drain propagation latency)")
	flagGap            = flag.Duration("gap", 500*time.Millisecond, "quiet time between two changes, so they never coalesce")
	flagSubsetSize     = flag.Int("subset-size", 0, "subset_size of every service (a config file for the server); 0: every node sees every endpoint")
	flagOpeners        = flag.Int("openers", 64, "streams opened at once when connecting; 0: every node at once (a connect storm)")
	flagServerFlags    = flag.String("server-flags", "", "more flags for the server, space-separated (e.g. --runtime.memory_limit_mib 1100)")
	flagGRPCWindows    = flag.Bool("grpc-windows", false, "nodes use grpc-go's HTTP/2 flow control (64 KiB windows grown by BDP pings) instead of Envoy's (static 256 MiB windows, no BDP pings)")
	flagModes          = flag.String("modes", "sotw", "comma-separated protocols of the fleet: sotw, delta")
	flagResults        = flag.String("results", "", "append one JSON line per run to this file (read by bench/report)")
	flagHeapProfile    = flag.String("heapprofile", "", "write the server's heap profile (its /debug/pprof/heap) once every node synced to this file, and its metrics to the file + .metrics")
	flagCPUProfile     = flag.String("cpuprofile", "", "write the server's CPU profile (its /debug/pprof/profile) over the first full push to this file")
	flagCPUSeconds     = flag.Int("cpuprofile-seconds", 5, "length of the -cpuprofile profile, from just before the first full push's flips")
	flagChangeProfile  = flag.String("changeprofile", "", "write the server's CPU profile over the single changes (its /debug/pprof/profile, -changeprofile-seconds long from just before the first change) to this file")
	flagChangeSeconds  = flag.Int("changeprofile-seconds", 10, "length of the -changeprofile profile")
	flagStormProfile   = flag.String("stormprofile", "", "write the server's CPU profile over the connect storm (its /debug/pprof/profile, -stormprofile-seconds long from just before the first dial) to this file")
	flagStormSeconds   = flag.Int("stormprofile-seconds", 5, "length of the -stormprofile profile")
)

// Timeouts of the phases of a run.
const (
	catalogTimeout = 60 * time.Second  // server sees every registered endpoint
	syncTimeout    = 180 * time.Second // every node has its first full config
	changeTimeout  = 30 * time.Second  // every node has a change
	settle         = 2 * time.Second   // before a memory reading
	cpuSettle      = 250 * time.Millisecond
)

// BenchmarkConsulFleet measures, against a real Consul agent and the real
// xds-server binary, the propagation of a Consul health change to every
// node, the server's memory per connected node and its CPU per full push.
// Run it with -benchtime 1x; each iteration is a whole run with a fresh
// Consul and server (about a minute at the defaults).
func BenchmarkConsulFleet(b *testing.B) {
	for _, mode := range strings.Split(*flagModes, ",") {
		b.Run(mode, func(b *testing.B) {
			for range b.N {
				r := runConsulFleet(b, mode)
				b.ReportMetric(Percentile(r.Latencies, 50)*1e3, "p50-ms")
				b.ReportMetric(Percentile(r.Latencies, 99)*1e3, "p99-ms")
				if len(r.DrainLatencies) > 0 {
					b.ReportMetric(Percentile(r.DrainLatencies, 99)*1e3, "drain-p99-ms")
				}
				b.ReportMetric((r.RSSAfter-r.RSSBefore)/float64(r.Nodes)/1024, "rss-KiB/node")
				b.ReportMetric(r.RSSPeak/(1<<20), "peak-rss-MiB")
				cpu := make([]float64, 0, len(r.Pushes))
				for _, p := range r.Pushes {
					cpu = append(cpu, p.CPUSeconds)
				}
				b.ReportMetric(Median(cpu), "cpu-s/push")
				if *flagResults != "" {
					if err := AppendRun(*flagResults, r); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// runConsulFleet is one run: fresh Consul, catalog, server and fleet.
func runConsulFleet(b *testing.B, mode string) Run {
	b.StopTimer()
	ctx := b.Context()
	cat := Catalog{Services: *flagServices, Endpoints: *flagEndpoints}
	if err := cat.Validate(); err != nil {
		b.Fatal(err)
	}
	r := Run{Mode: mode, Nodes: *flagNodes, Services: cat.Services, Endpoints: cat.Endpoints, StreamsPerConn: *flagStreamsPerConn,
		SubsetSize: *flagSubsetSize, Openers: *flagOpeners, ServerFlags: *flagServerFlags}
	if r.Openers <= 0 {
		r.Openers = r.Nodes
	}

	consul := harness.Consul(b)
	agent := consul.Client().Agent()
	if err := cat.Register(ctx, agent, 16); err != nil {
		b.Fatal(err)
	}
	args := []string{"--discovery.source", "consul", "--discovery.consul.address", consul.Addr()}
	args = append(args, strings.Fields(r.ServerFlags)...)
	if r.SubsetSize > 0 {
		path, err := cat.WriteSubsetConfig(b.TempDir(), r.SubsetSize)
		if err != nil {
			b.Fatal(err)
		}
		args = append(args, "--config", path)
	}
	srv := harness.StartServer(b, args...)
	srv.WaitReady(b)
	metrics := "http://" + srv.AdminAddr + "/metrics"
	if err := awaitCatalog(ctx, metrics, cat.Size()); err != nil {
		b.Fatal(err)
	}
	pid := srv.PID()
	before := settled(b, metrics)
	r.RSSBefore, r.HeapBefore, r.GoalBefore = before[MetricRSS], before[MetricHeapInuse], before[MetricHeapGoal]

	fleet, err := NewFleet(FleetConfig{Addr: srv.XDSAddr, Nodes: r.Nodes, StreamsPerConn: r.StreamsPerConn, Delta: mode == "delta",
		Openers: r.Openers, Subsets: r.SubsetSize > 0, GRPCWindows: *flagGRPCWindows})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := fleet.Close(); err != nil {
			b.Errorf("fleet close: %v", err)
		}
	})
	b.StartTimer()
	sync0 := cat.Healthy()
	if r.SubsetSize > 0 {
		sync0 = cat.Present(r.SubsetSize)
	}
	stormProf := startProfile(ctx, srv.AdminAddr, *flagStormProfile, *flagStormSeconds) // before the first dial
	cpu0 := SelfCPU()
	w := fleet.Install(sync0)
	if err := fleet.Connect(ctx); err != nil {
		b.Fatal(err)
	}
	if err := fleet.Await(ctx, w, syncTimeout); err != nil {
		b.Fatal(err)
	}
	if err := awaitChan(ctx, fleet.AllTypes(), syncTimeout); err != nil {
		b.Fatalf("not every node received every type: %v", err)
	}
	r.ConnectSeconds = time.Since(w.start).Seconds()
	r.LoadGenConnectCPU = SelfCPU() - cpu0
	r.ServerConnectCPU = scrapeOr(b, metrics)[MetricCPU] - before[MetricCPU]
	if stormProf != nil {
		if err := <-stormProf; err != nil {
			b.Fatal(err)
		}
	}
	after := settled(b, metrics)
	r.RSSAfter, r.HeapAfter, r.GoalAfter = after[MetricRSS], after[MetricHeapInuse], after[MetricHeapGoal]
	r.Goroutines = after[MetricGoroutines]
	r.SyncReleases = after[MetricReleases]
	if *flagHeapProfile != "" {
		if err := fetchTo(ctx, "http://"+srv.AdminAddr+"/debug/pprof/heap?gc=1", *flagHeapProfile); err != nil {
			b.Fatal(err)
		}
		if err := fetchTo(ctx, metrics, *flagHeapProfile+".metrics"); err != nil {
			b.Fatal(err)
		}
	}
	if err := fleet.Err(); err != nil {
		b.Fatalf("a node's stream failed after every node synced: %v", err)
	}
	if got := after[MetricNodes]; int(got) != r.Nodes {
		b.Fatalf("server reports %v connected nodes, want %d", got, r.Nodes)
	}

	flip := NewFlipper(cat, agent)
	changeProf := startProfile(ctx, srv.AdminAddr, *flagChangeProfile, *flagChangeSeconds) // before the first change
	c0, bytes0 := scrapeOr(b, metrics), fleet.RecvBytes()
	for k := range *flagChanges {
		s, e := k%cat.Services, (k/cat.Services)%cat.Endpoints
		quietGC() // before Install, which starts the clock
		gc0, selfGC0 := scrapeOr(b, metrics)[MetricGCs], SelfGCs()
		w := fleet.Install([]Want{flip.Next(s, e)})
		if err := flip.Flip(ctx, s, e); err != nil {
			b.Fatal(err)
		}
		if err := fleet.Await(ctx, w, changeTimeout); err != nil {
			b.Fatalf("change %d: %v", k, err)
		}
		r.ChangeServerGCs = append(r.ChangeServerGCs, scrapeOr(b, metrics)[MetricGCs]-gc0)
		r.ChangeLoadGenGCs = append(r.ChangeLoadGenGCs, SelfGCs()-selfGC0)
		for _, d := range w.Latencies() {
			r.Latencies = append(r.Latencies, d.Seconds())
		}
		r.Stages = appendStages(b, r.Stages, srv.AdminAddr, w)
		r.ChangeEDS = append(r.ChangeEDS, float64(w.EDSResponses())/float64(r.Nodes))
		r.ChangeSampled = append(r.ChangeSampled, w.Sampled())
		r.Changes++
		sleep(ctx, *flagGap)
	}
	c1 := scrapeOr(b, metrics)
	r.ChangeCPUSeconds, r.ChangeBytes = c1[MetricCPU]-c0[MetricCPU], float64(fleet.RecvBytes()-bytes0)
	r.ChangeConsulReads = Sum(c1, MetricConsulReads) - Sum(c0, MetricConsulReads)
	r.QuietGCs = c1[MetricQuietGCs] - c0[MetricQuietGCs]
	if changeProf != nil {
		if err := <-changeProf; err != nil {
			b.Fatal(err)
		}
	}

	for k := range *flagPushes {
		r.Pushes = append(r.Pushes, fullPush(b, fleet, flip, cat, metrics, k))
		sleep(ctx, *flagGap)
	}
	drainPhase(b, fleet, NewDrainer(cat, agent, srv.AdminAddr), flip, cat, &r, srv.AdminAddr)
	b.StopTimer()
	r.LoadGenCPU, r.RunSeconds = SelfCPU()-cpu0, time.Since(w.start).Seconds()
	end, err := Scrape(ctx, metrics)
	if err != nil {
		b.Fatal(err)
	}
	r.ConsulWrites = Sum(end, MetricConsulWrites)
	r.Releases = end[MetricReleases]
	if r.Refused = Refused(end); r.Refused != 0 {
		b.Errorf("the server refused %v nodes or connections", r.Refused)
	}
	sleep(ctx, settle)
	mem, err := ReadMemory(pid)
	if err != nil {
		b.Fatal(err)
	}
	r.RSSEnd, r.RSSPeak = mem.RSS, mem.Peak
	return r
}

// drainPhase drains -drains endpoints one at a time, alternately by Consul
// maintenance and by the admin API, and records for each the latency
// until every node has it DRAINING, and its stages (the server at admin);
// each is undrained (unmeasured) before the next.
func drainPhase(b *testing.B, fleet *Fleet, d *Drainer, flip *Flipper, cat Catalog, r *Run, admin string) {
	ctx := b.Context()
	for k := range *flagDrains {
		s, e := (k*7+3)%cat.Services, (k*3+1)%cat.Endpoints
		how, do := "consul", d.Maintenance
		if k%2 == 1 {
			how, do = "admin", d.Admin
		}
		quietGC() // before Install, which starts the clock
		w := fleet.Install([]Want{d.DrainWant(s, e)})
		if err := do(ctx, s, e, true); err != nil {
			b.Fatal(err)
		}
		if err := fleet.Await(ctx, w, changeTimeout); err != nil {
			b.Fatalf("drain %d (%s): %v", k, how, err)
		}
		for _, lat := range w.Latencies() {
			r.DrainLatencies = append(r.DrainLatencies, lat.Seconds())
		}
		r.DrainStages = appendStages(b, r.DrainStages, admin, w)
		r.Drains++
		w = fleet.Install([]Want{flip.Current(s, e)}) // its health from before the drain
		if err := do(ctx, s, e, false); err != nil {
			b.Fatal(err)
		}
		if err := fleet.Await(ctx, w, changeTimeout); err != nil {
			b.Fatalf("undrain %d (%s): %v", k, how, err)
		}
		sleep(ctx, *flagGap)
	}
}

// fullPush flips one endpoint of every service at once and measures the
// server's CPU until every node has all the changes.
func fullPush(b *testing.B, fleet *Fleet, flip *Flipper, cat Catalog, metrics string, k int) Push {
	ctx := b.Context()
	e := (k + 1) % cat.Endpoints
	quietGC()
	m0, err := Scrape(ctx, metrics)
	if err != nil {
		b.Fatal(err)
	}
	wants := make([]Want, cat.Services)
	for s := range cat.Services {
		wants[s] = flip.Next(s, e)
	}
	var prof chan error
	if k == 0 { // the profile starts before the flips
		prof = startProfile(ctx, strings.TrimPrefix(strings.TrimSuffix(metrics, "/metrics"), "http://"), *flagCPUProfile, *flagCPUSeconds)
	}
	cpu0, bytes0 := SelfCPU(), fleet.RecvBytes()
	w := fleet.Install(wants)
	var wg sync.WaitGroup
	errs := make([]error, cat.Services)
	for s := range cat.Services {
		wg.Go(func() { errs[s] = flip.Flip(ctx, s, e) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	if err := fleet.Await(ctx, w, changeTimeout); err != nil {
		b.Fatalf("full push %d: %v", k, err)
	}
	lat := w.Latencies()
	if prof != nil {
		if err := <-prof; err != nil {
			b.Fatal(err)
		}
	}
	sleep(ctx, cpuSettle)
	m1, err := Scrape(ctx, metrics)
	if err != nil {
		b.Fatal(err)
	}
	secs := make([]float64, len(lat))
	for i, d := range lat {
		secs[i] = d.Seconds()
	}
	return Push{
		CPUSeconds: m1[MetricCPU] - m0[MetricCPU], WallSeconds: Percentile(secs, 100), P99Seconds: Percentile(secs, 99),
		EDSPerNode: float64(w.EDSResponses()) / float64(fleet.cfg.Nodes),
		Reconciles: m1[MetricReconciles] - m0[MetricReconciles], EDSPushes: m1[MetricEDSPushes] - m0[MetricEDSPushes],
		LoadGenCPU: SelfCPU() - cpu0, Sampled: w.Sampled(),
		Bytes: float64(fleet.RecvBytes() - bytes0), ConsulReads: Sum(m1, MetricConsulReads) - Sum(m0, MetricConsulReads),
	}
}

// appendStages appends to out where the change w awaited went (StagesOf),
// from the server's passes at admin; a change no pass took is left out.
func appendStages(b *testing.B, out []map[string]float64, admin string, w *Wait) []map[string]float64 {
	passes, err := FetchPasses(b.Context(), admin)
	if err != nil {
		b.Fatal(err)
	}
	var last time.Duration
	for _, d := range w.Latencies() {
		last = max(last, d)
	}
	if s := StagesOf(passes, w.start, last); s != nil {
		out = append(out, s)
	}
	return out
}

// awaitCatalog polls the server's metrics until it counts want healthy
// endpoints: registration reaches the catalog asynchronously.
func awaitCatalog(ctx context.Context, url string, want int) error {
	deadline := time.Now().Add(catalogTimeout)
	got := 0.0
	for time.Now().Before(deadline) {
		m, err := Scrape(ctx, url)
		if err != nil {
			return err
		}
		got = 0
		for series, v := range m {
			if strings.HasPrefix(series, "xds_service_endpoints{") && strings.Contains(series, `health="healthy"`) {
				got += v
			}
		}
		if int(got) == want {
			return nil
		}
		sleep(ctx, 100*time.Millisecond)
	}
	return fmt.Errorf("server counts %v healthy endpoints after %v, want %d", got, catalogTimeout, want)
}

// startProfile starts fetching the server's CPU profile (admin is its
// admin address) of seconds into path, and returns the fetch's outcome
// channel once the profile has begun; nil when path is empty.
func startProfile(ctx context.Context, admin, path string, seconds int) chan error {
	if path == "" {
		return nil
	}
	done := make(chan error, 1)
	url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", admin, seconds)
	go func() { done <- fetchTo(ctx, url, path) }()
	sleep(ctx, 100*time.Millisecond) // the profile has begun
	return done
}

// quietGC collects the load generator's garbage before a measured
// change: its collector would otherwise stall, now and then, every node
// it holds at once (real nodes do not share a heap), and the change
// would look slow. The server's collections are its own business and
// stay in the figures.
func quietGC() { runtime.GC() }

// scrapeOr scrapes the metrics now, failing the benchmark on an error.
func scrapeOr(b *testing.B, url string) Metrics {
	m, err := Scrape(b.Context(), url)
	if err != nil {
		b.Fatal(err)
	}
	return m
}

// settled scrapes the metrics after a quiet moment.
func settled(b *testing.B, url string) Metrics {
	sleep(b.Context(), settle)
	m, err := Scrape(b.Context(), url)
	if err != nil {
		b.Fatal(err)
	}
	return m
}

func awaitChan(ctx context.Context, c <-chan struct{}, timeout time.Duration) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-c:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return fmt.Errorf("timed out after %v", timeout)
	}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
