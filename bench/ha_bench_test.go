package bench

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/xds-server/xds-server/e2e/harness"
)

var (
	flagReplicas = flag.Int("replicas", 3, "HA benchmark: xds-server replicas sharing one Consul with ha.enabled, -nodes nodes each")
	flagHAHold   = flag.Duration("ha-hold", 10*time.Second, "HA benchmark: idle time after the drains, inside the Consul write window (so that publish intervals are counted)")
	flagHALoad   = flag.Duration("ha-load", time.Second, "HA benchmark: every service has weights from POST /v1/load and each replica gets the reports of a third of the endpoints this often (0: no weights, no reports)")
	flagHABase   = flag.Bool("ha-baseline", true, "HA benchmark: first measure one replica without HA with the same nodes (the extra RSS and heap HA costs); false skips it")
	flagHAChange = flag.Int("ha-changes", 10, "HA benchmark: single-endpoint Consul catalog changes (a TTL check flipped), each sampled on every node of every replica")
)

// haSteady is the least time after every node synced before the memory
// of a replica is read: longer than weights.blackout_period (10s) plus
// ha.publish_interval (5s) at their defaults, so that the weights of the
// load reports and the shared summaries are in place.
const haSteady = 15 * time.Second

// haPrefix is the Consul KV prefix of the HA benchmark's replicas.
const haPrefix = "bench-ha/"

// haArgs are the flags that make a replica an HA one (issue 15): drains,
// summaries and the weights table in Consul KV, client indices too (the
// baseline replica has only the latter).
// The replicas' xds.handshake_timeout is 30s, not 5s: every replica's
// nodes connect at once on two shared cores, and a connection accepted in
// that storm may wait longer than 5s for its HTTP/2 preface to be read
// (a run failed on one such EOF).
func haArgs() []string {
	return []string{"--ha.enabled", "--ha.consul.prefix", haPrefix,
		"--subsetting.index_source", "consul", "--subsetting.consul.prefix", haPrefix + "subsetting",
		"--xds.handshake_timeout", "30s"}
}

// BenchmarkHAFleet measures issue 15's HA figures against a real Consul
// and -replicas real xds-server processes sharing it (ha.enabled), with
// -nodes ADS streams on each from this one process: the propagation of an
// admin drain made through replica A (and of its undrain through the last
// replica) to every node of every replica, each replica's Consul writes
// per second, and the RSS each replica has over one replica without HA
// serving the same -nodes nodes. Run it with -benchtime 1x; each
// iteration is a whole run with a fresh Consul and fresh servers.
func BenchmarkHAFleet(b *testing.B) {
	for range b.N {
		r := runHAFleet(b)
		b.ReportMetric(Percentile(r.DrainLatencies, 50)*1e3, "drain-p50-ms")
		b.ReportMetric(Percentile(r.DrainLatencies, 99)*1e3, "drain-p99-ms")
		b.ReportMetric(Percentile(r.UndrainLatencies, 99)*1e3, "undrain-p99-ms")
		b.ReportMetric(Percentile(r.ChangeLatencies, 99)*1e3, "change-p99-ms")
		b.ReportMetric(Median(r.WritesPerSecond()), "writes/s/replica")
		b.ReportMetric(r.TotalWritesPerSecond(), "writes/s/set")
		b.ReportMetric(Median(r.RSSPerNode())/(1<<10), "rss-KiB/node/replica")
		b.ReportMetric(Median(r.ExtraRSS())/(1<<20), "extra-rss-MiB/replica")
		b.ReportMetric(Median(r.ExtraHeap())/(1<<20), "extra-heap-MiB/replica")
		if *flagResults != "" {
			if err := AppendHARun(*flagResults, r); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// runHAFleet is one run: fresh Consul and catalog, the baseline replica
// without HA, then the HA replicas and their fleets.
func runHAFleet(b *testing.B) HARun {
	b.StopTimer()
	ctx := b.Context()
	cat := Catalog{Services: *flagServices, Endpoints: *flagEndpoints}
	if err := cat.Validate(); err != nil {
		b.Fatal(err)
	}
	if *flagReplicas < 2 {
		b.Fatalf("-replicas %d: want at least 2", *flagReplicas)
	}
	r := HARun{Replicas: *flagReplicas, Nodes: *flagNodes, Services: cat.Services, Endpoints: cat.Endpoints, StreamsPerConn: max(*flagStreamsPerConn, 1)}
	consul := harness.Consul(b)
	agent := consul.Client().Agent()
	if err := cat.Register(ctx, agent, 16); err != nil {
		b.Fatal(err)
	}
	common := []string{"--discovery.source", "consul", "--discovery.consul.address", consul.Addr()}
	if *flagHALoad > 0 {
		cfg := filepath.Join(b.TempDir(), "xds-server.yaml")
		if err := os.WriteFile(cfg, []byte(cat.WeightsConfig()), 0o644); err != nil {
			b.Fatal(err)
		}
		common = append(common, "--config", cfg)
		r.LoadInterval = flagHALoad.Seconds()
	}
	// The baseline differs only by ha.enabled: client indices in Consul too
	// (under a prefix of its own, so that its nodes hold no index of the
	// replicas' table).
	base := append(slices.Clone(common), "--subsetting.index_source", "consul", "--subsetting.consul.prefix", "bench-base/subsetting")
	if *flagHABase {
		r.BaseRSSBefore, r.BaseRSSAfter, r.BaseHeapAfter = haBaseline(b, cat, base)
	}

	srvs, metrics, admins := haReplicas(b, cat, append(slices.Clone(common), haArgs()...), r.Replicas)
	load := startLoad(b, cat, admins)
	m0, t0, cpu0 := haScrape(b, metrics), time.Now(), SelfCPU()
	r.RSSBefore = settledAll(b, metrics, MetricRSS)
	fleets := haConnect(b, srvs, cat, &r)
	r.LoadGenConnectCPU = SelfCPU() - cpu0
	synced := time.Now()
	sleep(ctx, settle)
	for i, m := range haScrape(b, metrics) {
		if n := m[MetricNodes]; int(n) != r.Nodes {
			b.Fatalf("replica %d reports %v connected nodes, want %d", i, n, r.Nodes)
		}
		r.RSSSynced = append(r.RSSSynced, m[MetricRSS])
	}
	haDrainPhase(b, fleets, NewDrainer(cat, agent, srvs[0].AdminAddr), NewDrainer(cat, agent, srvs[r.Replicas-1].AdminAddr), cat, &r)
	haChangePhase(b, fleets, NewFlipper(cat, agent), cat, metrics, &r)
	sleep(ctx, max(*flagHAHold, haSteady-time.Since(synced)))
	m1 := haScrape(b, metrics)
	r.WriteSeconds = time.Since(t0).Seconds()
	r.LoadGenCPU = SelfCPU() - cpu0
	for i := range m1 {
		r.ReplicaCPU = append(r.ReplicaCPU, m1[i][MetricCPU]-m0[i][MetricCPU])
	}
	r.RSSAfter = settledAll(b, metrics, MetricRSS)
	for _, srv := range srvs {
		r.HeapAfter = append(r.HeapAfter, liveHeap(b, srv.AdminAddr))
	}
	r.LoadPosts = stopLoad(b, load)
	r.Writes = writesDelta(m0, m1)
	return r
}

// writesDelta is, per replica, the increase of its Consul writes by kind
// from m0 to m1.
func writesDelta(m0, m1 []Metrics) []map[string]float64 {
	out := make([]map[string]float64, len(m1))
	for i := range m1 {
		out[i] = map[string]float64{}
		w0 := WritesByKind(m0[i])
		for kind, v := range WritesByKind(m1[i]) {
			out[i][kind] = v - w0[kind]
		}
	}
	return out
}

// haReplicas starts n replicas with args and waits until each is ready
// and sees the whole catalog; it returns them, their metrics URLs and
// their admin addresses.
func haReplicas(b *testing.B, cat Catalog, args []string, n int) ([]*harness.Server, []string, []string) {
	srvs, metrics, admins := make([]*harness.Server, n), make([]string, n), make([]string, n)
	for i := range srvs {
		srvs[i] = harness.StartServer(b, args...)
		srvs[i].WaitReady(b)
		admins[i] = srvs[i].AdminAddr
		metrics[i] = "http://" + admins[i] + "/metrics"
		if err := awaitCatalog(b.Context(), metrics[i], cat.Size()); err != nil {
			b.Fatal(err)
		}
	}
	return srvs, metrics, admins
}

// haBaseline runs one replica without HA, syncs -nodes nodes to it, and
// makes the same drains and hold as the HA replicas, and returns its RSS
// before the nodes and at the end, and its live heap then; the replica and
// fleet are stopped.
func haBaseline(b *testing.B, cat Catalog, args []string) (before, after, heap float64) {
	ctx := b.Context()
	srv := harness.StartServer(b, args...)
	srv.WaitReady(b)
	metrics := "http://" + srv.AdminAddr + "/metrics"
	if err := awaitCatalog(ctx, metrics, cat.Size()); err != nil {
		b.Fatal(err)
	}
	before = settled(b, metrics)[MetricRSS]
	load := startLoad(b, cat, []string{srv.AdminAddr})
	fleet, err := NewFleet(FleetConfig{Addr: srv.XDSAddr, Nodes: *flagNodes, IDOffset: *flagReplicas * *flagNodes, StreamsPerConn: *flagStreamsPerConn})
	if err != nil {
		b.Fatal(err)
	}
	w := fleet.Install(cat.Healthy())
	if err := fleet.Connect(ctx); err != nil {
		b.Fatal(err)
	}
	if err := fleet.Await(ctx, w, syncTimeout); err != nil {
		b.Fatalf("baseline: %v", err)
	}
	if err := awaitChan(ctx, fleet.AllTypes(), syncTimeout); err != nil {
		b.Fatalf("baseline: not every node received every type: %v", err)
	}
	// The same drains through itself and the same hold as the replicas,
	// so that its memory is read after the same history.
	synced := time.Now()
	var same HARun
	d := NewDrainer(cat, nil, srv.AdminAddr)
	haDrainPhase(b, []*Fleet{fleet}, d, d, cat, &same)
	sleep(ctx, max(*flagHAHold, haSteady-time.Since(synced)))
	m := settled(b, metrics)
	heap = liveHeap(b, srv.AdminAddr)
	if int(m[MetricNodes]) != *flagNodes {
		b.Fatalf("baseline reports %v connected nodes, want %d", m[MetricNodes], *flagNodes)
	}
	stopLoad(b, load)
	if err := fleet.Close(); err != nil {
		b.Fatalf("baseline fleet close: %v", err)
	}
	if err := srv.Stop(); err != nil {
		b.Fatalf("baseline stop: %v", err)
	}
	return before, m[MetricRSS], heap
}

// startLoad starts the -ha-load reports to the admin addresses (nil
// when off); it is stopped at cleanup at the latest.
func startLoad(b *testing.B, cat Catalog, admins []string) *LoadReporter {
	if *flagHALoad <= 0 {
		return nil
	}
	l := StartLoad(cat, admins, *flagHALoad)
	b.Cleanup(func() { _, _ = l.Stop() })
	return l
}

// stopLoad stops l and fails the benchmark if a post failed.
func stopLoad(b *testing.B, l *LoadReporter) int {
	if l == nil {
		return 0
	}
	n, err := l.Stop()
	if err != nil {
		b.Fatal(err)
	}
	return n
}

// liveHeap forces a GC in the server (its heap profile with gc=1) and
// returns its Go heap in use right after.
func liveHeap(b *testing.B, adminAddr string) float64 {
	ctx := b.Context()
	if err := fetchTo(ctx, "http://"+adminAddr+"/debug/pprof/heap?gc=1", os.DevNull); err != nil {
		b.Fatal(err)
	}
	m, err := Scrape(ctx, "http://"+adminAddr+"/metrics")
	if err != nil {
		b.Fatal(err)
	}
	return m[MetricHeapInuse]
}

// haConnect connects a fleet of -nodes nodes to each replica (distinct
// node ids) and waits until every node of every fleet is synced.
func haConnect(b *testing.B, srvs []*harness.Server, cat Catalog, r *HARun) []*Fleet {
	ctx := b.Context()
	fleets := make([]*Fleet, len(srvs))
	waits := make([]*Wait, len(srvs))
	start := time.Now()
	for i, srv := range srvs {
		f, err := NewFleet(FleetConfig{Addr: srv.XDSAddr, Nodes: r.Nodes, IDOffset: i * r.Nodes, StreamsPerConn: r.StreamsPerConn})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() {
			if err := f.Close(); err != nil {
				b.Errorf("fleet %d close: %v", i, err)
			}
		})
		fleets[i], waits[i] = f, f.Install(cat.Healthy())
		if err := f.Connect(ctx); err != nil {
			b.Fatal(err)
		}
	}
	for i, f := range fleets {
		if err := f.Await(ctx, waits[i], syncTimeout); err != nil {
			b.Fatalf("replica %d: %v", i, err)
		}
		if err := awaitChan(ctx, f.AllTypes(), syncTimeout); err != nil {
			b.Fatalf("replica %d: not every node received every type: %v", i, err)
		}
	}
	r.ConnectSeconds = time.Since(start).Seconds()
	return fleets
}

// haScrape scrapes the metrics of every replica.
func haScrape(b *testing.B, urls []string) []Metrics {
	out := make([]Metrics, len(urls))
	for i, u := range urls {
		m, err := Scrape(b.Context(), u)
		if err != nil {
			b.Fatal(err)
		}
		out[i] = m
	}
	return out
}

// settledAll scrapes one metric of every replica after a quiet moment.
func settledAll(b *testing.B, urls []string, metric string) []float64 {
	sleep(b.Context(), settle)
	out := make([]float64, len(urls))
	for i, u := range urls {
		m, err := Scrape(b.Context(), u)
		if err != nil {
			b.Fatal(err)
		}
		out[i] = m[metric]
	}
	return out
}
