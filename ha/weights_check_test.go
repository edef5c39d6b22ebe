package ha

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/xds-server/xds-server/e2e/harness"
	"github.com/xds-server/xds-server/weights"
)

// cutTransport fails every request once cut: the replica can no longer
// reach Consul (as if killed, for Consul's side of things).
type cutTransport struct {
	next http.RoundTripper
	cut  atomic.Bool
}

func (c *cutTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if c.cut.Load() {
		return nil, errors.New("cut")
	}
	return c.next.RoundTrip(r)
}

// TestLeaderLostWithItsHealthCheck: the leader's session is tied to an
// HTTP check on the replica (SessionChecks); when the replica dies (its
// check fails, it reaches Consul no more), another replica leads within
// the check interval plus the lock delay, not the session TTL, and the
// table served never falls back.
func TestLeaderLostWithItsHealthCheck(t *testing.T) {
	if testing.Short() {
		t.Skip("integration: real Consul")
	}
	agent := harness.Consul(t)
	alive := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer alive.Close()
	const checkEvery = 500 * time.Millisecond
	if err := agent.Client().Agent().CheckRegister(&api.AgentCheckRegistration{ID: "xds-1-alive", Name: "xds-1 alive",
		AgentServiceCheck: api.AgentServiceCheck{HTTP: alive.URL, Interval: checkEvery.String(), Timeout: "200ms", Status: api.HealthPassing}}); err != nil {
		t.Fatal(err)
	}
	ct := &cutTransport{next: http.DefaultTransport}
	c1, err := api.NewClient(&api.Config{Address: agent.Addr(), HttpClient: &http.Client{Transport: ct}})
	if err != nil {
		t.Fatal(err)
	}
	r1 := startWReplicaWith(t, c1, "xds-1", weights.ModeGlobal, nil, []string{"xds-1-alive"})
	leaderOf(t, []*wReplica{r1}, 10*time.Second)
	r2 := startWReplica(t, agent.Client(), "xds-2", weights.ModeGlobal, nil)
	stop := reporter(t, func() *wReplica { return r2 }, func() map[string]float64 {
		return map[string]float64{"a": 0.4, "b": 0.2, "c": 0.8}
	})
	defer stop()
	waitSame(t, []*wReplica{r1, r2}, 10*time.Second, ratio241)
	mark := len(r2.rec.history()) - 1
	ct.cut.Store(true)
	alive.Close()
	died := time.Now()
	leaderOf(t, []*wReplica{r2}, testLockDelay+10*time.Second)
	took := time.Since(died)
	t.Logf("leader xds-1 died (check every %v, lock delay %v): xds-2 leads after %v (session TTL 10s)", checkEvery, testLockDelay, took)
	if took > testLockDelay+checkEvery+testInterval+2*time.Second {
		t.Errorf("takeover after %v, want within check interval + lock delay + publish interval (+2s slack)", took)
	}
	for _, w := range r2.rec.history()[mark:] {
		if isFallback(w) {
			t.Errorf("xds-2 served the fallback %v", w)
		}
	}
}
