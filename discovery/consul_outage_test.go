package discovery

import (
	"bytes"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xds-server/xds-server/e2e/harness"
)

func TestOutageLogsFirstThenEvery30s(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	var o outage
	type step struct {
		at       time.Duration
		log      bool
		held     int
		failures int
	}
	for i, s := range []step{
		{0, true, 0, 1},
		{time.Second, false, 0, 2},
		{29 * time.Second, false, 0, 3},
		{30 * time.Second, true, 2, 4},
		{31 * time.Second, false, 0, 5},
		{61 * time.Second, true, 1, 6},
	} {
		log, held := o.fail(t0.Add(s.at))
		if log != s.log || held != s.held || o.failures != s.failures {
			t.Errorf("step %d (%v): log=%v held=%d failures=%d, want %+v", i, s.at, log, held, o.failures, s)
		}
	}
	down, lasted, failures := o.recover(t0.Add(75 * time.Second))
	if !down || lasted != 75*time.Second || failures != 6 {
		t.Errorf("recover = %v %v %d, want true 75s 6", down, lasted, failures)
	}
	if down, _, _ := o.recover(t0.Add(80 * time.Second)); down {
		t.Error("a second recover reports an outage")
	}
	if log, _ := o.fail(t0.Add(81 * time.Second)); !log {
		t.Error("the first failure of a new outage is not logged")
	}
}

// syncBuffer is a log sink safe for the loops' goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (s *syncBuffer) count(re *regexp.Regexp) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(re.FindAllString(s.b.String(), -1))
}

// TestConsulOutageLogs stops a real Consul agent under the source: each
// blocking loop (catalog, web) writes one WARN at the first failure, then
// nothing while the clock stands still however many retries fail, one more
// WARN (with the number held back) once the clock passes 30s, and one INFO
// line with the outage's length when Consul is back.
func TestConsulOutageLogs(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a consul agent")
	}
	a := harness.Consul(t)
	a.RegisterFile(t, ttlService("web", "web-1", 8081, nil, nil))
	var clock atomic.Int64
	clock.Store(time.Unix(1_000_000, 0).UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()) }
	var logs syncBuffer
	h := runConsul(t, a.Addr(), ConsulConfig{Now: now, BackoffBase: time.Millisecond, BackoffMax: 5 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	h.await(t, "web", func(s Snapshot) bool { return len(health(s, "web")) == 1 }, nil)

	m := h.metrics.Errors.WithLabelValues("consul")
	before := metricValue(t, m)
	a.Stop()
	eventually(t, "10 failed queries per loop", func() bool { return metricValue(t, m) >= before+20 })
	warn := regexp.MustCompile(`level=WARN msg="consul unreachable; retrying" component=discovery.consul kind=(catalog|health) service=\S* attempt=\d+ retry_in=\S+ down_for=\S+ suppressed=\d+ error=`)
	if got := logs.count(warn); got != 2 {
		t.Fatalf("%d WARN lines after 20 failures with the clock still, want 2 (one per loop):\n%s", got, logs.String())
	}
	clock.Add(int64(30 * time.Second))
	eventually(t, "a second WARN per loop", func() bool { return logs.count(warn) == 4 })
	again := regexp.MustCompile(`msg="consul unreachable; retrying" component=discovery.consul kind=\w+ service=\S* attempt=([2-9]|\d\d+) retry_in=\S+ down_for=30s suppressed=[1-9]`)
	if got := logs.count(again); got != 2 {
		t.Errorf("second WARN lines = %d, want 2 with down_for=30s and a held-back count:\n%s", got, logs.String())
	}
	clock.Add(int64(15 * time.Second))
	a.Start()
	// The catalog loop always recovers. The restarted dev agent starts
	// empty and registers web from its config file a moment later, so the
	// catalog may first answer without web, which ends web's health loop
	// before it logs its own recovery: that line is optional.
	up := regexp.MustCompile(`level=INFO msg="consul query recovered" component=discovery.consul kind=\w+ service=\S* failures=\d+ down_for=45s`)
	upCatalog := regexp.MustCompile(`level=INFO msg="consul query recovered" component=discovery.consul kind=catalog service=\S* failures=\d+ down_for=45s`)
	eventually(t, "the catalog loop's recovery line", func() bool { return logs.count(upCatalog) == 1 })
	if got := logs.count(up); got > 2 {
		t.Errorf("%d recovery lines, want at most one per loop:\n%s", got, logs.String())
	}
	if got := logs.count(warn); got != 4 {
		t.Errorf("%d WARN lines in all, want 4", got)
	}
	if strings.Contains(logs.String(), "level=DEBUG") {
		t.Error("DEBUG lines at level INFO")
	}
}
