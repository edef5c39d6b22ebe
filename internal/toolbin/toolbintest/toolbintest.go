// Package toolbintest gives tests the external tools of package toolbin:
// the path of one, or the test skipped without it (failed when
// XDS_SERVER_REQUIRE_INTEGRATION=1, as CI sets). It imports only toolbin.
package toolbintest

import (
	"os"
	"testing"

	"github.com/xds-server/xds-server/internal/toolbin"
)

// RequireIntegrationEnv, set to 1, makes a missing tool a failure.
const RequireIntegrationEnv = "XDS_SERVER_REQUIRE_INTEGRATION"

// Envoy returns the envoy binary (toolbin.Envoy), or skips t without one.
func Envoy(t testing.TB) string {
	t.Helper()
	bin, err := toolbin.Envoy()
	if err != nil {
		if os.Getenv(RequireIntegrationEnv) == "1" {
			t.Fatalf("%v; required because %s=1", err, RequireIntegrationEnv)
		}
		t.Skipf("%v; skipping (set %s=1 to fail instead)", err, RequireIntegrationEnv)
	}
	return bin
}
