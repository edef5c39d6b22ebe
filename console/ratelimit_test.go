package console

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	rlcommonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/xds-server/xds-server/ratelimit"
)

const rlYAML = `
domain: api
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: open
    rate_limit: {unlimited: true}
`

// newRLService is a real rate-limit service (memory store) observed by
// stats.
func newRLService(t testing.TB, stats *Stats, now func() time.Time) *ratelimit.Service {
	t.Helper()
	cfg, err := ratelimit.Load(ratelimit.File{Name: "api.yaml", Data: []byte(rlYAML)})
	if err != nil {
		t.Fatal(err)
	}
	mem, err := ratelimit.NewMemory(ratelimit.MemoryConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mem.Close)
	sc := ratelimit.ServiceConfig{Store: mem, Config: cfg, Now: now}
	if stats != nil {
		sc.Observer = stats
	}
	svc, err := ratelimit.NewService(sc)
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

func rlRequest(domain string, kv ...string) *rlsv3.RateLimitRequest {
	d := &rlcommonv3.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &rlcommonv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return &rlsv3.RateLimitRequest{Domain: domain, Descriptors: []*rlcommonv3.RateLimitDescriptor{d}}
}

func TestRateLimitAPI(t *testing.T) {
	stats, err := NewStats(nil)
	if err != nil {
		t.Fatal(err)
	}
	now := t0
	svc := newRLService(t, stats, func() time.Time { return now })
	_, _, h := newTestConsole(t, func(c *Config) { c.Rules, c.Stats = svc, stats })
	ask := func(kv ...string) {
		if _, err := svc.ShouldRateLimit(context.Background(), rlRequest("api", kv...)); err != nil {
			t.Fatal(err)
		}
	}
	stats.Tick(now)
	for range 7 { // alice: 5 admitted, 2 over
		ask("user", "alice")
	}
	for range 2 {
		ask("user", "bob", "criticality", "SHEDDABLE")
	}
	ask("open", "x")
	now = now.Add(10 * time.Second)
	stats.Tick(now)
	var v RateLimitView
	get(t, h, "/ui/api/ratelimit", http.StatusOK, &v)
	if len(v.Domains) != 1 || v.Domains[0].Domain != "api" {
		t.Fatalf("domains = %+v", v.Domains)
	}
	d := v.Domains[0]
	if len(d.Rules) != 2 || d.Rules[0].Limit != "unlimited" || d.Rules[1].Key != "api.user" || d.Rules[1].Limit != "5/minute" {
		t.Errorf("rules = %+v", d.Rules)
	}
	// The unlimited rule is not decided by the store: 9 decisions.
	if d.Decisions != 9 || d.OverLimit != 2 || d.PerSecond != 0.9 {
		t.Errorf("decisions = %d, over %d, per second %v", d.Decisions, d.OverLimit, d.PerSecond)
	}
	if share := d.OverShare; share < 0.22 || share > 0.23 {
		t.Errorf("over-limit share = %v, want 2/9", share)
	}
	if len(d.Nearest) != 2 || !strings.Contains(d.Nearest[0].Key, "alice") || d.Nearest[0].Ratio < 1 || d.Nearest[0].Limit != 5 {
		t.Errorf("nearest = %+v", d.Nearest)
	}
	classes := map[string]ClassStat{}
	for _, c := range d.Criticality {
		classes[c.Class] = c
	}
	if c := classes["CRITICAL"]; c.Admitted != 5 || c.Refused != 2 {
		t.Errorf("CRITICAL = %+v", c)
	}
	if c := classes["SHEDDABLE"]; c.Admitted != 2 || c.Accepted != 1 {
		t.Errorf("SHEDDABLE = %+v", c)
	}
}

// TestStatsBounds floods the statistics from many goroutines with
// distinct keys and domains: at most MaxDomains domains and TopK keys
// each are kept, and the keys kept are the nearest their limit.
func TestStatsBounds(t *testing.T) {
	reg := prometheus.NewRegistry()
	stats, err := NewStats(reg)
	if err != nil {
		t.Fatal(err)
	}
	stats.Tick(t0)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 20_000 {
				stats.ObserveDecision(ratelimit.Decision{Domain: "d" + strconv.Itoa((g*20_000+i)%100), Key: "k" + strconv.Itoa(g*20_000+i),
					Used: uint64(i % 1000), Limit: 1000, Allowed: true, Hits: 1})
			}
		})
	}
	wg.Wait()
	// A quiet pass: every key offered once more, without contention, so
	// the top-k of d0 holds its nearest keys.
	for i := range 1000 {
		stats.ObserveDecision(ratelimit.Decision{Domain: "d0", Key: "quiet" + strconv.Itoa(i), Used: uint64(i), Limit: 1000, Allowed: true})
	}
	doms := stats.Domains()
	if len(doms) != MaxDomains {
		t.Errorf("%d domains kept, want %d", len(doms), MaxDomains)
	}
	if d := testutil.ToFloat64(stats.dropped); d == 0 {
		t.Error("decisions of domains beyond the bound not counted")
	}
	for _, d := range doms {
		if len(d.Nearest) > TopK {
			t.Fatalf("domain %s keeps %d keys, bound %d", d.Domain, len(d.Nearest), TopK)
		}
		if d.Domain == "d0" {
			if len(d.Nearest) != TopK || d.Nearest[0].Ratio < 0.999 || d.Nearest[TopK-1].Ratio < 0.98 {
				t.Errorf("d0 nearest: first %v, last %v", d.Nearest[0].Ratio, d.Nearest[len(d.Nearest)-1].Ratio)
			}
		}
	}
	// Keys not decided for a minute leave the top-k.
	stats.Tick(t0.Add(2 * time.Minute))
	for _, d := range stats.Domains() {
		if len(d.Nearest) != 0 {
			t.Errorf("domain %s keeps %d stale keys", d.Domain, len(d.Nearest))
		}
	}
}

// BenchmarkObserveDecision is the console's cost per decided descriptor
// (the observer alone), from all cores at once on one domain.
func BenchmarkObserveDecision(b *testing.B) {
	stats, _ := NewStats(nil)
	stats.Tick(t0)
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = "api_user_" + strconv.Itoa(i) + "_"
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			i++
			stats.ObserveDecision(ratelimit.Decision{Domain: "api", Key: keys[i%len(keys)], Rule: "api.user",
				Used: uint64(i % 100), Limit: 100, Allowed: i%7 != 0, Hits: 1})
		}
	})
}

// BenchmarkServiceObserver is a real service's ShouldRateLimit (memory
// store) with and without the console's observer: the difference is the
// overhead per decision.
func BenchmarkServiceObserver(b *testing.B) {
	for _, name := range []string{"none", "console"} {
		b.Run(name, func(b *testing.B) {
			var stats *Stats
			if name == "console" {
				stats, _ = NewStats(nil)
				stats.Tick(time.Now())
			}
			svc := newRLService(b, stats, nil)
			reqs := make([]*rlsv3.RateLimitRequest, 1024)
			for i := range reqs {
				reqs[i] = rlRequest("api", "user", "u"+strconv.Itoa(i))
			}
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					i++
					if _, err := svc.ShouldRateLimit(context.Background(), reqs[i%len(reqs)]); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// TestStatsBoundKeyLength: a key longer than MaxKeyBytes is kept as its
// first MaxKeyBytes (not splitting a UTF-8 sequence), a copy marked
// truncated, and later decisions of the same long key update that entry.
func TestStatsBoundKeyLength(t *testing.T) {
	stats, _ := NewStats(nil)
	stats.Tick(t0)
	long := "api_user_" + strings.Repeat("é", 4096) + "_"
	for used := range uint64(3) {
		stats.ObserveDecision(ratelimit.Decision{Domain: "api", Key: long, Used: used + 1, Limit: 10, Allowed: true, Hits: 1})
	}
	stats.ObserveDecision(ratelimit.Decision{Domain: "api", Key: "api_user_bob_", Used: 1, Limit: 10, Allowed: true, Hits: 1})
	d := stats.Domains()[0]
	if len(d.Nearest) != 2 {
		t.Fatalf("nearest = %+v, want the long key once and bob", d.Nearest)
	}
	k := d.Nearest[0]
	if !k.Truncated || len(k.Key) > MaxKeyBytes || len(k.Key) < MaxKeyBytes-1 || !utf8.ValidString(k.Key) ||
		!strings.HasPrefix(long, k.Key) || k.Used != 3 {
		t.Errorf("long key kept as %d bytes (truncated %v, valid UTF-8 %v, used %d), want its first %d bytes, used 3",
			len(k.Key), k.Truncated, utf8.ValidString(k.Key), k.Used, MaxKeyBytes)
	}
	if d.Nearest[1].Truncated || d.Nearest[1].Key != "api_user_bob_" {
		t.Errorf("short key = %+v", d.Nearest[1])
	}
}
