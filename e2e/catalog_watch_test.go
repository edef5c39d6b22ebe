package e2e

import (
	"maps"
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

// setTTLs sets the TTL checks ("ttl-<id>") of ids on agent to status.
func setTTLs(t *testing.T, agent *harness.ConsulAgent, ids map[string]bool, status string) {
	t.Helper()
	for id := range ids {
		if err := agent.Client().Agent().UpdateTTL("ttl-"+id, "e2e", status); err != nil {
			t.Fatal(err)
		}
	}
}

// failOver turns the checks of the "echo" instances in from critical on
// agent, waits until call is served outside them, and returns how long
// after Consul's catalog showed the change that was (logged, with the
// agent's own lag, under what).
func failOver(t *testing.T, agent *harness.ConsulAgent, call callFunc, from map[string]bool, what string) time.Duration {
	t.Helper()
	ids := slices.Sorted(maps.Keys(from))
	seen := watchChecks(t, agent, "echo", ids, api.HealthCritical)
	setTTLs(t, agent, from, api.HealthCritical)
	critical := time.Now()
	moved := awaitZone(t, call, from, false, 10*time.Second)
	inCatalog := catalogAt(t, seen)
	t.Logf("%s: the client moved %v after Consul's catalog showed it (%v after the TTL update)",
		what, moved.Sub(inCatalog).Round(time.Millisecond), inCatalog.Sub(critical).Round(time.Millisecond))
	return moved.Sub(inCatalog)
}
