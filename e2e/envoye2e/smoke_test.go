package envoye2e

import (
	"testing"
	"time"

	"github.com/xds-server/xds-server/e2e/harness"
)

// TestEnvoyConnects: an Envoy bootstrapped by `xds-server envoy bootstrap`
// connects (state of the world and delta), accepts the clusters and
// endpoints of the built-in example and shows them in /clusters.
func TestEnvoyConnects(t *testing.T) {
	skipShort(t)
	srv := harness.StartServer(t)
	srv.WaitReady(t)
	for _, delta := range []bool{false, true} {
		e := harness.StartEnvoy(t, harness.EnvoyOptions{NodeID: map[bool]string{false: "sotw-1", true: "delta-1"}[delta],
			XDSAddr: srv.XDSAddr, Delta: delta})
		hosts := e.AwaitHosts(t, "echo", 30*time.Second, func(h []harness.EnvoyHost) bool { return len(h) > 0 })
		t.Logf("%s: echo hosts %s", e.NodeID, harness.DescribeHosts(hosts))
		e.AssertAccepted(t)
	}
}
