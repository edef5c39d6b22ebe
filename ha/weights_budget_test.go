package ha

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/xds-server/xds-server/e2e/harness"
	"github.com/xds-server/xds-server/weights"
)

// countingTransport counts the requests that write to Consul (every verb
// but GET: transactions, session create and renew, lock acquire and
// release).
type countingTransport struct {
	next   http.RoundTripper
	writes atomic.Int64
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodGet {
		c.writes.Add(1)
	}
	return c.next.RoundTrip(r)
}

// TestPublishBudgetAtScale: a replica with 1,000 endpoints and 1,000
// nodes (a summary that changes at every build) makes one write per
// publish interval plus its session's upkeep, every value under 512 KiB,
// and another replica reads the summary and the table back.
func TestPublishBudgetAtScale(t *testing.T) {
	if testing.Short() {
		t.Skip("integration: real Consul")
	}
	agent := harness.Consul(t)
	ct := &countingTransport{next: http.DefaultTransport}
	client, err := api.NewClient(&api.Config{Address: agent.Addr(), HttpClient: &http.Client{Transport: ct}})
	if err != nil {
		t.Fatal(err)
	}
	const interval = 500 * time.Millisecond
	var txns atomic.Int64
	w, err := NewWeights(WeightsConfig{Client: client, Prefix: "budget/", Replica: "xds-1", PublishInterval: interval,
		LockDelay: time.Second, CountWrite: func(string) { txns.Add(1) }, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	reader, err := NewWeights(WeightsConfig{Client: agent.Client(), Prefix: "budget/", Replica: "xds-2",
		PublishInterval: interval, LockDelay: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	big := sizeSummary(t, 1000, 1000, 20)
	table := weights.SharedTable{Weights: map[string]map[string]uint32{"api": {}}}
	for i := range 1000 {
		table.Weights["api"][fmt.Sprintf("api-%04d", i)] = uint32(100 + i)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	defer func() { cancel(); <-done; <-done }()
	go func() { w.Run(ctx); done <- struct{}{} }()
	for deadline := time.Now().Add(10 * time.Second); !w.Leader(); {
		if time.Now().After(deadline) {
			t.Fatal("the only candidate did not lead within 10s")
		}
		time.Sleep(10 * time.Millisecond) // it leads once its session and lock are in
	}
	go func() { reader.Run(ctx); done <- struct{}{} }() // after: the lead stays with w
	base, start := ct.writes.Load(), time.Now()
	const run = 5 * time.Second
	for i := 0; time.Since(start) < run; i++ {
		s := big
		s.At += int64(i) // ages move: the content changes at every build, as with live reports
		w.PublishSummary(s)
		table.At = int64(i)
		w.WriteTable(table)
		time.Sleep(100 * time.Millisecond) // the pipeline's update period
	}
	elapsed := time.Since(start)
	writes := ct.writes.Load() - base
	perInterval := float64(writes) / (elapsed.Seconds() / interval.Seconds())
	st := w.Status()
	t.Logf("1,000 endpoints x 1,000 nodes: %d Consul writes in %v (%d transactions) at publish interval %v = %.2f writes per interval; %d bytes per summary",
		writes, elapsed.Round(time.Millisecond), txns.Load(), interval, perInterval, st.LastBytes)
	t.Logf("at the default ha.publish_interval 5s and session TTL 10s (renewed every 5s): %.2f writes/s per replica",
		1/5.0+1/5.0)
	if max := int64(elapsed/interval) + 2; writes > max {
		t.Errorf("%d writes in %v, want at most %d (one transaction per publish interval, a session renewal)", writes, elapsed, max)
	}
	// Encoding a summary this size takes seconds under the race detector
	// on a busy machine: the first publish may come after the run.
	for deadline := time.Now().Add(60 * time.Second); st.LastBytes == 0; st = w.Status() {
		if time.Now().After(deadline) {
			t.Fatal("no summary published within 60s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if st.LastBytes > MaxWeightsValueBytes {
		t.Errorf("summary of %d bytes", st.LastBytes)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		sums := reader.Summaries()
		_, seq, ok := reader.Table()
		if len(sums) == 1 && len(sums[0].Services) == 1 && len(sums[0].Services[0].Groups) == 1000 && ok && seq > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the other replica did not read the summary and table back (%d summaries, table %v)", len(sums), ok)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
