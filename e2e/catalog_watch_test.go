package e2e

import (
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/xds-server/xds-server/e2e/harness"
)

// watchChecks watches, with blocking queries on agent, the health checks
// of service until the checks of every id in ids have status, and sends
// the time it saw that (the channel closes without one if the watch ends
// first, after 30 s). Start it before changing the checks: a failover's
// clock starts when Consul's catalog shows the change, since an agent may
// hold a check update back for its anti-entropy sync (up to a few seconds
// after it started), which is Consul's time, not ours.
func watchChecks(t *testing.T, agent *harness.ConsulAgent, service string, ids []string, status string) <-chan time.Time {
	t.Helper()
	health := agent.Client().Health()
	_, meta, err := health.Checks(service, nil)
	if err != nil {
		t.Fatal(err)
	}
	at := make(chan time.Time, 1)
	go func() {
		defer close(at)
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
			checks, m, err := health.Checks(service, &api.QueryOptions{WaitIndex: meta.LastIndex, WaitTime: 5 * time.Second})
			if err != nil {
				return
			}
			meta = m
			n := 0
			for _, c := range checks {
				if c.Status == status && slices.Contains(ids, c.ServiceID) {
					n++
				}
			}
			if n == len(ids) {
				at <- time.Now()
				return
			}
		}
	}()
	return at
}

// catalogAt is the time watchChecks sent; it fails the test if none came.
func catalogAt(t *testing.T, at <-chan time.Time) time.Time {
	t.Helper()
	when, ok := <-at
	if !ok {
		t.Fatal("Consul's catalog never showed the checks' new status")
	}
	return when
}
