package e2e

import (
	"slices"
	"testing"

	"github.com/hashicorp/consul/api"
)

// TestPolicyFailover: a service-resolver's Failover (v2 fails over to
// v1) puts v2's share of a 50/50 split on the aggregate cluster
// web~v2+web~v1, so that when every v2 instance turns critical under
// load grpc-go moves that share to v1 by itself: 0 failed RPCs, every
// RPC answered by v1, and the route never changed.
func TestPolicyFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	res := versionSubsets("web", "")
	res.Failover = map[string]api.ServiceResolverFailover{"v2": {ServiceSubset: "v1"}}
	e, v1, v2 := startWeb(t, res, splitter("web", 50, 50))
	e.awaitSent(t, "the failover aggregate", func(c nodeConfig) bool {
		return slices.Contains(c.clusters(), "web~v2+web~v1") && sameShares(c.catchAll("web"), map[string]float64{"web~v1": 0.5, "web~v2+web~v1": 0.5})
	})
	checkShare(t, "50/50 before", measure(t, e.call, 2000), v2, 0.5)

	l := startLoader(t, e.call, 4)
	critical := map[string]bool{}
	for _, id := range backendIDs(v2) {
		critical[id] = true
	}
	setTTLs(t, e.consul, critical, api.HealthCritical)
	e.awaitSnapshot(t, "web~v2 without serving endpoints", func(c nodeConfig) bool { return len(c.endpointAddrs("web~v2")) == 0 })
	// The snapshot leads the client: grpc-go has the empty web~v2 (and
	// fails over) once a batch of 500 RPCs has none on v2 (at a 50%
	// share, by chance with probability 0.5^500). Then every RPC must be
	// v1's, with the load still on.
	awaitNoneOn(t, e.call, backendIDs(v2), "the client failed over to v1")
	got := measure(t, e.call, 2000)
	l.stop()
	if !onlyFrom(got, backendIDs(v1)) {
		t.Errorf("with v2 critical: 2000 RPCs reached %v; want only v1's backends", got)
	}
	l.check(t, "v2 failing over under load")
	e.awaitSnapshot(t, "the route unchanged", func(c nodeConfig) bool {
		return sameShares(c.catchAll("web"), map[string]float64{"web~v1": 0.5, "web~v2+web~v1": 0.5})
	})
}
