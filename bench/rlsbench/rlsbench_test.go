package main

import (
	"context"
	"math"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/proto"
)

func TestHistogramBuckets(t *testing.T) {
	for i := range numBuckets {
		lo, hi := bucketRange(i)
		if bucketOf(lo) != i || bucketOf(hi) != i {
			t.Fatalf("bucket %d = [%d, %d] maps back to %d, %d", i, lo, hi, bucketOf(lo), bucketOf(hi))
		}
		if i > 0 {
			if _, prevHi := bucketRange(i - 1); prevHi+1 != lo {
				t.Fatalf("gap before bucket %d: previous ends at %d, this starts at %d", i, prevHi, lo)
			}
		}
		if lo >= 2*subBuckets && float64(hi-lo+1)/float64(lo) > 1.0/subBuckets {
			t.Fatalf("bucket %d = [%d, %d] wider than 1/%d of its value", i, lo, hi, subBuckets)
		}
	}
	if got := bucketOf(math.MaxUint64); got != numBuckets-1 {
		t.Errorf("huge value in bucket %d, want the last, %d", got, numBuckets-1)
	}
}

func TestHistogramQuantiles(t *testing.T) {
	for name, sample := range map[string][]time.Duration{
		"lognormal around 1ms": genSample(20000, func(r *rand.Rand) float64 { return 1e6 * math.Exp(r.NormFloat64()) }),
		"uniform 0-300ns":      genSample(5000, func(r *rand.Rand) float64 { return r.Float64() * 300 }),
		"one value":            {42 * time.Microsecond},
		"two clusters":         append(slices.Repeat([]time.Duration{time.Millisecond}, 990), slices.Repeat([]time.Duration{time.Second}, 10)...),
	} {
		t.Run(name, func(t *testing.T) {
			var h Histogram
			for _, d := range sample {
				h.Record(d)
			}
			sorted := slices.Clone(sample)
			slices.Sort(sorted)
			if h.Count() != uint64(len(sample)) || h.Max() != sorted[len(sorted)-1] {
				t.Fatalf("count %d max %v, want %d and %v", h.Count(), h.Max(), len(sample), sorted[len(sorted)-1])
			}
			for _, q := range []float64{0, 0.5, 0.9, 0.99, 0.999, 1} {
				got, want := h.Quantile(q), exactQuantile(sorted, q)
				if err := math.Abs(float64(got-want)) / float64(want); err > 0.004+1e-9 && got-want > 1 {
					t.Errorf("q%v = %v, exact %v (error %.2f%%)", q, got, want, 100*err)
				}
			}
		})
	}
}

func TestHistogramMerge(t *testing.T) {
	var a, b, all Histogram
	for i := range 1000 {
		d := time.Duration(i*i) * time.Microsecond
		all.Record(d)
		if i%3 == 0 {
			a.Record(d)
		} else {
			b.Record(d)
		}
	}
	a.Merge(&b)
	if a != all {
		t.Errorf("merged histogram differs from the one fed everything")
	}
	var empty Histogram
	if empty.Quantile(0.99) != 0 {
		t.Errorf("empty histogram quantile not 0")
	}
}

func genSample(n int, f func(*rand.Rand) float64) []time.Duration {
	r := rand.New(rand.NewPCG(1, 2))
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = time.Duration(f(r))
	}
	return out
}

func TestAppendRequestIsARateLimitRequest(t *testing.T) {
	w := Workload{Domain: "rlsbench", Key: "user", ValuePrefix: "u", Keys: 1_000_000, Descriptors: 3}
	b, _ := w.AppendRequest(nil, nil, []int{0, 9, 999_999})
	var req rlsv3.RateLimitRequest
	if err := proto.Unmarshal(b, &req); err != nil {
		t.Fatal(err)
	}
	want := &rlsv3.RateLimitRequest{Domain: "rlsbench", Descriptors: []*rlcommon.RateLimitDescriptor{
		{Entries: []*rlcommon.RateLimitDescriptor_Entry{{Key: "user", Value: "u0"}}},
		{Entries: []*rlcommon.RateLimitDescriptor_Entry{{Key: "user", Value: "u9"}}},
		{Entries: []*rlcommon.RateLimitDescriptor_Entry{{Key: "user", Value: "u999999"}}},
	}}
	if !proto.Equal(&req, want) {
		t.Errorf("request = %v, want %v", &req, want)
	}
	if got, err := proto.Marshal(want); err != nil || string(got) != string(b) {
		t.Errorf("bytes differ from proto.Marshal's: %x vs %x (%v)", b, got, err)
	}
}

func TestGeneratorIsUniformAndAllocationFree(t *testing.T) {
	w := Workload{Domain: "d", Key: "k", ValuePrefix: "v", Keys: 10, Descriptors: 2}
	g := newGenerator(w, 7)
	counts := map[string]int{}
	const draws = 50_000
	for range draws {
		var req rlsv3.RateLimitRequest
		if err := proto.Unmarshal(g.next(), &req); err != nil {
			t.Fatal(err)
		}
		if len(req.Descriptors) != 2 {
			t.Fatalf("%d descriptors, want 2", len(req.Descriptors))
		}
		for _, d := range req.Descriptors {
			counts[d.Entries[0].Value]++
		}
	}
	if len(counts) != 10 {
		t.Fatalf("values drawn: %v, want v0..v9", counts)
	}
	for v, n := range counts {
		if want := 2 * draws / 10; math.Abs(float64(n-want)) > 0.05*float64(want) {
			t.Errorf("%s drawn %d times, want about %d", v, n, want)
		}
	}
	if allocs := testing.AllocsPerRun(1000, func() { g.next() }); allocs != 0 {
		t.Errorf("generator.next allocates %v times per request", allocs)
	}
}

func TestWorkloadValidate(t *testing.T) {
	for name, tc := range map[string]struct {
		w  Workload
		ok bool
	}{
		"fine":           {Workload{Domain: "d", Key: "k", Keys: 1, Descriptors: 1}, true},
		"no domain":      {Workload{Key: "k", Keys: 1, Descriptors: 1}, false},
		"no keys":        {Workload{Domain: "d", Key: "k", Descriptors: 1}, false},
		"no descriptors": {Workload{Domain: "d", Key: "k", Keys: 1}, false},
	} {
		if err := tc.w.Validate(); (err == nil) != tc.ok {
			t.Errorf("%s: Validate() = %v", name, err)
		}
	}
}

func TestParseDecisions(t *testing.T) {
	limit := &rlsv3.RateLimitResponse_RateLimit{RequestsPerUnit: 10, Unit: rlsv3.RateLimitResponse_RateLimit_MINUTE}
	resp := &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OVER_LIMIT, Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{
		{Code: rlsv3.RateLimitResponse_OK, CurrentLimit: limit, LimitRemaining: 3},
		{Code: rlsv3.RateLimitResponse_OVER_LIMIT, CurrentLimit: limit},
		{Code: rlsv3.RateLimitResponse_OK},
		{Code: rlsv3.RateLimitResponse_UNKNOWN},
		{Code: rlsv3.RateLimitResponse_OK, CurrentLimit: limit},
	}}
	b, err := proto.Marshal(resp)
	if err != nil {
		t.Fatal(err)
	}
	var d decisions
	if err := d.parse(b); err != nil {
		t.Fatal(err)
	}
	if d.overall != codeOverLimit || d.ok != 2 || d.over != 1 || d.unlimited != 1 || d.unknown != 1 {
		t.Errorf("parsed %+v", d)
	}
	if err := d.parse(b[:len(b)-1]); err == nil {
		t.Errorf("truncated response parsed without error")
	}
}

func TestMedianAndFormatting(t *testing.T) {
	if m := median([]float64{3, 1, 2}); m != 2 {
		t.Errorf("median = %v", m)
	}
	if m := median([]float64{4, 1, 2, 3}); m != 2.5 {
		t.Errorf("median = %v", m)
	}
	for n, want := range map[uint64]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
	if got := fmtLatency(1500 * time.Microsecond); got != "1.50 ms" {
		t.Errorf("fmtLatency = %q", got)
	}
	if got := fmtLatency(250 * time.Microsecond); got != "250 µs" {
		t.Errorf("fmtLatency = %q", got)
	}
}

// fakeRun is a run of leg with the given decisions/s over 10 s, every
// request taking p99.
func fakeRun(leg string, round int, perSec float64, p99 time.Duration) legRun {
	r := &Result{Elapsed: 10 * time.Second, Requests: uint64(perSec * 10), OK: uint64(perSec * 10)}
	for range 100 {
		r.Latency.Record(p99)
	}
	return legRun{leg: leg, round: round, res: r, cpuServer: 1, cpuRedis: 0.25, cpuClient: 0.5}
}

// singleResult is three rounds of the three legs on one Redis node.
func singleResult(wl namedWorkload) topologyResult {
	return topologyResult{name: topoSingle,
		legs: []legInfo{{name: legEnvoy}, {name: legXDSRedis}, {name: legXDSMemory}},
		workloads: []workloadResult{{named: wl, runs: []legRun{
			fakeRun(legEnvoy, 0, 10000, 4*time.Millisecond), fakeRun(legXDSRedis, 0, 25000, 2*time.Millisecond), fakeRun(legXDSMemory, 0, 60000, time.Millisecond),
			fakeRun(legEnvoy, 1, 11000, 4*time.Millisecond), fakeRun(legXDSRedis, 1, 26000, 2*time.Millisecond), fakeRun(legXDSMemory, 1, 61000, time.Millisecond),
			fakeRun(legEnvoy, 2, 9000, 4*time.Millisecond), fakeRun(legXDSRedis, 2, 24000, 2*time.Millisecond), fakeRun(legXDSMemory, 2, 59000, time.Millisecond),
		}}}}
}

func TestRender(t *testing.T) {
	wls := workloadsFor("rlsbench", 10000)
	rep := report{command: "go run ./bench/rlsbench -compare", rounds: 3, config: configYAML("rlsbench"),
		load:    LoadConfig{Concurrency: 64, Conns: 8, Warmup: 2 * time.Second, Duration: 10 * time.Second},
		machine: machine{cpu: "Test CPU", cores: 2}, envoyLocalCache: 1 << 20,
		topologies: []topologyResult{singleResult(wls[0])},
	}
	got := render(rep)
	for _, want := range []string{
		"## Rate-limit service (RLS v3)",
		"`go run ./bench/rlsbench -compare`",
		"Test CPU, 2 cores",
		"**64 requests in flight**",
		"| envoyproxy/ratelimit, Redis | **10,000** (10,000 / 11,000 / 9,000) | 10,000 | 4.00 ms | 4.00 ms |",
		"| xds-server, Redis store | **25,000** (25,000 / 26,000 / 24,000) |",
		"| 1.00 / - / 0.50 | 16.7 / - |", // memory leg: no Redis CPU
		"| 1.00 / 0.25 / 0.50 | 100.0 / 25.0 |",
		"| within | 2.50x | 0.50x | 6.00x |",
		"2.50x at 0.50x the p99 — **met**",
		">= 3x envoyproxy/ratelimit's throughput on the same Redis: 2.50x — **missed**",
		"60,000 — **met**",
		"requests_per_unit: 1000000",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("section lacks %q; got:\n%s", want, got)
		}
	}

	// One node alone renders as before there were topologies: no
	// topology headings, no cluster, no scaling.
	for _, unwanted := range []string{"####", "Redis Cluster", "### Redis: one node", "Scaling"} {
		if strings.Contains(got, unwanted) {
			t.Errorf("one node alone: section has %q; got:\n%s", unwanted, got)
		}
	}

	rep.topologies[0].legs[1].unavailable = "no redis store"
	rep.topologies[0].workloads[0].runs = slices.DeleteFunc(rep.topologies[0].workloads[0].runs, func(r legRun) bool { return r.leg == legXDSRedis })
	got = render(rep)
	for _, want := range []string{"**xds-server, Redis store: not measured.** no redis store", "| xds-server, Redis store | not measured |",
		"| within | - | - | 6.00x |", "xds-server with Redis vs envoyproxy/ratelimit: **not measured**"} {
		if !strings.Contains(got, want) {
			t.Errorf("section lacks %q; got:\n%s", want, got)
		}
	}
}

func TestCommandLineHidesWorkDir(t *testing.T) {
	got := commandLine([]string{"-compare", "-xds-bin", "/tmp/x.1/xds-server", "-envoy-bin", "/home/u/.cache/x/bin/service_cmd"}, "/tmp/x.1", "/home/u/.cache/x")
	if want := "go run ./bench/rlsbench -compare -xds-bin $TMP/xds-server -envoy-bin $XDS_SERVER_CACHE/bin/service_cmd"; got != want {
		t.Errorf("commandLine = %q, want %q", got, want)
	}
}

// fakeRLS answers OVER_LIMIT for the key "tenant", OK without a limit for
// the key "none" and OK with a limit otherwise.
type fakeRLS struct {
	rlsv3.UnimplementedRateLimitServiceServer
}

func (fakeRLS) ShouldRateLimit(_ context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	resp := &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK}
	limit := &rlsv3.RateLimitResponse_RateLimit{RequestsPerUnit: 10, Unit: rlsv3.RateLimitResponse_RateLimit_SECOND}
	for _, d := range req.Descriptors {
		s := &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK, CurrentLimit: limit}
		switch d.Entries[0].Key {
		case "tenant":
			s.Code, resp.OverallCode = rlsv3.RateLimitResponse_OVER_LIMIT, rlsv3.RateLimitResponse_OVER_LIMIT
		case "none":
			s.CurrentLimit = nil
		}
		resp.Statuses = append(resp.Statuses, s)
	}
	return resp, nil
}

// TestRunBothClients loads an in-process fake RLS over an in-memory
// listener (no network) with each client.
func TestRunBothClients(t *testing.T) {
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer()
	rlsv3.RegisterRateLimitServiceServer(srv, fakeRLS{})
	go srv.Serve(lis)
	defer srv.Stop()
	dialer := func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }
	for _, client := range []string{clientH2, clientGRPC} {
		for _, key := range []string{"user", "tenant", "none"} {
			t.Run(client+"/"+key, func(t *testing.T) {
				cfg := LoadConfig{Addr: "bufconn", Concurrency: 8, Conns: 2, Duration: 150 * time.Millisecond, Client: client, dialer: dialer,
					Workload: Workload{Domain: "d", Key: key, ValuePrefix: "v", Keys: 100, Descriptors: 3}}
				samples := 0
				cfg.Sample = func() { samples++ }
				res, err := Run(context.Background(), cfg)
				if err != nil {
					t.Fatal(err)
				}
				if res.Errors != 0 || res.Requests == 0 || samples != 2 {
					t.Fatalf("requests %d, errors %d (%s), samples %d", res.Requests, res.Errors, res.FirstError, samples)
				}
				want := map[string]*uint64{"user": &res.OK, "tenant": &res.OverLimit, "none": &res.Unlimited}[key]
				if *want != 3*res.Requests || res.Decisions() != 3*res.Requests {
					t.Errorf("decisions %+v for %d requests", res, res.Requests)
				}
				if res.Latency.Count() != res.Requests || res.DecisionsPerSec() <= 0 {
					t.Errorf("latency count %d for %d requests", res.Latency.Count(), res.Requests)
				}
			})
		}
	}
}

func TestLoadConfigValidate(t *testing.T) {
	ok := LoadConfig{Addr: "a:1", Concurrency: 4, Conns: 2, Duration: time.Second, Workload: Workload{Domain: "d", Key: "k", Keys: 1, Descriptors: 1}}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mod := range map[string]func(*LoadConfig){
		"more conns than workers": func(c *LoadConfig) { c.Conns = 5 },
		"no duration":             func(c *LoadConfig) { c.Duration = 0 },
		"unknown client":          func(c *LoadConfig) { c.Client = "http3" },
		"bad workload":            func(c *LoadConfig) { c.Workload.Keys = 0 },
	} {
		c := ok
		mod(&c)
		if c.Validate() == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// The report names the server behind the xds-server legs.
func TestServerNote(t *testing.T) {
	if got := serverNote(""); !strings.Contains(got, "default `ratelimit.server` (lean") {
		t.Errorf("default: %q", got)
	}
	if got := serverNote("grpc"); !strings.Contains(got, "XDS_SERVER_RATELIMIT_SERVER=grpc") {
		t.Errorf("grpc: %q", got)
	}
}

func TestParseSweep(t *testing.T) {
	if got, err := parseSweep(" 256,128,256 ", 64); err != nil || !slices.Equal(got, []int{128, 256}) {
		t.Errorf("parseSweep = %v, %v; want [128 256]", got, err)
	}
	if got, err := parseSweep("", 64); err != nil || got != nil {
		t.Errorf("empty: %v, %v", got, err)
	}
	for _, bad := range []string{"64", "32", "x", "20000"} {
		if _, err := parseSweep(bad, 64); err == nil {
			t.Errorf("parseSweep(%q) accepted", bad)
		}
	}
}

// The sweep's peaks: envoyproxy/ratelimit's highest decisions/s, and
// xds-server's highest among the loads whose p99 stays within the p99 of
// that peak (not its highest overall, which costs more latency here).
func TestRenderSweep(t *testing.T) {
	wl := workloadsFor("rlsbench", 10000)[0]
	point := func(n int, e, x float64, ep, xp time.Duration) sweepPoint {
		return sweepPoint{concurrency: n, runs: []legRun{fakeRun(legEnvoy, 0, e, ep), fakeRun(legXDSRedis, 0, x, xp)}}
	}
	top := topologyResult{name: topoCluster, workloads: []workloadResult{{named: wl, runs: point(64, 15000, 40000, 10*time.Millisecond, 3*time.Millisecond).runs}},
		sweep: []sweepPoint{point(128, 20000, 65000, 15*time.Millisecond, 5*time.Millisecond), point(256, 19000, 90000, 30*time.Millisecond, 16*time.Millisecond)}}
	var b strings.Builder
	renderSweep(&b, top, 64, "####")
	got := b.String()
	for _, want := range []string{
		"| 64 | 15,000 | 10.00 ms | 1.00 / 0.25 / 0.50 | 40,000 | 3.00 ms |",
		"| 256 | 19,000 | 30.00 ms |",
		"peaks at 20,000 decisions/s (128 in flight, p99 15.00 ms)",
		"at 65,000 decisions/s (128 in flight, p99 5.00 ms): **3.25x**",
		"each at its capacity: 3.25x at 0.33x the p99 — **met**",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("sweep lacks %q; got:\n%s", want, got)
		}
	}
	b.Reset()
	renderSweep(&b, topologyResult{name: topoCluster, workloads: top.workloads}, 64, "####")
	if b.Len() != 0 {
		t.Errorf("no sweep: wrote %q", b.String())
	}
}
