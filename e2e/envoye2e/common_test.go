package envoye2e

import (
	"testing"

	"github.com/xds-server/xds-server/e2e/harness"
)

// skipShort skips an end-to-end test under -short.
func skipShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end test with a real Envoy")
	}
}

// startServer runs xds-server on consul's catalog with fast discovery
// and debounce, plus extra flags, and waits until it is ready.
func startServer(t *testing.T, consul *harness.ConsulAgent, extra ...string) *harness.Server {
	t.Helper()
	return startServerWith(t, consul, harness.ServerOptions{}, extra...)
}

// startServerWith is startServer with harness options.
func startServerWith(t *testing.T, consul *harness.ConsulAgent, opts harness.ServerOptions, extra ...string) *harness.Server {
	t.Helper()
	args := append([]string{
		"--discovery.source", "consul", "--discovery.consul.address", consul.Addr(),
		"--discovery.consul.min_interval", "10ms", "--discovery.consul.backoff_base", "50ms",
		"--discovery.consul.backoff_max", "500ms", "--xds.debounce", "10ms"}, extra...)
	srv := harness.StartServerWith(t, opts, args...)
	srv.WaitReady(t)
	return srv
}
